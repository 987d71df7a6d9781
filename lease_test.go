package redlimit_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// leasing is a memstore behind a wrapper that reports no capability but
// can release leases: the engine puts a deny cache in front of it.
type leasing struct {
	remote
}

func (l *leasing) Release(ctx context.Context, leases []algorithms.Lease) error {
	return l.next.Release(ctx, leases)
}

func (l *leasing) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	return l.next.Renew(ctx, leases, held)
}

func inFlightRule(n int64, lease time.Duration) redlimit.Rule {
	return redlimit.Rule{Name: "jobs", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(n, lease)}
}

// TestConcurrencyRelease: a Decision holds its slot until settled;
// settling twice (a clone shares the slots) frees nothing more; a denial's RetryAfter is when the
// earliest lease expires.
func TestConcurrencyRelease(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{inFlightRule(2, time.Minute)}})
	ctx := context.Background()
	a, b := e.Allow(ctx, "acme"), e.Allow(ctx, "acme")
	c := e.Allow(ctx, "acme")
	if !a.Allowed || !b.Allowed || c.Allowed || c.Rules[0].Result.RetryAfter != time.Minute || redlimit.Holds(c) {
		t.Fatalf("Allow ×3 = %v %v %+v, want allowed, allowed, denied for 1m holding nothing", a.Allowed, b.Allowed, c.Rules[0].Result)
	}
	if got := redlimit.Leases(a); len(got) != 1 || got[0].Period != time.Minute || got[0].Cost != 1 || !strings.HasSuffix(got[0].Key, ":jobs:cc:{acme}") {
		t.Fatalf("Leases() = %+v", got)
	}
	for range 2 {
		if err := e.Settle(ctx, a.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	if redlimit.Leases(a) != nil {
		t.Fatal("a released Decision still reports leases")
	}
	d := e.Allow(ctx, "acme")
	if !d.Allowed || d.Rules[0].Result.Remaining != 0 {
		t.Fatalf("after one release: %+v, want allowed with 0 remaining", d.Rules[0].Result)
	}
	if e.Allow(ctx, "acme").Allowed {
		t.Fatal("a second release freed another slot")
	}
}

// downLeaser is a backend that can release leases and fails every
// Allow: an instance on it decides with its fallback.
type downLeaser struct{ failing }

func (*downLeaser) Release(context.Context, []algorithms.Lease) error       { return nil }
func (*downLeaser) Renew(context.Context, []algorithms.Lease, []bool) error { return nil }

// TestStatusInProcess: Status().InProcess tells a Limiter whose store runs
// in process (memstore: an adapter settles its decisions at once) from one
// on a remote store, whichever backend decided (a remote primary's
// fallback runs in process, but the primary is what it reports).
func TestStatusInProcess(t *testing.T) {
	ctx := context.Background()
	mem := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Minute)}})
	remote := newEngine(t, &leasing{remote{next: newMemory(t)}}, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Minute)}})
	down := newEngine(t, &downLeaser{}, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Minute)}, ProbeInterval: time.Hour, FallbackAfter: time.Nanosecond})
	if d := down.Allow(ctx, "acme"); !d.Failed {
		t.Fatalf("first call to a failing primary: %+v, want refused undecided", d)
	}
	onFallback := down.Allow(ctx, "acme")
	if onFallback.Source != redlimit.SourceFallback || !redlimit.Holds(onFallback) {
		t.Fatalf("second call: %+v, want the fallback's decision, holding a slot", onFallback)
	}
	for _, tc := range []struct {
		name string
		e    *redlimit.Limiter
		want bool
	}{{"memstore", mem, true}, {"remote", remote, false}, {"remote on its fallback", down, false}} {
		if got := tc.e.Status().InProcess; got != tc.want {
			t.Errorf("%s: Status().InProcess = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, e := range []*redlimit.Limiter{mem, remote} {
		d := e.Allow(ctx, "acme")
		if !redlimit.Holds(d) {
			t.Fatalf("%+v holds no slot", d)
		}
		if err := e.Settle(ctx, d); err != nil || redlimit.Holds(d) && redlimit.Leases(d) != nil {
			t.Fatalf("Settle = %v, leases %v after it; want nil, none", err, redlimit.Leases(d))
		}
	}
	if err := down.Settle(ctx, onFallback); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrencyDenialNotCached: a concurrency denial is never answered
// by the deny cache: once a slot is released, the next call is allowed.
func TestConcurrencyDenialNotCached(t *testing.T) {
	l := &leasing{remote{next: newMemory(t)}}
	e := newEngine(t, l, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Minute)}})
	ctx := context.Background()
	held := e.Allow(ctx, "acme")
	for range 3 {
		if e.Allow(ctx, "acme").Allowed {
			t.Fatal("two slots of one")
		}
	}
	if n := e.Status().LocalDenials; n != 0 || l.calls.Load() != 4 {
		t.Fatalf("%d local denials, %d backend calls; want 0 and 4", n, l.calls.Load())
	}
	e.Settle(ctx, held)
	if d := e.Allow(ctx, "acme"); !d.Allowed {
		t.Fatalf("not allowed once the slot was released: %+v", d.Rules[0].Result)
	}
}

