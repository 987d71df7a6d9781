package redlimit_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// flaky is a Backend out of process (the engine puts a deny cache in
// front of it) on a memstore on the bubble's clock. While slow is set its
// calls take a second, whatever their context says (a stalled server);
// while fail is set they fail, the probe's included unless probeUp is set.
type flaky struct {
	mem           *memstore.Store
	slow, fail    atomic.Bool
	probeUp       atomic.Bool
	calls, probes atomic.Int64
}

var errFlaky = &algorithms.BackendError{Backend: "stub", Err: errors.New("connection refused")}

func newFlaky(t *testing.T) *flaky {
	t.Helper()
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &flaky{mem: m}
}

func (f *flaky) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	probe := strings.Contains(checks[0].Key, ":_probe:")
	if probe {
		f.probes.Add(1)
	} else {
		f.calls.Add(1)
	}
	if f.slow.Load() {
		time.Sleep(time.Second)
	}
	if f.fail.Load() && !(probe && f.probeUp.Load()) {
		return errFlaky
	}
	return f.mem.Allow(ctx, checks, results)
}

// Refund gives back on f's memstore, or fails like Allow while f fails.
func (f *flaky) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	if f.fail.Load() {
		return errFlaky
	}
	return f.mem.Refund(ctx, refunds)
}

// gcra100 is one rule, GCRA 100 per minute.
var gcra100 = []redlimit.Rule{{Name: "api", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)}}

// TestOneSlowCallNoFallback: under the Fallback policy (default
// FallbackAfter 1s, Timeout 100ms), one call over Timeout is refused
// undecided and switches nothing; nor does a stall shorter than
// FallbackAfter; a primary that fails every call for FallbackAfter
// switches the instance to its fallback, and the probe switches it back.
// Before, the one slow call switched the instance to the fallback, which
// decided that call and every call for a ProbeInterval.
func TestOneSlowCallNoFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t)
		// redlimit.New, not newEngine: the default Timeout, on the bubble's clock
		e, err := redlimit.New(f, redlimit.Config{Rules: gcra100, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		ctx := context.Background()
		refused := func(what string) {
			t.Helper()
			d := e.Allow(ctx, "k")
			if d.Allowed || !d.Failed || d.Source != redlimit.SourceNone || d.Err == nil || e.Status().OnFallback {
				t.Fatalf("%s: %+v, on fallback %v; want refused undecided, not on the fallback", what, d, e.Status().OnFallback)
			}
		}
		primary := func(what string) {
			t.Helper()
			if d := e.Allow(ctx, "k"); !d.Allowed || d.Source != redlimit.SourcePrimary || d.Err != nil {
				t.Fatalf("%s: %+v, want allowed by the primary", what, d)
			}
		}
		primary("up")

		f.slow.Store(true)
		refused("one slow call")
		f.slow.Store(false)
		primary("after the slow call")

		// A stall of 900ms: every call fails, 100ms apart.
		f.fail.Store(true)
		for i := range 9 {
			refused("stall, call " + itoa(i))
			time.Sleep(100 * time.Millisecond)
		}
		f.fail.Store(false)
		primary("after the stall")

		// An outage: every call fails for FallbackAfter.
		f.fail.Store(true)
		for i := range 10 {
			refused("outage, call " + itoa(i))
			time.Sleep(100 * time.Millisecond)
		}
		d := e.Allow(ctx, "k")
		if !d.Allowed || d.Source != redlimit.SourceFallback || !errors.Is(d.Err, errFlaky) || !e.Status().OnFallback {
			t.Fatalf("1s into the outage: %+v, want decided by the fallback", d)
		}
		calls := f.calls.Load()
		if d := e.Allow(ctx, "k"); !d.Allowed || d.Source != redlimit.SourceFallback || d.Err != nil || f.calls.Load() != calls {
			t.Fatalf("on the fallback: %+v after %d primary calls, want the fallback and no primary call", d, f.calls.Load()-calls)
		}

		f.fail.Store(false)
		time.Sleep(time.Second) // ProbeInterval
		synctest.Wait()
		primary("a ProbeInterval after the primary came back")
		e.Close()
	})
}

