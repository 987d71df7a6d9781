package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// remote is a user's wrapper around a memstore that reports no
// capability (so the engine puts a deny cache in front of it) and can
// reset keys. It counts the calls that reach it.
type remote struct {
	next  *memstore.Store
	calls atomic.Int64
}

func (r *remote) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	r.calls.Add(1)
	return r.next.Allow(ctx, checks, results)
}

func (r *remote) Reset(ctx context.Context, keys []string) error { return r.next.Reset(ctx, keys) }

// countingStore is a memstore that counts its calls and keeps its
// capabilities (InProcess: no deny cache, no timeout).
type countingStore struct {
	*memstore.Store
	calls atomic.Int64
}

func (c *countingStore) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	c.calls.Add(1)
	return c.Store.Allow(ctx, checks, results)
}

// newClockMemory returns a memstore on time.Now: in a synctest bubble,
// the bubble's clock.
func newClockMemory(t testing.TB) *countingStore {
	t.Helper()
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &countingStore{Store: m}
}

// TestAllowExactConcurrent: 64 goroutines calling Allow on one key get
// exactly the limit, on every algorithm.
func TestAllowExactConcurrent(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "job", Algorithm: alg, Limit: algorithms.PerMinute(10)}}})
			allowConcurrently(t, e, 10)
		})
	}
}

// allInputs returns one Input per rule of e, each holding material.
func allInputs(e *redlimit.Limiter, material string) []redlimit.Input {
	var in []redlimit.Input
	for _, r := range e.Rules() {
		in = append(in, redlimit.Input{Rule: r.Name, Material: material})
	}
	return in
}

// allowConcurrently runs 64 goroutines × 4 Allow calls on one key of e and
// checks that exactly want were allowed.
func allowConcurrently(t *testing.T, e *redlimit.Limiter, want int64) {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			var d redlimit.Decision
			in := allInputs(e, "acme")
			for range 4 {
				e.Decide(context.Background(), in, &d)
				if d.Err != nil {
					t.Error(d.Err)
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != want {
		t.Fatalf("64 goroutines × 4 Allow: %d allowed, want %d", got, want)
	}
}

// TestWaitExactConcurrent: 64 goroutines Waiting on one key of a limit of
// 10 per second are all released, never more than 10 in any second (in
// any aligned window for the fixed window), the last one no earlier than
// the limit allows; each waits by RetryAfter, so the backend is asked at
// most about once per waiter and release. Time is synctest's.
func TestWaitExactConcurrent(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.GCRA, algorithms.TokenBucket, algorithms.SlidingLog, algorithms.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newClockMemory(t)
				e := newEngine(t, m, redlimit.Config{Rules: []redlimit.Rule{{Name: "out", Algorithm: alg, Limit: algorithms.PerSecond(10)}}})
				start := time.Now()
				var mu sync.Mutex
				var released []time.Duration
				var wg sync.WaitGroup
				for range 64 {
					wg.Go(func() {
						if err := e.Wait(context.Background(), "api.example.com"); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						released = append(released, time.Since(start))
						mu.Unlock()
					})
				}
				wg.Wait()
				if len(released) != 64 {
					t.Fatalf("%d released, want 64", len(released))
				}
				for _, a := range released {
					for _, b := range released {
						if b < a {
							continue
						}
						// releases in [a, b]: at most 10 per second
						// interval (per aligned window for the fixed
						// window); a bucket adds its refill over b-a
						n, bound := int64(0), int64(10)
						if alg == algorithms.GCRA || alg == algorithms.TokenBucket {
							bound += int64((b - a) / (100 * time.Millisecond))
						} else if alg == algorithms.FixedWindow && b.Truncate(time.Second) != a.Truncate(time.Second) || b-a >= time.Second {
							continue
						}
						for _, c := range released {
							if c >= a && c <= b {
								n++
							}
						}
						if n > bound {
							t.Fatalf("%d released in [%v, %v], limit %d (releases %v)", n, a, b, bound, released)
						}
					}
				}
				last := slices.Max(released)
				if earliest := 5 * time.Second; last < earliest {
					t.Fatalf("last release at %v, the limit allows it no earlier than %v", last, earliest)
				}
				if last > 7*time.Second {
					t.Fatalf("last release at %v, want about 6.3s: waiters slept too long", last)
				}
				// Each round, every waiter asks once: 64 + 63 + ... for a
				// fixed window released a window at a time; far fewer than
				// polling every millisecond would (6.3s × 64 × 1000).
				calls := m.calls.Load()
				t.Logf("%d backend calls for 64 waiters, last released at %v", calls, last)
				if calls > 64*65/2 {
					t.Fatalf("%d backend calls for 64 waiters", calls)
				}
			})
		})
	}
}

