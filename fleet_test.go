package redlimit_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The tests in this file run a fleet: fleetInstances engines in one
// process, each with its own go-redis client, redisstore.Store and
// in-memory fallback, sharing one redis-server of their own, as
// fleetInstances processes of a service would. fleetCallers goroutines per
// instance call Allow on one key as fast as they can (on a 2-core machine
// this saturates both CPUs), under GCRA 100 per minute. They count what the
// fleet admits, by source, while the server stalls or stops, and assert
// counts only: a busy machine may change how many calls time out, never
// the bound.

const (
	fleetInstances = 4
	fleetCallers   = 8
)

// fleetLimit is the fleet's limit: capacity 100, one unit every 600ms.
var fleetLimit = algorithms.PerMinute(100)

// refill is how many units fleetLimit gives back over d, rounded up.
func refill(l algorithms.Limit, d time.Duration) int64 {
	return (int64(d)*l.Rate + int64(l.Period) - 1) / int64(l.Period)
}

// fleetRun is the outcome of one run, per instance.
type fleetRun struct {
	primary  [fleetInstances]atomic.Int64 // admitted by Redis
	fallback [fleetInstances]atomic.Int64 // admitted by the instance's fallback
	refused  [fleetInstances]atomic.Int64 // refused undecided (Decision.Failed)
	open     atomic.Int64                 // let through undecided (FailOpen)
	// maxRun is, per instance, the longest span from the first call that
	// failed after a success to the last that failed before the next call
	// the primary answered: how long the primary looked down.
	maxRun  [fleetInstances]atomic.Int64
	elapsed time.Duration // from the first call to the last answer
}

func (r *fleetRun) sum(a *[fleetInstances]atomic.Int64) int64 {
	var n int64
	for i := range a {
		n += a[i].Load()
	}
	return n
}

func (r *fleetRun) String() string {
	var runs [fleetInstances]time.Duration
	for i := range runs {
		runs[i] = time.Duration(r.maxRun[i].Load()).Round(time.Millisecond)
	}
	return fmt.Sprintf("%d admitted in %v (%d by Redis, %d by the fallbacks %v), %d refused undecided, %d let through undecided; longest failure run per instance %v",
		r.sum(&r.primary)+r.sum(&r.fallback)+r.open.Load(), r.elapsed.Round(time.Millisecond), r.sum(&r.primary), r.sum(&r.fallback), counts(&r.fallback), r.sum(&r.refused), r.open.Load(), runs)
}

func counts(a *[fleetInstances]atomic.Int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i].Load()
	}
	return out
}

// runFleet starts a redis-server, builds the fleet with cfg (Rules, Prefix
// and Logger set here), lets it run for warm, calls fault (which returns
// when the fault is over, nil for none), and runs on for after.
func runFleet(t *testing.T, cfg redlimit.Config, warm time.Duration, fault func(srv *redistest.Server), after time.Duration) *fleetRun {
	t.Helper()
	if redistest.Binary() == "" {
		if redistest.InCI() {
			t.Fatal("CI=true but redis-server is not installed")
		}
		t.Skip("redis-server not available")
	}
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg.Rules = []redlimit.Rule{{Name: "api", Algorithm: algorithms.GCRA, Limit: fleetLimit}}
	cfg.Prefix = enginePrefix(t)
	var fleet [fleetInstances]*redlimit.Limiter
	for i := range fleet {
		// the switches to the fallback and back, and nothing else
		cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t, i}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		// As docs/redis.md advises: no retries, timeouts no longer than
		// the engine's.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, PoolTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		store, err := redisstore.New(c, redisstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		fb, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.FallbackBackend = fb
		fleet[i] = newEngine(t, store, cfg)
	}
	var r fleetRun
	var stop atomic.Bool
	var wg sync.WaitGroup
	base := time.Now()
	for i, e := range fleet {
		var runStart atomic.Int64 // ns since base of the run's first failure; 0: none
		for range fleetCallers {
			wg.Go(func() {
				var d redlimit.Decision
				in := allInputs(e, "k")
				for !stop.Load() {
					e.Decide(context.Background(), in, &d)
					switch {
					case d.Allowed && d.Source == redlimit.SourcePrimary:
						r.primary[i].Add(1)
					case d.Allowed && d.Source == redlimit.SourceFallback:
						r.fallback[i].Add(1)
					case d.Allowed:
						r.open.Add(1)
					case d.Failed:
						r.refused[i].Add(1)
					}
					now := int64(time.Since(base))
					switch {
					case d.Source == redlimit.SourcePrimary && d.Err == nil:
						runStart.Store(0)
					case d.Err != nil:
						runStart.CompareAndSwap(0, now)
						if s := runStart.Load(); s != 0 {
							for m := r.maxRun[i].Load(); now-s > m && !r.maxRun[i].CompareAndSwap(m, now-s); m = r.maxRun[i].Load() {
							}
						}
					}
				}
			})
		}
	}
	time.Sleep(warm)
	if fault != nil {
		fault(srv)
	}
	time.Sleep(after)
	stop.Store(true)
	wg.Wait()
	r.elapsed = time.Since(base)
	return &r
}