// TestConcurrencyNeedsLeaser: a concurrency rule on a backend that cannot
// release leases is refused when the engine is built.
func TestConcurrencyNeedsLeaser(t *testing.T) {
	_, err := redlimit.New(&remote{next: newMemory(t)}, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Second)}})
	var ce *algorithms.ConfigError
	if !errors.As(err, &ce) || ce.Rule != "jobs" || ce.Field != "Algorithm" {
		t.Fatalf("New = %v, want a *ConfigError naming rule jobs, field Algorithm", err)
	}
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Second)}})
	if err := e.Wait(context.Background(), "acme"); !errors.As(err, &ce) {
		t.Fatalf("Wait on a concurrency rule = %v, want a *ConfigError (use Allow, then Settle)", err)
	}
}

// TestConcurrencyKeepAlive: a Decision kept alive holds its slot far
// beyond its lease, renewed every third of it; released, the slot is
// free at once. Without KeepAlive the slot comes back when the lease
// expires. (synctest: the bubble's clock is the memstore's.)
func TestConcurrencyKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, newClockMemory(t), redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, 3*time.Second)}})
		ctx := context.Background()
		d := e.Allow(ctx, "acme")
		d.KeepAlive(ctx)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := e.Allow(ctx, "acme"); got.Allowed || got.Rules[0].Result.RetryAfter > 3*time.Second {
			t.Fatalf("10 leases later, a kept-alive slot: %+v, want denied, RetryAfter <= 3s", got.Rules[0].Result)
		}
		e.Settle(ctx, d)
		if got := e.Allow(ctx, "acme"); !got.Allowed {
			t.Fatalf("released, still denied: %+v", got.Rules[0].Result)
		}
		// not kept alive: held for its lease, free after it
		time.Sleep(3*time.Second - time.Microsecond)
		if e.Allow(ctx, "acme").Allowed {
			t.Fatal("free before its lease expired")
		}
		time.Sleep(time.Microsecond)
		if !e.Allow(ctx, "acme").Allowed {
			t.Fatal("not free when its lease expired")
		}
	})
}

// TestConcurrencyLayered: a concurrency rule and a rate rule in one call,
// all-or-nothing through the engine on a real redis-server: a
// concurrency denial consumes no rate, a rate denial takes no slot.
func TestConcurrencyLayered(t *testing.T) {
	client := redistest.Require(t).Client(t)
	// no deny cache: the peeks must reach the server after a rate denial
	e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), NoDenyCache: true, Rules: []redlimit.Rule{
		inFlightRule(1, time.Minute),
		{Name: "rate", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)},
	}})
	ctx := context.Background()
	held := e.Allow(ctx, "acme") // rate 2 left, no slot
	for range 5 {
		if d := e.Allow(ctx, "acme"); d.Allowed || d.Rules[0].Result.Allowed {
			t.Fatalf("%+v", d.Rules)
		}
	}
	e.Settle(ctx, held)
	p := e.Peek(ctx, "acme")
	if p.Rules[0].Result.Remaining != 1 || p.Rules[1].Result.Remaining != 2 {
		t.Fatalf("after 5 concurrency denials: slots %d, rate %d; want 1 and 2 (denials consumed nothing)", p.Rules[0].Result.Remaining, p.Rules[1].Result.Remaining)
	}
	a := e.Allow(ctx, "acme")
	e.Settle(ctx, a)
	b := e.Allow(ctx, "acme")
	e.Settle(ctx, b)
	if d := e.Allow(ctx, "acme"); d.Allowed || d.Rules[1].Result.Allowed || !d.Rules[0].Result.Allowed {
		t.Fatalf("rate exhausted: %+v", d.Rules)
	}
	if p := e.Peek(ctx, "acme"); p.Rules[0].Result.Remaining != 1 {
		t.Fatalf("a rate denial took a slot: %+v", p.Rules[0].Result)
	}
}