// TestWaitSleepsRetryAfter: a lone waiter asks twice, the second time
// exactly RetryAfter after the first.
func TestWaitSleepsRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newClockMemory(t)
		e := newEngine(t, m, redlimit.Config{Rules: []redlimit.Rule{{Name: "out", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(4)}}})
		for range 4 {
			if !e.Allow(context.Background(), "k").Allowed {
				t.Fatal("first 4 denied")
			}
		}
		d := e.Peek(context.Background(), "k")
		want := d.Rules[0].Result.RetryAfter
		if want != 250*time.Millisecond {
			t.Fatalf("Peek RetryAfter = %v, want 250ms", want)
		}
		m.calls.Store(0)
		start := time.Now()
		if err := e.Wait(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != want {
			t.Errorf("Wait returned after %v, want exactly %v", got, want)
		}
		if got := m.calls.Load(); got != 2 {
			t.Errorf("Wait made %d backend calls, want 2", got)
		}
	})
}

// TestWaitOrder: waiters on one key are released in the order their
// RetryAfters end: costs 5, 1 and 3 on an empty bucket refilling 10 a
// second wait 500ms, 100ms and 300ms.
func TestWaitOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, newClockMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "out", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerSecond(10)}}})
		if !e.AllowN(context.Background(), "k", 10).Allowed {
			t.Fatal("AllowN(10) denied on a full bucket")
		}
		start := time.Now()
		var mu sync.Mutex
		var order []int64
		var at []time.Duration
		var wg sync.WaitGroup
		for _, cost := range []int64{5, 1, 3} {
			wg.Go(func() {
				if err := e.WaitN(context.Background(), "k", cost); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, cost)
				at = append(at, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		if fmt.Sprint(order) != "[1 3 5]" {
			t.Fatalf("released in order %v at %v, want [1 3 5]", order, at)
		}
		// cost 1 at 100ms; cost 3 wakes at 300ms with 2 tokens, waits
		// 100ms more; cost 5 wakes at 500ms with 1 token, waits 400ms more
		if want := "[100ms 400ms 900ms]"; fmt.Sprint(at) != want {
			t.Fatalf("released at %v, want %s", at, want)
		}
	})
}

// TestWaitErrors: what Wait cannot wait for fails at once, nothing
// consumed; a context that ends returns promptly, nothing consumed.
func TestWaitErrors(t *testing.T) {
	rules := []redlimit.Rule{{Name: "out", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10)}}
	t.Run("cost above capacity", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := newClockMemory(t)
			e := newEngine(t, m, redlimit.Config{Rules: rules})
			start := time.Now()
			err := e.WaitN(context.Background(), "k", 11)
			if !errors.Is(err, redlimit.ErrNeverAllowed) || time.Since(start) != 0 {
				t.Fatalf("WaitN(11) of a capacity of 10 = %v after %v, want ErrNeverAllowed at once", err, time.Since(start))
			}
			t.Log(err)
			if r := e.Peek(context.Background(), "k").Rules[0].Result; r.Remaining != 10 {
				t.Fatalf("after WaitN(11): remaining %d, want 10", r.Remaining)
			}
		})
	})
	t.Run("negative cost", func(t *testing.T) {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
		if err := e.WaitN(context.Background(), "k", -1); !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Fatalf("WaitN(-1) = %v, want a ConfigError", err)
		}
		if err := e.WaitInputs(context.Background(), []redlimit.Input{{Rule: "nope", Material: "k"}}); !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Fatalf("WaitInputs(an Input naming no rule) = %v, want a ConfigError", err)
		}
		if r := e.Peek(context.Background(), "k").Rules[0].Result; r.Remaining != 10 {
			t.Fatalf("after the refused Waits: %+v, want nothing consumed", r)
		}
	})
	t.Run("past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEngine(t, newClockMemory(t), redlimit.Config{Rules: rules})
			e.AllowN(context.Background(), "k", 10)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := e.Wait(ctx, "k")
			if !errors.Is(err, redlimit.ErrWaitExceedsDeadline) || time.Since(start) != 0 {
				t.Fatalf("Wait with 50ms left for a 100ms RetryAfter = %v after %v, want ErrWaitExceedsDeadline at once", err, time.Since(start))
			}
			if r := e.Peek(context.Background(), "k").Rules[0].Result; r.Remaining != 0 || r.RetryAfter != 100*time.Millisecond {
				t.Fatalf("after the refused Wait: %+v, want nothing consumed", r)
			}
		})
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEngine(t, newClockMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "out", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}}})
			e.Allow(context.Background(), "k")
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			start := time.Now()
			if err := e.Wait(ctx, "k"); !errors.Is(err, context.Canceled) || time.Since(start) != 200*time.Millisecond {
				t.Fatalf("Wait canceled at 200ms = %v after %v", err, time.Since(start))
			}
			if r := e.Peek(context.Background(), "k").Rules[0].Result; r.RetryAfter != time.Minute-200*time.Millisecond {
				t.Fatalf("after the canceled Wait: %+v, want nothing consumed", r)
			}
		})
	})
	t.Run("fail closed", func(t *testing.T) {
		f := &failing{}
		e := newEngine(t, f, redlimit.Config{Rules: rules, OnError: redlimit.FailClosed})
		if err := e.Wait(context.Background(), "k"); !errors.Is(err, algorithms.ErrBackend) {
			t.Fatalf("Wait under FailClosed on a failing backend = %v, want its error", err)
		}
		e = newEngine(t, f, redlimit.Config{Rules: rules, OnError: redlimit.FailOpen})
		if err := e.Wait(context.Background(), "k"); err != nil {
			t.Fatalf("Wait under FailOpen on a failing backend = %v, want nil", err)
		}
	})
}