// tWriter writes the log lines of instance i to t.
type tWriter struct {
	t *testing.T
	i int
}

func (w tWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("fallback")) {
		w.t.Logf("instance %d: %s", w.i, bytes.TrimSpace(p))
	}
	return len(p), nil
}

// stall blocks the server for d with DEBUG SLEEP, as a slow command or a
// fork would.
func stall(t *testing.T, d time.Duration) func(*redistest.Server) {
	return func(srv *redistest.Server) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		defer c.Close()
		if err := c.Do(context.Background(), "DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds())).Err(); err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
	}
}

// pause stops the server (SIGSTOP) for d, then resumes it.
func pause(t *testing.T, d time.Duration) func(*redistest.Server) {
	return func(srv *redistest.Server) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}

// shareBound is what one instance's fallback may admit over d when n
// instances share fleetLimit: its share of the capacity (the rate divided
// by n, rounded down) and of the refill over d, rounded up.
func shareBound(n int64, d time.Duration) int64 {
	l := fleetLimit
	l.Rate = max(l.Rate/n, 1)
	return l.Rate + refill(l, d)
}

// checkFleet asserts the bounds every run keeps: Redis admits at most the
// limit and its refill over the run; each instance's fallback at most its
// share (the whole limit when instances is 0) and its refill. It returns
// how many instances decided with their fallback.
func checkFleet(t *testing.T, r *fleetRun, instances int64) int {
	t.Helper()
	if got, bound := r.sum(&r.primary), fleetLimit.Rate+refill(fleetLimit, r.elapsed); got > bound {
		t.Errorf("Redis admitted %d, want at most %d (the limit and its refill over %v)", got, bound, r.elapsed)
	}
	if n := r.open.Load(); n != 0 {
		t.Errorf("%d let through undecided, want none under Fallback", n)
	}
	switched := 0
	for i := range r.fallback {
		got := r.fallback[i].Load()
		if got > 0 {
			switched++
		}
		if bound := shareBound(max(instances, 1), r.elapsed); got > bound {
			t.Errorf("instance %d: its fallback admitted %d, want at most %d (its share of the limit, with Instances %d, and of the refill over %v)",
				i, got, bound, instances, r.elapsed)
		}
	}
	return switched
}

// TestFleetHiccup: a fleet on Redis, told how many instances it has,
// admits at most the limit plus its refill over the run, with or without
// a 300ms stall of the server: a call over Timeout (a stall, or a machine
// too busy to read the reply in time) is refused undecided, and switches
// no instance to its fallback until the primary has failed every call for
// FallbackAfter (1s). On a machine so loaded that an instance sees no
// answer for that long, the instance's fallback adds at most its share:
// the stated allowance, 25 units and their refill per instance that
// switched (logged; none on an idle machine).
//
// Before the fix, the first failed call switched an instance to a
// fallback holding the whole limit: 516 admitted without a fault and 525
// with the stall, where 106 and 107 were the bound.
func TestFleetHiccup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*redistest.Server)
	}{
		{"no fault", nil},
		{"stall 300ms", stall(t, 300*time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFleet(t, redlimit.Config{Instances: fleetInstances}, time.Second, tc.fault, 2*time.Second)
			switched := checkFleet(t, r, fleetInstances)
			t.Logf("%s: %v; %d instance(s) switched to the fallback", tc.name, r, switched)
			bound := fleetLimit.Rate + refill(fleetLimit, r.elapsed) + int64(switched)*shareBound(fleetInstances, r.elapsed)
			if got := r.sum(&r.primary) + r.sum(&r.fallback); got > bound {
				t.Errorf("%s: the fleet admitted %d, want at most %d (the limit and its refill over %v, and the shares of %d instance(s) on their fallback)",
					tc.name, got, bound, r.elapsed, switched)
			}
		})
	}
}

// TestFleetOutage: while the server is paused for 3s, the fleet's
// fallbacks admit at most the limit and its refill, at most 1.1 times the
// limit, when Config.Instances says how many instances share it; without
// it, each fallback admits up to the whole limit (N times the limit for
// the fleet). Before the fix: 428 (107 per instance) with or without the
// count, which did not exist.
func TestFleetOutage(t *testing.T) {
	for _, instances := range []int64{fleetInstances, 0} {
		t.Run(fmt.Sprintf("instances=%d", instances), func(t *testing.T) {
			r := runFleet(t, redlimit.Config{Instances: int(instances)}, time.Second, pause(t, 3*time.Second), 500*time.Millisecond)
			checkFleet(t, r, instances)
			t.Logf("outage 3s, Instances %d: %v", instances, r)
			if instances == 0 {
				return
			}
			if got, bound := r.sum(&r.fallback), fleetLimit.Rate*11/10; got > bound {
				t.Errorf("the fallbacks admitted %d during the outage, want at most %d (the limit × 1.1)", got, bound)
			}
		})
	}
}