// TestRunOfFailures: what ends a run of failures, so that the instance
// does not switch: a call the primary answers (even a denial), or a probe
// it answers; not a denial the deny cache answers locally.
func TestRunOfFailures(t *testing.T) {
	rules := []redlimit.Rule{{Name: "api", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}}
	t.Run("an answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFlaky(t)
			e := newEngine(t, f, redlimit.Config{Rules: rules, NoDenyCache: true})
			ctx := context.Background()
			e.Allow(ctx, "a") // a is now denied, by the primary each time
			for i := range 30 {
				f.fail.Store(i%10 != 9)
				if d := e.Allow(ctx, "b"+itoa(i)); d.Source == redlimit.SourceFallback {
					t.Fatalf("call %d: %+v, want no fallback: the primary answered every 900ms", i, d)
				}
				if i%10 == 9 {
					if d := e.Allow(ctx, "a"); d.Allowed || d.Source != redlimit.SourcePrimary || d.Rules[0].Result.Local {
						t.Fatalf("a: %+v, want denied by the primary", d)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			e.Close()
		})
	})
	t.Run("a probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFlaky(t)
			e := newEngine(t, f, redlimit.Config{Rules: rules})
			f.fail.Store(true)
			f.probeUp.Store(true) // the server answers; these calls fail
			for i := range 30 {
				if d := e.Allow(context.Background(), "k"); !d.Failed || e.Status().OnFallback {
					t.Fatalf("call %d: %+v, want refused, not on the fallback: the probe answers", i, d)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if f.probes.Load() == 0 {
				t.Fatal("no probe")
			}
			e.Close()
		})
	})
	t.Run("not a local denial", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFlaky(t)
			e := newEngine(t, f, redlimit.Config{Rules: rules})
			ctx := context.Background()
			e.Allow(ctx, "a")
			e.Allow(ctx, "a") // denied for an hour: in the deny cache
			f.fail.Store(true)
			for i := range 10 {
				if d := e.Allow(ctx, "a"); d.Allowed || !d.Rules[0].Result.Local {
					t.Fatalf("a: %+v, want denied locally", d)
				}
				if d := e.Allow(ctx, "b"); !d.Failed {
					t.Fatalf("b, call %d: %+v, want refused", i, d)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if d := e.Allow(ctx, "b"); d.Source != redlimit.SourceFallback || !e.Status().OnFallback {
				t.Fatalf("b, 1s into the outage: %+v, want the fallback: local denials are no answer of the primary", d)
			}
			e.Close()
		})
	})
}

// TestFallbackShare: with Config.Instances, the fallback enforces each
// rule's share of its limit: rate and burst divided by Instances, rounded
// down, at least 1; the Result reports the share's capacity and the
// RuleDecision the rule's limit. Without it, the whole limit.
func TestFallbackShare(t *testing.T) {
	for _, tc := range []struct {
		name      string
		alg       algorithms.Algorithm
		limit     algorithms.Limit
		instances int
		want      int64
	}{
		{"gcra unknown", algorithms.GCRA, algorithms.PerMinute(100), 0, 100},
		{"gcra one", algorithms.GCRA, algorithms.PerMinute(100), 1, 100},
		{"gcra 4", algorithms.GCRA, algorithms.PerMinute(100), 4, 25},
		{"gcra 3 rounds down", algorithms.GCRA, algorithms.PerMinute(100), 3, 33},
		{"token bucket burst", algorithms.TokenBucket, algorithms.PerMinute(10).WithBurst(40), 4, 10},
		{"fixed window", algorithms.FixedWindow, algorithms.PerMinute(10), 4, 2},
		{"sliding window at least 1", algorithms.SlidingWindow, algorithms.PerMinute(3), 4, 1},
		{"sliding log", algorithms.SlidingLog, algorithms.PerHour(100), 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFlaky(t)
				f.fail.Store(true)
				e := newEngine(t, f, redlimit.Config{Instances: tc.instances, FallbackAfter: time.Millisecond,
					Rules: []redlimit.Rule{{Name: "r", Algorithm: tc.alg, Limit: tc.limit}}})
				ctx := context.Background()
				e.Allow(ctx, "k") // refused: the first failure
				time.Sleep(time.Millisecond)
				var allowed int64
				for range 200 {
					d := e.Allow(ctx, "k")
					if d.Source != redlimit.SourceFallback {
						t.Fatalf("%+v, want the fallback", d)
					}
					if rd := d.Rules[0]; rd.Result.Limit != tc.want || rd.Limit != tc.limit {
						t.Fatalf("rule %+v, want Result.Limit %d (the share) and Limit %v (the rule's)", rd, tc.want, tc.limit)
					}
					if d.Allowed {
						allowed++
					}
				}
				if allowed != tc.want {
					t.Errorf("the fallback allowed %d, want %d", allowed, tc.want)
				}
				e.Close()
			})
		})
	}
}