// TestPeek: on every algorithm, Peek reports what Allow would, and
// consumes nothing, whether the key would be allowed or denied.
func TestPeek(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
				{Name: "a", Algorithm: alg, Limit: algorithms.PerMinute(3)},
				{Name: "b", Algorithm: alg, Limit: algorithms.PerMinute(5)},
			}})
			peekMatchesAllow(t, e, "acme")
		})
	}
}

// peekMatchesAllow checks, on a fresh material of e (whose first rule is
// the tightest), that Peek reports what Allow then decides, and that
// peeking twice changes nothing.
func peekMatchesAllow(t *testing.T, e *redlimit.Limiter, material string) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		p1, p2 := e.Peek(ctx, material), e.Peek(ctx, material)
		if fmt.Sprint(p1.Rules) != fmt.Sprint(p2.Rules) {
			t.Fatalf("step %d: two Peeks differ:\n%+v\n%+v", i, p1.Rules, p2.Rules)
		}
		if p1.Source == redlimit.SourceNone || p1.Err != nil {
			t.Fatalf("step %d: Peek not decided: %+v", i, p1)
		}
		a := e.Allow(ctx, material)
		if a.Allowed != p1.Allowed {
			t.Fatalf("step %d: Peek allowed=%v, Allow allowed=%v", i, p1.Allowed, a.Allowed)
		}
		for j := range a.Rules {
			p, r := p1.Rules[j].Result, a.Rules[j].Result
			want := p
			if a.Allowed {
				want.Remaining-- // Peek reports before the cost, Allow after
				want.ResetAfter = r.ResetAfter
			}
			if p.Limit != r.Limit || want.Remaining != r.Remaining || p.RetryAfter != r.RetryAfter || p.Allowed != r.Allowed {
				t.Fatalf("step %d rule %s: Peek %+v, then Allow %+v", i, a.Rules[j].Name, p, r)
			}
		}
	}
}

