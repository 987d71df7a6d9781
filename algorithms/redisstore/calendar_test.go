package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine holds

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/hashslot"
	"github.com/redlimit/redlimit/internal/redistest"
)

// scriptCounter is a go-redis hook that counts the scripts sent (EVALSHA
// and EVAL), alone or in pipelines.
type scriptCounter struct{ n *atomic.Int64 }

func (h scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h scriptCounter) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.n.Add(1)
	}
}

// calendarSkews are the Go side's clock against the server's: in step,
// behind by a day (the server's now is in the next window sent: decided at
// once), ahead by a day or behind by two (the server's now is outside the
// windows sent: decided again around it, one more script).
var calendarSkews = []struct {
	name    string
	skew    time.Duration
	scripts int64 // per call and slot
}{
	{"in step", 0, 1},
	{"behind by a day", -24 * time.Hour, 1},
	{"ahead by a day", 24 * time.Hour, 2},
	{"behind by two days", -48 * time.Hour, 2},
}

// TestCalendarSkew decides calendar quotas on a real redis-server's clock
// while the Go side's clock is skewed against it: every call is decided
// once, on the server's day, whatever the skew.
func TestCalendarSkew(t *testing.T) {
	srv := redistest.Require(t)
	t.Parallel()
	client := srv.Client(t)
	var scripts atomic.Int64
	client.AddHook(scriptCounter{&scripts})
	ctx := context.Background()
	for _, src := range redisstore.Scripts() { // no NOSCRIPT in the counts
		if err := client.ScriptLoad(ctx, src).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, layered := range []bool{false, true} {
		for _, sk := range calendarSkews {
			name := sk.name
			if layered {
				name += "/layered"
			}
			t.Run(name, func(t *testing.T) {
				b, err := redisstore.New(client, redisstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				redisstore.SetCalendarClock(b, func() time.Time { return time.Now().Add(sk.skew) })
				prefix := redistest.Prefix(t)
				checks := []algorithms.Check{{Key: prefix + "day:{a}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(5, nil)}}
				if layered {
					checks = append(checks, algorithms.Check{Key: prefix + "sec:{a}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(100)}) // 36 s per unit: no refill between the calls
				}
				res := make([]algorithms.Result, len(checks))
				for call := range int64(2) {
					before, err := client.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					scripts.Store(0)
					if err := b.Allow(ctx, checks, res); err != nil {
						t.Fatal(err)
					}
					n := scripts.Load()
					after, _ := client.Time(ctx).Result()
					midnight := time.Date(before.Year(), before.Month(), before.Day()+1, 0, 0, 0, 0, time.UTC)
					if !after.Before(midnight) {
						t.Skip("the test ran across midnight")
					}
					if n != sk.scripts {
						t.Errorf("call %d: %d scripts, want %d", call, n, sk.scripts)
					}
					r := res[0]
					if !r.Allowed || r.Remaining != 4-call || r.ResetAfter < midnight.Sub(after) || r.ResetAfter > midnight.Sub(before) {
						t.Errorf("call %d: day = %+v, want allowed, remaining %d, reset in [%v, %v]", call, r, 4-call, midnight.Sub(after), midnight.Sub(before))
					}
					if layered && (!res[1].Allowed || res[1].Remaining != 99-call) {
						t.Errorf("call %d: second = %+v, want allowed, remaining %d", call, res[1], 99-call)
					}
					v, err := client.HMGet(ctx, checks[0].Key, "s", "e", "c").Result()
					if err != nil {
						t.Fatal(err)
					}
					start := midnight.Add(-24 * time.Hour).UnixMicro()
					if want := []string{strconv.FormatInt(start, 10), strconv.FormatInt(midnight.UnixMicro(), 10), strconv.FormatInt(call+1, 10)}; !equalAny(v, want) {
						t.Errorf("call %d: stored %v, want %v (the server's day)", call, v, want)
					}
				}
			})
		}
	}
}

// TestCalendarCluster decides a calendar quota in Europe/Berlin layered
// with a per-second rule whose key lives in another hash slot, on a real
// Redis Cluster: across midnight, with a denial of the per-second rule
// refunding the quota's commit, and with the Go side's clock skewed against
// the servers'.
func TestCalendarCluster(t *testing.T) {
	redistest.RequireCluster(t)
	t.Parallel()
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	client := cl.Client(t)
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("layered across midnight", func(t *testing.T) {
		clock := &backendtest.Clock{T: time.Date(2028, time.January, 31, 23, 59, 58, 0, berlin)}
		b, err := redisstore.New(backendtest.PersistingCluster{ClusterClient: client}, redisstore.Config{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		prefix := redistest.Prefix(t)
		day, sec := prefix+"day:{alice}", prefix+"sec:{203.0.113.7}"
		requireSlots(t, day, sec)
		checks := []algorithms.Check{
			{Key: day, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(3, berlin)},
			{Key: sec, Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)},
		}
		type want struct {
			allowed   bool
			remaining int64
			retry     time.Duration
			reset     time.Duration
		}
		steps := []struct {
			at   time.Duration
			want [2]want
		}{
			{0, [2]want{{true, 2, 0, 2 * time.Second}, {true, 0, 0, time.Second}}},
			// the per-second rule denies: the quota's commit is refunded
			{0, [2]want{{true, 2, 0, 2 * time.Second}, {false, 0, time.Second, time.Second}}},
			{time.Second, [2]want{{true, 1, 0, time.Second}, {true, 0, 0, time.Second}}},
			{1500 * time.Millisecond, [2]want{{true, 1, 0, 500 * time.Millisecond}, {false, 0, 500 * time.Millisecond, 500 * time.Millisecond}}},
			// midnight in Berlin: a new day
			{2 * time.Second, [2]want{{true, 2, 0, 24 * time.Hour}, {true, 0, 0, time.Second}}},
		}
		start := clock.T
		res := make([]algorithms.Result, 2)
		for i, st := range steps {
			clock.T = start.Add(st.at)
			if err := b.Allow(ctx, checks, res); err != nil {
				t.Fatal(err)
			}
			for j, w := range st.want {
				r := res[j]
				if r.Allowed != w.allowed || r.Remaining != w.remaining || r.RetryAfter != w.retry || r.ResetAfter != w.reset {
					t.Errorf("step %d (%v): check %d = %+v, want %+v", i, clock.T, j, r, w)
				}
			}
		}
	})

	// Random calendar workloads (hard boundaries) on keys in two slots: the
	// cluster, where a call spanning slots is made all-or-nothing by
	// refunds, answers exactly like a single node (miniredis). Neither
	// expires keys; time never goes back here and no key changes limit,
	// since compensation is exact only then: a refund cannot bring back
	// the state of another limit that its commit replaced (the fixed
	// window's refund cannot either).
	t.Run("differential", func(t *testing.T) {
		crossSlot := 0
		for seed := uint64(1); seed <= 12; seed++ {
			onCluster, cc := clusterBackend(t, backendtest.PersistingCluster{ClusterClient: client})
			single, sc := miniBackend(t, miniredis.RunT(t))
			prefix := redistest.Prefix(t) + strconv.FormatUint(seed, 10) + ":"
			var last time.Time
			for i, step := range backendtest.CalendarWorkload(seed, 120, false) {
				if step.At.Before(last) {
					step.At = last
				}
				last = step.At
				if len(step.Checks) > 1 && hashslot.Of(step.Checks[0].Key) != hashslot.Of(step.Checks[len(step.Checks)-1].Key) {
					crossSlot++
				}
				got := backendtest.Run(t, onCluster, cc, prefix, step)
				want := backendtest.Run(t, single, sc, "", step)
				for j := range got {
					if final(got[j]) != want[j] {
						t.Fatalf("seed %d step %d check %d (%s %v cost %d at %v): cluster %+v, single node %+v",
							seed, i, j, step.Checks[j].Key, step.Checks[j].Limit, step.Checks[j].Cost, step.At, got[j], want[j])
					}
				}
			}
		}
		if crossSlot < 100 {
			t.Fatalf("only %d cross-slot calls", crossSlot)
		}
		t.Logf("%d cross-slot calls", crossSlot)
	})

	// Skewed by whole days in zones without daylight saving time, so that
	// a skew moves the Go side's day whatever the time of day.
	t.Run("skewed", func(t *testing.T) {
		kolkata, err := time.LoadLocation("Asia/Kolkata")
		if err != nil {
			t.Fatal(err)
		}
		loadScript(t, cl)
		for _, sk := range calendarSkews {
			t.Run(sk.name, func(t *testing.T) {
				b, err := redisstore.New(client, redisstore.Config{Pipelines: -1})
				if err != nil {
					t.Fatal(err)
				}
				redisstore.SetCalendarClock(b, func() time.Time { return time.Now().Add(sk.skew) })
				prefix := redistest.Prefix(t)
				day, other := prefix+"day:{bob}", prefix+"day:{carol}"
				requireSlots(t, day, other)
				checks := []algorithms.Check{
					{Key: day, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(5, kolkata)},
					{Key: other, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(7, nil)},
				}
				res := make([]algorithms.Result, 2)
				for call := range int64(2) {
					resetStats(t, cl)
					if err := b.Allow(ctx, checks, res); err != nil {
						t.Fatal(err)
					}
					if evalsha, eval := scriptCalls(t, cl); eval != 0 || evalsha != 2*sk.scripts {
						n := evalsha + eval
						t.Errorf("call %d: %d scripts for two slots, want %d", call, n, 2*sk.scripts)
					}
					if !res[0].Allowed || res[0].Remaining != 4-call || !res[1].Allowed || res[1].Remaining != 6-call {
						t.Errorf("call %d: %+v, want both allowed, remaining %d and %d", call, res, 4-call, 6-call)
					}
				}
			})
		}
	})
}

// equalAny reports whether got, an HMGET reply, holds the strings want.
func equalAny(got []any, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if s, ok := got[i].(string); !ok || s != want[i] {
			return false
		}
	}
	return true
}

// TestCalendarConcurrentExactness: 64 goroutines on two instances, one of
// whose clocks is two years behind the server's (every call of it decided
// again around the server's now), spend a yearly quota of 100 on the
// server's clock: exactly 100 calls are allowed.
func TestCalendarConcurrentExactness(t *testing.T) {
	srv := redistest.Require(t)
	t.Parallel()
	if now := time.Now().UTC(); now.Month() == time.December && now.Day() == 31 {
		t.Skip("a year's last day: the test could straddle the boundary")
	}
	backends := make([]algorithms.Backend, 2)
	for i := range backends {
		b, err := redisstore.New(srv.Client(t), redisstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			redisstore.SetCalendarClock(b, func() time.Time { return time.Now().AddDate(-2, 0, 0) })
		}
		backends[i] = b
	}
	check := algorithms.Check{Key: redistest.Prefix(t) + "year:{hot}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerYearIn(100, nil)}
	if allowed, denied := hammerTwo(t, backends, check); allowed != 100 || denied != 220 {
		t.Fatalf("allowed %d, denied %d of 320; want exactly 100 allowed", allowed, denied)
	}
}