// The fault test's child: it takes the one slot of "jobs" on the
// redis-server at REDLIMIT_CHILD_ADDR, keeps it alive, says "held", and
// waits to be killed.
func init() {
	addr := os.Getenv("REDLIMIT_CHILD_ADDR")
	if addr == "" {
		return
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	b, _ := redisstore.New(client, redisstore.Config{})
	// Timeout 10s: a loaded machine must not have the child's calls refused
	e, err := redlimit.New(b, redlimit.Config{Prefix: os.Getenv("REDLIMIT_CHILD_PREFIX"), Timeout: 10 * time.Second, Rules: []redlimit.Rule{inFlightRule(1, killLease)}})
	if err != nil {
		os.Exit(2)
	}
	d := e.Allow(context.Background(), "acme")
	if !d.Allowed {
		os.Exit(3)
	}
	d.KeepAlive(context.Background())
	os.Stdout.WriteString("held\n")
	select {}
}

const killLease = 1500 * time.Millisecond

// TestConcurrencyKilledInstance: a process killed (SIGKILL) mid-request,
// after renewing its lease, gives its slot back within the lease time,
// on a real redis-server.
func TestConcurrencyKilledInstance(t *testing.T) {
	srv := redistest.Require(t)
	prefix := enginePrefix(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REDLIMIT_CHILD_ADDR="+srv.Addr, "REDLIMIT_CHILD_PREFIX="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill() // if the test failed before killing it
		<-exited
	})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	e := newEngine(t, redisStore(t, srv.Client(t), false), redlimit.Config{Prefix: prefix, Rules: []redlimit.Rule{inFlightRule(1, killLease)}})
	ctx := context.Background()
	time.Sleep(killLease + killLease/6) // the child renews every 500ms
	if p := e.Peek(ctx, "acme"); p.Rules[0].Result.Remaining != 0 {
		t.Fatalf("the child's slot expired while it renewed it: %+v", p.Rules[0].Result)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-exited
	// The child's last renewal came before the kill, so its lease ends
	// within killLease of it: a Peek that starts killLease after the kill
	// must find the slot free (however slow the machine). Until then the
	// Peeks measure when it came free.
	var freed time.Duration
	for {
		since := time.Since(killed)
		if p := e.Peek(ctx, "acme"); p.Rules[0].Result.Remaining == 1 {
			freed = since
			break
		} else if since >= killLease {
			t.Fatalf("the killed child's slot is still taken %v after the kill (lease %v): %+v", since, killLease, p.Rules[0].Result)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("slot free within %v of SIGKILL (lease %v)", freed.Round(time.Millisecond), killLease)
}

var _ algorithms.Leaser = (*memstore.Store)(nil)

// TestConcurrencyShadow: a shadow concurrency rule never denies; when it
// would, the request goes on holding no slot of it, and the live rules'
// slots only.
func TestConcurrencyShadow(t *testing.T) {
	shadow := inFlightRule(1, time.Minute)
	shadow.Shadow = true
	live := redlimit.Rule{Name: "live", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(5, time.Minute)}
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{shadow, live}})
	ctx := context.Background()
	a := e.Allow(ctx, "acme")
	b := e.Allow(ctx, "acme")
	if !a.Allowed || !b.Allowed || !b.WouldDeny {
		t.Fatalf("allowed %v %v, would deny %v", a.Allowed, b.Allowed, b.WouldDeny)
	}
	if got := redlimit.Leases(b); len(got) != 1 || !strings.Contains(got[0].Key, ":live:") {
		t.Fatalf("the shadow-denied request holds %+v, want the live rule's slot only", got)
	}
	e.Settle(ctx, a)
	e.Settle(ctx, b)
	if p := e.Peek(ctx, "acme"); p.Rules[0].Result.Remaining != 1 || p.Rules[1].Result.Remaining != 5 {
		t.Fatalf("after both released: %+v", p.Rules)
	}
}

// committedThenFailed takes what memstore allows and then reports a
// failure, as a Redis call that timed out after the server committed.
type committedThenFailed struct{ *memstore.Store }

func (c committedThenFailed) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if err := c.Store.Allow(ctx, checks, results); err != nil {
		return err
	}
	return &algorithms.BackendError{Backend: "redis", Err: context.DeadlineExceeded}
}