// TestReset: Reset makes a denied key allowed at once, at full capacity,
// for every rule, on memstore and through the deny cache; other keys keep
// their state.
func TestReset(t *testing.T) {
	rules := []redlimit.Rule{
		{Name: "a", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)},
		{Name: "b", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerHour(3)},
	}
	ctx := context.Background()
	t.Run("memstore", func(t *testing.T) {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
		resetUnblocks(t, e)
	})
	t.Run("deny cache", func(t *testing.T) {
		r := &remote{next: newMemory(t)}
		e := newEngine(t, r, redlimit.Config{Rules: rules})
		e.Allow(ctx, "acme")
		e.Allow(ctx, "acme")
		e.Allow(ctx, "acme") // denied by the backend: cached
		calls := r.calls.Load()
		if d := e.Allow(ctx, "acme"); d.Allowed || e.Status().LocalDenials != 1 || r.calls.Load() != calls {
			t.Fatalf("not denied by the deny cache: %+v, %d local denials", d, e.Status().LocalDenials)
		}
		if err := e.Reset(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if d := e.Allow(ctx, "acme"); !d.Allowed || d.Rules[0].Result.Remaining != 1 || e.Status().LocalDenials != 1 {
			t.Fatalf("after Reset: %+v", d)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		fb := newMemory(t)
		f := &failing{}
		e := newEngine(t, &resettableFailing{f}, redlimit.Config{Rules: rules, FallbackBackend: fb, ProbeInterval: time.Hour, FallbackAfter: time.Nanosecond})
		if d := e.Allow(ctx, "acme"); !d.Failed {
			t.Fatalf("first failure: %+v, want refused undecided", d)
		}
		e.Allow(ctx, "acme")
		e.Allow(ctx, "acme")
		if d := e.Allow(ctx, "acme"); d.Allowed || d.Source != redlimit.SourceFallback {
			t.Fatalf("third call on the fallback: %+v", d)
		}
		// the primary fails to reset: an error, but the fallback forgot
		if err := e.Reset(ctx, "acme"); !errors.Is(err, algorithms.ErrBackend) {
			t.Fatalf("Reset with the primary down = %v, want its error", err)
		}
		if d := e.Allow(ctx, "acme"); !d.Allowed {
			t.Fatalf("after Reset, the fallback still denies: %+v", d)
		}
	})
	t.Run("unsupported", func(t *testing.T) {
		e := newEngine(t, &counting{next: newMemory(t)}, redlimit.Config{Rules: rules})
		err := e.Reset(ctx, "acme")
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Reset on a backend that cannot = %v, want ErrUnsupported", err)
		}
		t.Log(err)
		e = newEngine(t, &counting{next: newMemory(t)}, redlimit.Config{Rules: rules, NoDenyCache: true})
		if err := e.Reset(ctx, "acme"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Reset on a backend that cannot, no deny cache = %v, want ErrUnsupported", err)
		}
	})
	t.Run("inputs", func(t *testing.T) {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
		if err := e.ResetInputs(ctx, []redlimit.Input{{Rule: "nope", Material: "x"}}); !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Fatalf("ResetInputs with an Input naming no rule = %v", err)
		}
		boom := errors.New("boom")
		if err := e.ResetInputs(ctx, []redlimit.Input{{Material: "x"}, {Err: boom}}); err != boom {
			t.Fatalf("ResetInputs with a failed Input = %v", err)
		}
		e.Decide(ctx, inOrder(e, []redlimit.Input{{Material: "ip"}, {Material: "user"}}), &redlimit.Decision{})
		// reset the user rule only
		if err := e.ResetInputs(ctx, []redlimit.Input{{Missing: true}, {Material: "user"}}); err != nil {
			t.Fatal(err)
		}
		d := redlimit.Decision{}
		e.PeekInputs(ctx, []redlimit.Input{{Material: "ip"}, {Material: "user"}}, &d)
		if d.Rules[0].Result.Remaining != 1 || d.Rules[1].Result.Remaining != 3 {
			t.Fatalf("after resetting the user rule: %+v", d.Rules)
		}
	})
}

type resettableFailing struct{ *failing }

func (resettableFailing) Reset(context.Context, []string) error {
	return &algorithms.BackendError{Backend: "test", Err: errors.New("down")}
}

