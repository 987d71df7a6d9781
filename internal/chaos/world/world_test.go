package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

// TestMain fails the package when a redis-server started by its tests
// outlives them (pgrep -P: children of this process only, not the other
// tests running on the machine).
func TestMain(m *testing.M) {
	code := m.Run()
	// a killed child is reaped by a goroutine of redistest: give it time
	var left []byte
	for range 50 {
		if left, _ = exec.Command("pgrep", "-a", "-P", fmt.Sprint(os.Getpid()), "redis-server").Output(); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: redis-server processes left after the tests: %q\n", left)
		code = 1
	}
	os.Exit(code)
}

// requireRedis skips t without redis-server and redis-cli, and fails it in
// CI.
func requireRedis(t *testing.T) {
	t.Helper()
	redistest.RequireCluster(t)
}

// testOptions hold faults briefly: the tests check that each is put in
// place and healed, not how the system behaves under it.
func testOptions() Options {
	return Options{
		PauseFor: 200 * time.Millisecond, Hold: 200 * time.Millisecond, MaxLatency: 30 * time.Millisecond,
		MigrateKeys: migrateKeys, Skews: []time.Duration{2 * time.Second},
	}
}

// migrateKeys are the keys the tests write before a migration.
var migrateKeys = func() []string {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("mig:%d", i)
	}
	return keys
}()

// writeKeys sets every key of keys through a client of w.
func writeKeys(t *testing.T, w World, keys []string) {
	t.Helper()
	c := w.NewClient(ClientOptions{MaxRetries: -1})
	defer c.Close()
	for _, k := range keys {
		if err := c.Set(context.Background(), k, 0, 10*time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// start starts a world, closed (and checked to leave no process) when t
// ends.
func start(t *testing.T, topology string, opts Options) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := Start(ctx, topology, opts)
	if err != nil {
		t.Fatalf("Start(%s) = %v", topology, err)
	}
	ww := w.(*world)
	t.Cleanup(func() { closeAndCheck(t, ww) })
	return ww
}

// closeAndCheck closes w and fails t when one of its processes still
// runs a few seconds later.
func closeAndCheck(t *testing.T, w *world) {
	t.Helper()
	pids := w.pids()
	if err := w.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d still runs after Close", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid names a process that is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// serves writes and reads a key through a client of w, retrying while
// the world settles (a client may hold a connection a fault ended).
func serves(t *testing.T, w World) {
	t.Helper()
	c := w.NewClient(ClientOptions{MaxRetries: -1, ReadTimeout: 2 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		key := fmt.Sprintf("serves:%d", time.Now().UnixNano())
		if err = c.Set(ctx, key, "v", time.Minute).Err(); err == nil {
			var got string
			if got, err = c.Get(ctx, key).Result(); err == nil && got == "v" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the world does not serve writes: %v", err)
}

func TestStartAndClose(t *testing.T) {
	requireRedis(t)
	if testing.Short() {
		t.Skip("TestFaults starts and closes every topology in -short")
	}
	for _, topo := range []string{Single, Sentinel, Cluster} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			w := start(t, topo, testOptions())
			if got := w.Topology(); got != topo {
				t.Errorf("Topology() = %q, want %q", got, topo)
			}
			want := map[string]int{Single: 1, Sentinel: 3, Cluster: 6}[topo]
			if got := len(w.Addrs()); got != want {
				t.Errorf("len(Addrs()) = %d, want %d", got, want)
			}
			serves(t, w)
		})
	}
}

func TestStartUnknownTopology(t *testing.T) {
	if _, err := Start(context.Background(), "ring", Options{}); err == nil {
		t.Fatal(`Start("ring") = nil error, want one naming the topology`)
	}
}

// TestFaults checks that the clients of every topology reach the masters
// through their proxies, then injects every fault kind of the topology,
// heals it, and checks that the world serves writes again.
func TestFaults(t *testing.T) {
	requireRedis(t)
	topos := []string{Single, Sentinel, Cluster}
	for _, topo := range topos {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			w := start(t, topo, testOptions())
			writeKeys(t, w, migrateKeys) // 64 keys: every cluster master gets some
			ms, err := w.masters(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if n := w.proxy(m).accepted.Load(); n == 0 {
					t.Errorf("the proxy of master %s accepted no connection: the client bypasses it", m)
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(topo))))
			for _, kind := range w.Kinds() {
				t.Run(kind, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					ev, heal, err := w.Inject(ctx, kind, rng)
					if err != nil {
						heal(ctx)
						t.Fatalf("Inject(%s) = %+v, %v", kind, ev, err)
					}
					if ev.Kind != kind || ev.Target == "" || ev.Detail == "" || ev.Err != "" {
						t.Errorf("Inject(%s) = %+v, want its kind, a target and a detail", kind, ev)
					}
					t.Logf("%s %s: %s", ev.Kind, ev.Target, ev.Detail)
					if topo == Cluster && ev.Target != "all" && len(ev.Slots) == 0 {
						t.Errorf("Inject(%s) on %s named no slots, want those of its shard", kind, ev.Target)
					}
					if topo != Cluster && ev.Slots != nil {
						t.Errorf("Inject(%s) on a %s world named slots %v, want none", kind, topo, ev.Slots)
					}
					if kind == ClockBehind || kind == ClockAhead {
						skew := testOptions().Skews[0]
						if kind == ClockBehind {
							skew = -skew
						}
						for _, a := range w.Addrs() {
							if w.server(a).Pid() != 0 && !slices.Contains(w.runningData(), a) {
								checkOffset(t, a, skew)
							}
						}
					}
					if err := heal(ctx); err != nil {
						t.Fatalf("heal(%s) = %v", kind, err)
					}
					if err := heal(ctx); err != nil {
						t.Fatalf("second heal(%s) = %v", kind, err)
					}
					serves(t, w)
				})
			}
		})
	}
}