// TestFallbackRefundShare: a decision the fallback made under
// Config.Instances is settled against the share it was charged under, not
// the rule's limit. With the rule's limit the refund read a bucket written
// under the share as a limit changed: GCRA or token bucket 5/s burst 8
// shared by 2 (2/s, burst 4, 2 s to refill) had its debt cut to the rule's
// 1.6 s before 200 ms (the rule's unit, not the share's 500 ms) came off,
// and let one more through 400 ms later (more than the share); 4/s burst 4
// shared by 2 (1 s either way) got 250 ms of the 500 ms it had taken back,
// and denied the unit given back.
func TestFallbackRefundShare(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.GCRA, algorithms.TokenBucket} {
		for _, tc := range []struct {
			name  string
			limit algorithms.Limit
			take  int   // units taken at once, the share's burst
			want  []int // allowed after the refund: at once (as many as can be), then 400 ms later
		}{
			{"no more than the share", algorithms.PerSecond(5).WithBurst(8), 4, []int{1, 0}},
			{"the share's unit back", algorithms.PerSecond(4).WithBurst(4), 2, []int{1, 0}},
		} {
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newFlaky(t)
					f.fail.Store(true)
					e := newEngine(t, f, redlimit.Config{Instances: 2, FallbackAfter: time.Millisecond,
						Rules: []redlimit.Rule{{Name: "r", Algorithm: alg, Limit: tc.limit, Refundable: true}}})
					ctx := context.Background()
					e.Allow(ctx, "k") // refused: the first failure
					time.Sleep(time.Millisecond)
					var last redlimit.Decision
					for i := range tc.take + 1 {
						d := decide(e, ctx, redlimit.Input{Material: "k"})
						if d.Source != redlimit.SourceFallback || d.Allowed != (i < tc.take) {
							t.Fatalf("decision %d: allowed %v from %v, want %v from the fallback", i, d.Allowed, d.Source, i < tc.take)
						}
						if d.Allowed {
							last = d
						}
					}
					if err := e.Settle(ctx, &last, redlimit.Cost{Rule: "r", Units: 0}); err != nil {
						t.Fatal(err)
					}
					got := make([]int, len(tc.want))
					for i := range got {
						if i > 0 {
							time.Sleep(400 * time.Millisecond)
						}
						for decide(e, ctx, redlimit.Input{Material: "k"}).Allowed {
							got[i]++
						}
					}
					if !slices.Equal(got, tc.want) {
						t.Errorf("allowed after giving one unit back: %v (at once, 400ms later), want %v", got, tc.want)
					}
				})
			})
		}
	}
}