// resetUnblocks exhausts "acme" and "globex" on e, resets "acme" and
// checks that acme is allowed at full capacity and globex still denied.
func resetUnblocks(t *testing.T, e *redlimit.Limiter) {
	t.Helper()
	ctx := context.Background()
	for _, m := range []string{"acme", "globex"} {
		for e.Allow(ctx, m).Allowed {
		}
	}
	if err := e.Reset(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	p := e.Peek(ctx, "acme")
	for _, rd := range p.Rules {
		if !rd.Result.Allowed || rd.Result.Remaining != rd.Result.Limit || rd.Result.ResetAfter != 0 {
			t.Fatalf("after Reset, rule %s: %+v, want a full key", rd.Name, rd.Result)
		}
	}
	if !e.Allow(ctx, "acme").Allowed {
		t.Fatal("after Reset, acme denied")
	}
	if e.Allow(ctx, "globex").Allowed {
		t.Fatal("Reset of acme unblocked globex")
	}
}

// TestKeyFirstAllocs: Decide of one material for every rule with a
// reused Decision allocates nothing on memstore, nor does peekInputs (what
// Peek runs); AllowN and Peek allocate the Decision they return (and its
// Rules) alone.
func TestKeyFirstAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 20)},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerSecond(1 << 20)},
	}})
	var d redlimit.Decision
	ctx := context.Background()
	in := []redlimit.Input{{Rule: "ip", Material: "acme"}, {Rule: "user", Material: "acme"}}
	e.Decide(ctx, in, &d)
	if got := testing.AllocsPerRun(1000, func() { e.Decide(ctx, in, &d) }); got != 0 || !d.Allowed {
		t.Errorf("Decide: %v allocs (allowed %v), want 0", got, d.Allowed)
	}
	if got := testing.AllocsPerRun(1000, func() { e.AllowN(ctx, "acme", 1) }); got != 2 {
		t.Errorf("AllowN: %v allocs, want 2 (its Decision and its Rules)", got)
	}
	if got := testing.AllocsPerRun(1000, func() { e.Peek(ctx, "acme") }); got != 2 {
		t.Errorf("Peek: %v allocs, want 2 (its Decision and its Rules)", got)
	}
	e.PeekInputs(ctx, in, &d)
	if got := testing.AllocsPerRun(1000, func() { e.PeekInputs(ctx, in, &d) }); got != 0 || !d.Allowed {
		t.Errorf("PeekInputs: %v allocs (allowed %v), want 0", got, d.Allowed)
	}
}

// TestWaitFallback: with the primary down, Wait waits on the fallback's
// state, as Decide decides with it.
func TestWaitFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := newClockMemory(t)
		e := newEngine(t, &failing{}, redlimit.Config{OnError: redlimit.Fallback, FallbackBackend: fb, ProbeInterval: time.Hour,
			FallbackAfter: time.Millisecond,
			Rules:         []redlimit.Rule{{Name: "out", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(2).WithBurst(1)}}})
		// the first failure is refused; the next, FallbackAfter later,
		// switches to the fallback
		if err := e.Wait(context.Background(), "k"); !errors.Is(err, algorithms.ErrBackend) {
			t.Fatalf("Wait at the first failure = %v, want the backend's error", err)
		}
		time.Sleep(time.Millisecond)
		start := time.Now()
		for range 3 {
			if err := e.Wait(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("3 waits at 2/s burst 1 on the fallback took %v, want 1s", got)
		}
		e.Close()
	})
}

// TestWaitEndedContext: a context that has ended before Wait consumes
// nothing.
func TestWaitEndedContext(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: twoPerHour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v", err)
	}
	if r := e.Peek(context.Background(), "k").Rules[0].Result; r.Remaining != 2 {
		t.Fatalf("after Wait on an ended context: %+v, want nothing consumed", r)
	}
}

// TestKeyFirstHostileMaterial: any material is safe: braces, spaces,
// control bytes and 1 MB values are sanitised (hashed when long) into
// keys that stay apart, and a peek key shares its rules' hash slot. The
// empty material is no key (see Input.Material): denied as missing.
func TestKeyFirstHostileMaterial(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: twoPerHour})
	ctx := context.Background()
	if d := e.Allow(ctx, ""); d.Allowed || !d.Rules[0].MissingKey {
		t.Fatalf("Allow(\"\"): %+v, want denied as a missing key", d.Rules[0])
	}
	long := strings.Repeat("x", 1<<20)
	for _, m := range []string{"a}{b", "{", "}", "a b\x00\n", long, long + "y", "rate:k:gcra:{a}"} {
		d := e.Allow(ctx, m)
		if !d.Allowed || d.Rules[0].Result.Remaining != 1 {
			t.Fatalf("Allow(%.20q): %+v, want a fresh key", m, d.Rules[0])
		}
		key := d.Rules[0].Key
		if strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 || len(key) > 200 {
			t.Fatalf("Allow(%.20q): key %q", m, key)
		}
		if p := e.Peek(ctx, m); p.Rules[0].Result.Remaining != 1 {
			t.Fatalf("Peek(%.20q): %+v", m, p.Rules[0])
		}
		peekKey := "rate:_peek:" + key[strings.IndexByte(key, '{'):]
		if hashslot.Of(peekKey) != hashslot.Of(key) {
			t.Fatalf("peek key %q and %q in different slots", peekKey, key)
		}
	}
}