// TestRoleFaultsDoNotOverlap: a second role fault while one is in place is
// refused with ErrBusy; a proxy fault is not.
func TestRoleFaultsDoNotOverlap(t *testing.T) {
	requireRedis(t)
	w := start(t, Single, testOptions())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, 2))
	_, heal, err := w.Inject(ctx, Pause, rng)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Inject(ctx, Kill, rng); !errors.Is(err, ErrBusy) {
		t.Errorf("Inject(kill) during a pause = %v, want ErrBusy", err)
	}
	_, healLatency, err := w.Inject(ctx, Latency, rng)
	if err != nil {
		t.Errorf("Inject(latency) during a pause = %v, want nil", err)
	}
	if err := errors.Join(heal(ctx), healLatency(ctx)); err != nil {
		t.Fatal(err)
	}
	_, heal, err = w.Inject(ctx, Kill, rng)
	if err != nil {
		t.Fatalf("Inject(kill) after the pause healed = %v", err)
	}
	if err := heal(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLatencyDelaysWrites: a write through NewClient during a latency
// fault takes at least the latency added.
func TestLatencyDelaysWrites(t *testing.T) {
	requireRedis(t)
	w := start(t, Single, Options{MaxLatency: 80 * time.Millisecond, Hold: 100 * time.Millisecond})
	c := w.NewClient(ClientOptions{MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ev, heal, err := w.Inject(ctx, Latency, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	added := w.proxy(w.single.Addr).latencyNow()
	if added < time.Millisecond {
		t.Fatalf("latency fault %+v set a latency of %v", ev, added)
	}
	for i := range 3 {
		begin := time.Now()
		if err := c.Set(ctx, fmt.Sprint("lat", i), "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took < added {
			t.Errorf("SET during %s took %v, want at least %v", ev.Detail, took, added)
		}
	}
	if err := heal(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSlowDelaysMaster: a slow fault delays the master's replies by a few
// ms (within [SlowLatency/4, SlowLatency]), and its heal takes them off.
func TestSlowDelaysMaster(t *testing.T) {
	requireRedis(t)
	w := start(t, Single, Options{Hold: 100 * time.Millisecond})
	c := w.NewClient(ClientOptions{MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ev, heal, err := w.Inject(ctx, Slow, rand.New(rand.NewPCG(4, 4)))
	if err != nil {
		t.Fatal(err)
	}
	added := w.proxy(w.single.Addr).latencyNow()
	if added < 2*time.Millisecond || added > 8*time.Millisecond || ev.Target != w.single.Addr {
		t.Fatalf("slow fault %+v added %v to %s's replies, want 2ms to 8ms to the master's", ev, added, ev.Target)
	}
	for i := range 3 {
		begin := time.Now()
		if err := c.Set(ctx, fmt.Sprint("slow", i), "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took < added {
			t.Errorf("SET during %s took %v, want at least %v", ev.Detail, took, added)
		}
	}
	if err := heal(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.proxy(w.single.Addr).latencyNow(); got != 0 {
		t.Errorf("latency after the heal = %v, want 0", got)
	}
}

// TestDropMidReplyIsAnError: a reply cut in its middle by a drop ends the
// call with an error at once, not a hang until the read timeout.
func TestDropMidReplyIsAnError(t *testing.T) {
	requireRedis(t)
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprint("reset=", reset), func(t *testing.T) {
			t.Parallel()
			w := start(t, Single, testOptions())
			c := w.NewClient(ClientOptions{MaxRetries: -1, ReadTimeout: 10 * time.Second})
			defer c.Close()
			ctx := context.Background()
			big := strings.Repeat("x", 1<<20)
			if err := c.Set(ctx, "big", big, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			p := w.proxy(w.single.Addr)
			p.cut(5*time.Second, reset)
			begin := time.Now()
			got, err := c.Get(ctx, "big").Result()
			if err == nil {
				t.Fatalf("GET during a cut window returned %d bytes, want an error", len(got))
			}
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("GET during a cut window took %v (%v), want an error well before the read timeout", took, err)
			}
			p.uncut()
			var herr error
			for range 3 { // the first call may meet a connection the cut ended
				if got, herr = c.Get(ctx, "big").Result(); herr == nil {
					break
				}
			}
			if herr != nil || got != big {
				t.Errorf("GET after the cut = %d bytes, %v; want %d bytes", len(got), herr, len(big))
			}
		})
	}
}

// TestInjectReplays: the same seed against the same world draws the same
// target and parameters.
func TestInjectReplays(t *testing.T) {
	requireRedis(t)
	w := start(t, Single, testOptions())
	ctx := context.Background()
	for _, kind := range []string{Latency, Stall, Pause} {
		var first Event
		for i := range 2 {
			ev, heal, err := w.Inject(ctx, kind, rand.New(rand.NewPCG(7, 7)))
			if err != nil {
				t.Fatal(err)
			}
			if err := heal(ctx); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = ev
			} else if ev.Target != first.Target || ev.Detail != first.Detail || ev.Hold != first.Hold {
				t.Errorf("Inject(%s) with the same seed = %q %q %v, then %q %q %v", kind, first.Target, first.Detail, first.Hold, ev.Target, ev.Detail, ev.Hold)
			}
		}
	}
}