// TestFallbackConfig: invalid FallbackAfter and Instances fail New,
// naming the field.
func TestFallbackConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  redlimit.Config
		want string
	}{
		{redlimit.Config{FallbackAfter: -time.Second}, "redlimit: Config.FallbackAfter must be >= 0, got -1s"},
		{redlimit.Config{Instances: -1}, "redlimit: Config.Instances must be between 0 and 1048576, got -1"},
		{redlimit.Config{Instances: 1<<20 + 1}, "redlimit: Config.Instances must be between 0 and 1048576, got 1048577"},
	} {
		tc.cfg.Rules = gcra100
		_, err := redlimit.New(newMemory(t), tc.cfg)
		if err == nil || err.Error() != tc.want || !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestProgrammerErrors: a wrong number of Inputs, a negative cost, an
// invalid Input.Limit and an invalid limit from a LimitFunc are refused
// under every error policy, 100 of 100, with an error matching
// ErrInvalidConfig, and nothing is asked of the backend or consumed.
// Before, the wrong number of Inputs (now: misnamed ones) went to the error policy, which let
// all 100 through under Fallback and FailOpen, and so did an invalid
// limit.
func TestProgrammerErrors(t *testing.T) {
	bad := func(_ context.Context, material string) (algorithms.Limit, error) {
		if material == "bad" {
			return algorithms.Limit{Rate: 0, Period: time.Second}, nil
		}
		return algorithms.PerHour(10), nil
	}
	rules := []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
		{Name: "plan", Algorithm: algorithms.FixedWindow, LimitFunc: bad},
	}
	for _, tc := range []struct {
		name string
		in   []redlimit.Input
		peek bool
	}{
		{"an Input naming no rule", []redlimit.Input{{Rule: "ip", Material: "x"}, {Rule: "plan", Material: "x"}, {Rule: "route", Material: "x"}}, false},
		{"two Inputs for one rule", []redlimit.Input{{Rule: "ip", Material: "x"}, {Rule: "ip", Material: "y"}}, false},
		{"peek, two Inputs for one rule", []redlimit.Input{{Rule: "plan", Material: "x"}, {Rule: "plan", Material: "x"}}, true},
		{"negative cost", []redlimit.Input{{Material: "x"}, {Material: "x", Cost: -1}}, false},
		{"invalid Input.Limit", []redlimit.Input{{Material: "x", Limit: algorithms.Limit{Rate: 1}}, {Material: "x"}}, false},
		{"invalid limit from LimitFunc", []redlimit.Input{{Material: "x"}, {Material: "bad"}}, false},
	} {
		for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
			c := &counting{next: newMemory(t)}
			e := newEngine(t, c, redlimit.Config{Rules: rules, OnError: policy, NoDenyCache: true})
			var d redlimit.Decision
			refused := 0
			for range 100 {
				if tc.peek {
					e.PeekInputs(context.Background(), tc.in, &d)
				} else {
					e.Decide(context.Background(), inOrder(e, tc.in), &d)
				}
				if !d.Allowed && d.Failed && d.Source == redlimit.SourceNone && errors.Is(d.Err, algorithms.ErrInvalidConfig) && d.Outcome() == redlimit.OutcomeError {
					refused++
				}
			}
			if refused != 100 || c.calls.Load() != 0 {
				t.Errorf("%s, %v: %d of 100 refused with an ErrInvalidConfig, %d backend calls (last %+v); want 100 and none",
					tc.name, policy, refused, c.calls.Load(), d)
			}
			if d := e.Peek(context.Background(), "x"); d.Rules[0].Result.Remaining != 10 {
				t.Errorf("%s, %v: %+v after, want nothing consumed", tc.name, policy, d.Rules[0])
			}
		}
	}
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// TestFallbackSharedByEngines: Engines built by separate calls of New on
// one backend (a middleware per route group, a gRPC limiter beside them)
// share the default fallback, so a key both decide is held to the
// instance's share once: fixed window 10/min shared by 4 instances, two
// Engines, 2 allowed in all (each Limiter's own fallback allowed 2 each,
// 4). Once every Limiter using it is closed it is dropped: the next Limiter
// on that backend starts a fallback afresh.
func TestFallbackSharedByEngines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t)
		f.fail.Store(true)
		cfg := redlimit.Config{Instances: 4, FallbackAfter: time.Millisecond,
			Rules: []redlimit.Rule{{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(10)}}}
		ctx := context.Background()
		onFallback := func(es ...*redlimit.Limiter) {
			for _, e := range es {
				e.Allow(ctx, "k") // refused: the first failure
			}
			time.Sleep(time.Millisecond)
		}
		count := func(es ...*redlimit.Limiter) (allowed int) {
			for range 10 {
				for _, e := range es {
					d := e.Allow(ctx, "k")
					if d.Source != redlimit.SourceFallback {
						t.Fatalf("%+v, want the fallback", d)
					}
					if d.Allowed {
						allowed++
					}
				}
			}
			return allowed
		}
		a, b := newEngine(t, f, cfg), newEngine(t, f, cfg)
		onFallback(a, b)
		if got := count(a, b); got != 2 {
			t.Errorf("two Engines on one backend: their fallbacks allowed %d, want 2 (the instance's share, once)", got)
		}
		a.Close()
		b.Close()
		c := newEngine(t, f, cfg)
		onFallback(c)
		if got := count(c); got != 2 {
			t.Errorf("after both closed, a new Limiter's fallback allowed %d, want 2 (a fallback afresh)", got)
		}
		own, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		withOwn := cfg
		withOwn.FallbackBackend = own
		d := newEngine(t, f, withOwn)
		onFallback(d)
		if got := count(d); got != 2 {
			t.Errorf("an Limiter with its own FallbackBackend: %d allowed, want 2 (its own store, not the shared one)", got)
		}
	})
}