// TestConcurrencyFailedCallReleased: slots that a failed call took anyway
// (the server committed, the reply came too late) are released in the
// background, under every error policy, so that a timeout does not hold a
// slot until its lease expires.
func TestConcurrencyFailedCallReleased(t *testing.T) {
	for _, policy := range []redlimit.ErrorPolicy{redlimit.FailOpen, redlimit.FailClosed, redlimit.Fallback} {
		t.Run(policy.String(), func(t *testing.T) {
			mem, err := memstore.New(memstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, committedThenFailed{mem}, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Hour)}, OnError: policy})
			d := e.Allow(context.Background(), "alice")
			if d.Err == nil {
				t.Fatalf("Allow = %+v: want the backend's error", d)
			}
			probe := []algorithms.Check{{Key: "probe:{alice}", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, time.Hour), Lease: contract.NewLease()}}
			key := d.Rules[0].Key
			deadline := time.Now().Add(10 * time.Second)
			for {
				probe[0].Key = key
				res := make([]algorithms.Result, 1)
				if err := mem.Allow(context.Background(), probe, res); err != nil {
					t.Fatal(err)
				}
				if res[0].Allowed {
					break // the failed call's slot came back
				}
				if time.Now().After(deadline) {
					t.Fatalf("the slot of the failed call is still held after 10s: %+v", res[0])
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// gatedRelease is committedThenFailed whose releases wait for gate.
type gatedRelease struct {
	committedThenFailed
	gate     chan struct{}
	waiting  atomic.Int64
	released atomic.Int64
}

func (g *gatedRelease) Release(ctx context.Context, leases []algorithms.Lease) error {
	g.waiting.Add(1)
	<-g.gate
	g.released.Add(1)
	return g.Store.Release(ctx, leases)
}

// TestCloseWaitsForAbandonedReleases: Close returns once the background
// release of the slots a failed call took anyway is made, so that a
// process closing its Limiter and exiting does not drop it. Before, Close
// returned at once and the release was lost with the process.
func TestCloseWaitsForAbandonedReleases(t *testing.T) {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &gatedRelease{committedThenFailed: committedThenFailed{mem}, gate: make(chan struct{})}
	e := newEngine(t, b, redlimit.Config{Rules: []redlimit.Rule{inFlightRule(1, time.Hour)}, OnError: redlimit.FailOpen, Timeout: 10 * time.Second})
	d := e.Allow(context.Background(), "alice")
	if d.Err == nil {
		t.Fatalf("Allow = %+v: want the backend's error", d)
	}
	waitFor(t, "the background release", func() bool { return b.waiting.Load() == 1 })
	closed := make(chan struct{})
	go func() {
		e.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned with a release of a failed call's slots pending")
	case <-time.After(50 * time.Millisecond): // Close waits up to Timeout (10s) and a second
	}
	close(b.gate)
	<-closed
	if n := b.released.Load(); n != 1 {
		t.Fatalf("when Close returned: %d releases made, want 1", n)
	}
	probe := []algorithms.Check{{Key: d.Rules[0].Key, Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, time.Hour), Lease: contract.NewLease()}}
	res := make([]algorithms.Result, 1)
	if err := mem.Allow(context.Background(), probe, res); err != nil || !res[0].Allowed {
		t.Fatalf("after Close: %+v, %v: want the failed call's slot free", res[0], err)
	}
}
