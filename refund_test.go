package redlimit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// refundRules are two refundable rules of one limit, keyed by different
// materials (on a cluster, in different hash slots).
func refundRules(alg algorithms.Algorithm, limit algorithms.Limit) []redlimit.Rule {
	return []redlimit.Rule{
		{Name: "ip", Algorithm: alg, Limit: limit, Refundable: true},
		{Name: "user", Algorithm: alg, Limit: limit, Refundable: true},
	}
}

// refundConcurrently runs 64 goroutines × 8 requests for one client of
// e (two refundable rules, a limit of 10 on a clock that stands still):
// every request reserves 1 unit; one in forty fails and keeps it, the
// others succeed and give it back with Refund. Then requests that fail
// are made one after another until one is denied. Over the run exactly
// 10 failed requests get through, and the key is then empty: no refund
// was lost or given twice.
func refundConcurrently(t *testing.T, e *redlimit.Limiter) {
	t.Helper()
	ctx := context.Background()
	in := []redlimit.Input{{Material: "203.0.113.7"}, {Material: "alice"}}
	var failed, succeeded atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			var d redlimit.Decision
			for i := range 8 {
				e.Decide(ctx, inOrder(e, in), &d)
				if d.Err != nil {
					t.Error(d.Err)
					return
				}
				if !d.Allowed {
					continue
				}
				if (g*8+i)%40 == 39 {
					failed.Add(1)
					continue
				}
				succeeded.Add(1)
				if err := refund(e, ctx, &d, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var d redlimit.Decision
	for {
		e.Decide(ctx, inOrder(e, in), &d)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		if !d.Allowed {
			break
		}
		failed.Add(1)
	}
	if got := failed.Load(); got != 10 {
		t.Fatalf("%d failed requests got through (%d succeeded), want exactly 10", got, succeeded.Load())
	}
	if succeeded.Load() < 20 {
		// without refunds no more than 10 requests could get through at all
		t.Fatalf("only %d requests succeeded: the test no longer exercises refunds", succeeded.Load())
	}
	for _, rd := range d.Rules {
		if rd.Result.Remaining != 0 {
			t.Fatalf("rule %s: Remaining %d after 10 kept charges, want 0", rd.Name, rd.Result.Remaining)
		}
	}
}

// TestRefundExactConcurrent: "count only failed logins" under 64
// goroutines, on every algorithm, in memory.
func TestRefundExactConcurrent(t *testing.T) {
	for _, alg := range refundable {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: refundRules(alg, algorithms.PerMinute(10))})
			refundConcurrently(t, e)
		})
	}
}

// TestRedisRefundExactConcurrent: the same on a real redis-server (the
// deny cache in front), on a Ring of two and on a real 3-master cluster,
// where the two rules' keys live in different hash slots.
func TestRedisRefundExactConcurrent(t *testing.T) {
	client := redistest.Require(t).Client(t)
	for _, alg := range refundable {
		t.Run("single/"+alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second, Rules: refundRules(alg, algorithms.PerMinute(10))})
			refundConcurrently(t, e)
		})
	}
	addrs := map[string]string{}
	for _, name := range []string{"s1", "s2"} {
		s, err := redistest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		addrs[name] = s.Addr
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { ring.Close() })
	for _, alg := range refundable {
		t.Run("ring/"+alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, ring, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second, Rules: refundRules(alg, algorithms.PerMinute(10))})
			refundConcurrently(t, e)
		})
	}
	redistest.RequireCluster(t)
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cluster := cl.Client(t)
	t.Run("cluster/with-concurrency", func(t *testing.T) {
		refundWithSlots(t, newEngine(t, redisStore(t, cluster, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second, Rules: slotRules()}))
	})
	for _, alg := range refundable {
		t.Run("cluster/"+alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, cluster, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second, Rules: refundRules(alg, algorithms.PerMinute(10))})
			refundConcurrently(t, e)
		})
	}
}

// clockMemory is a memstore on a clock the test moves.
func clockMemory(t *testing.T) (*memstore.Store, *time.Time) {
	t.Helper()
	now := t0
	m, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return m, &now
}

// TestRefund: key-first reserve and refund, the errors, at most once, and
// nothing given back after the refund window or once the window of a
// fixed window has moved on.
func TestRefund(t *testing.T) {
	ctx := context.Background()
	m, now := clockMemory(t)
	e := newEngine(t, m, redlimit.Config{RefundWindow: 2 * time.Hour, Rules: []redlimit.Rule{
		{Name: "jobs", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10), Refundable: true},
		{Name: "plain", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10)},
	}})
	remaining := func() (int64, int64) {
		d := e.Peek(ctx, "acme")
		return d.Rules[0].Result.Remaining, d.Rules[1].Result.Remaining
	}
	d := e.AllowN(ctx, "acme", 3)
	if !d.Allowed || d.Rules[0].Cost != 3 {
		t.Fatalf("AllowN(3) = %+v", d)
	}
	var ce *algorithms.ConfigError
	for _, n := range []int64{-1, 4} {
		if err := refund(e, ctx, d, n); !errors.As(err, &ce) || ce.Rule != "jobs" {
			t.Fatalf("Refund(%d) = %v, want a ConfigError naming the rule", n, err)
		}
	}
	if r, p := remaining(); r != 7 || p != 7 {
		t.Fatalf("after invalid refunds: remaining %d, %d; want 7, 7", r, p)
	}
	if err := refund(e, ctx, d, 2); err != nil {
		t.Fatal(err)
	}
	if r, p := remaining(); r != 9 || p != 7 {
		t.Fatalf("after Refund(2): remaining %d, %d; want 9 (the refundable rule), 7", r, p)
	}
	if err := refund(e, ctx, d, 1); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("second Refund = %v, want ErrNotRefunded", err)
	}
	if r, _ := remaining(); r != 9 {
		t.Fatalf("after a second refund: remaining %d, want 9", r)
	}
	// Costs naming no rule, a rule that is not refundable, or one rule
	// twice, are programmer errors: nothing is given back.
	d = e.AllowN(ctx, "acme", 2)
	for _, costs := range [][]redlimit.Cost{
		{{Rule: "nope", Units: 0}},
		{{Rule: "plain", Units: 0}},
		{{Rule: "jobs", Units: 0}, {Rule: "jobs", Units: 1}},
		{{Rule: "jobs", Units: 0}, {Rule: "plain", Units: 0}},
	} {
		if err := e.Settle(ctx, d, costs...); !errors.As(err, &ce) || !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Fatalf("Settle(%+v) = %v, want a ConfigError", costs, err)
		}
		if r, p := remaining(); r != 7 || p != 5 {
			t.Fatalf("after Settle(%+v): remaining %d, %d; want 7, 5 (nothing given back)", costs, r, p)
		}
	}

	// Settle: the cost of the refundable rule only.
	if err := e.Settle(ctx, d, redlimit.Cost{Rule: "jobs", Units: 0}); err != nil {
		t.Fatal(err)
	}
	if r, p := remaining(); r != 9 || p != 5 {
		t.Fatalf("after Settle(0): remaining %d, %d; want 9, 5", r, p)
	}

	// A refund of a window that has ended gives nothing to the next.
	d = e.AllowN(ctx, "acme", 1)
	*now = t0.Add(time.Hour)
	e.AllowN(ctx, "acme", 1)
	if err := refund(e, ctx, d, 1); err != nil {
		t.Fatal(err)
	}
	if r, _ := remaining(); r != 9 {
		t.Fatalf("a refund of the previous window changed the current one: remaining %d, want 9", r)
	}

	// After the refund window: nothing.
	d = e.AllowN(ctx, "acme", 1)
	*now = now.Add(2*time.Hour + time.Millisecond)
	if err := refund(e, ctx, d, 1); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("Refund after the refund window = %v, want ErrNotRefunded", err)
	}

	// A denied decision has nothing to settle.
	d = e.AllowN(ctx, "acme", 11)
	if d.Allowed {
		t.Fatal("cost 11 allowed")
	}
	if err := refund(e, ctx, d, 1); err != nil {
		t.Fatalf("Refund of a denial = %v, want nil", err)
	}
}

// TestRefundWindowConfig: Config.RefundWindow is validated.
func TestRefundWindowConfig(t *testing.T) {
	for _, w := range []time.Duration{-time.Second, 25 * time.Hour} {
		_, err := redlimit.New(newMemory(t), redlimit.Config{RefundWindow: w, Rules: twoPerHour})
		var ce *algorithms.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Config.RefundWindow" {
			t.Fatalf("RefundWindow %v: %v, want a ConfigError naming Config.RefundWindow", w, err)
		}
	}
}

// TestRedisRefundDenyCache: the denials of a refundable rule's key within
// its refund window are provisional, so neither this engine's deny cache
// nor another instance's remembers them: once a refund gives units back,
// both allow at once. The same denials of a rule that is not refundable
// are cached (the test would otherwise prove nothing).
func TestRedisRefundDenyCache(t *testing.T) {
	client := redistest.Require(t).Client(t)
	ctx := context.Background()
	for _, refundable := range []bool{true, false} {
		prefix := enginePrefix(t)
		if !refundable {
			prefix += "-plain"
		}
		cfg := redlimit.Config{Prefix: prefix, Timeout: 10 * time.Second, Rules: []redlimit.Rule{{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3), Refundable: refundable}}}
		a := newEngine(t, redisStore(t, client, true), cfg)
		b := newEngine(t, redisStore(t, client, true), cfg)
		var held []*redlimit.Decision
		for range 3 {
			held = append(held, a.Allow(ctx, "alice"))
		}
		for range 3 {
			for _, e := range []*redlimit.Limiter{a, b} {
				if d := e.Allow(ctx, "alice"); d.Allowed || d.Rules[0].Result.Provisional != refundable {
					t.Fatalf("refundable %v: a fourth request: %+v", refundable, d.Rules[0])
				}
			}
		}
		if !refundable {
			if a.Status().LocalDenials == 0 || b.Status().LocalDenials == 0 {
				t.Fatalf("final denials not cached: %d, %d local denials", a.Status().LocalDenials, b.Status().LocalDenials)
			}
			continue
		}
		if n := a.Status().LocalDenials + b.Status().LocalDenials; n != 0 {
			t.Fatalf("%d provisional denials answered by a deny cache", n)
		}
		if err := refund(a, ctx, held[0], 1); err != nil {
			t.Fatal(err)
		}
		if d := b.Allow(ctx, "alice"); !d.Allowed {
			t.Fatalf("the other instance after a refund: %+v", d.Rules[0])
		}
		if err := refund(b, ctx, held[1], 1); err != nil {
			t.Fatal(err)
		}
		if d := a.Allow(ctx, "alice"); !d.Allowed {
			t.Fatalf("after a refund made by the other instance: %+v", d.Rules[0])
		}
	}
}

// TestRedisRefundWindow: on a real redis-server, a refund after the
// refund window (its commit marker has expired) gives nothing back, and a
// refund sent twice gives back once.
func TestRedisRefundWindow(t *testing.T) {
	client := redistest.Require(t).Client(t)
	ctx := context.Background()
	prefix := enginePrefix(t)
	e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: prefix, Timeout: 10 * time.Second, RefundWindow: 50 * time.Millisecond,
		Rules: []redlimit.Rule{{Name: "job", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10), Refundable: true}}})
	d := e.AllowN(ctx, "acme", 2)
	twice := d.Clone()
	if err := refund(e, ctx, d, 1); err != nil {
		t.Fatal(err)
	}
	if err := refund(e, ctx, twice, 1); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("a refund sent twice = %v, want ErrNotRefunded", err)
	}
	if r := e.Peek(ctx, "acme").Rules[0].Result.Remaining; r != 9 {
		t.Fatalf("remaining %d, want 9", r)
	}
	d = e.AllowN(ctx, "acme", 1)
	waitFor(t, "the commit marker to expire", func() bool {
		return client.Exists(ctx, d.Rules[0].Result.Receipt.Marker).Val() == 0
	})
	if err := refund(e, ctx, d, 1); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("a refund after the refund window = %v, want ErrNotRefunded", err)
	}
	if r := e.Peek(ctx, "acme").Rules[0].Result.Remaining; r != 8 {
		t.Fatalf("remaining %d, want 8", r)
	}
	// The markers of the call expire with the refund window.
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := client.PTTL(ctx, k).Val(); ttl < 0 {
			t.Fatalf("key %s has no TTL", k)
		}
	}
}

// refundable lists the algorithms whose charges can be refunded: all but
// concurrency, whose slots are released instead.
var refundable = slices.DeleteFunc(slices.Clone(algorithms.Algorithms), func(a algorithms.Algorithm) bool {
	return a == algorithms.Concurrency
})

// A concurrency rule cannot be refundable (its slots are released), and
// a backend refuses a refundable concurrency check before storing
// anything.
func TestRefundableConcurrencyRefused(t *testing.T) {
	backend, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = redlimit.New(backend, redlimit.Config{Rules: []redlimit.Rule{{
		Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), Refundable: true,
	}}})
	const want = `redlimit: rule "exports": Refundable must be false for concurrency: its slots are released when the work ends, never refunded`
	if err == nil || err.Error() != want {
		t.Fatalf("New = %v, want %s", err, want)
	}
	checks := []algorithms.Check{{Key: "c:{a}", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), Lease: 7, RefundWindow: time.Minute}}
	err = backend.Allow(context.Background(), checks, make([]algorithms.Result, 1))
	const wantCall = `redlimit: Check.RefundWindow must be 0 for concurrency: release its lease instead (Leaser)`
	if err == nil || err.Error() != wantCall {
		t.Fatalf("Allow = %v, want %s", err, wantCall)
	}
	ps := make([]algorithms.Result, 1)
	if err := backend.Allow(context.Background(), []algorithms.Check{{Key: "c:{a}", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), Lease: 7}}, ps); err != nil || ps[0].Remaining != 2 {
		t.Fatalf("after the refused call: %+v, %v; want 2 slots left (nothing stored by the refused call)", ps[0], err)
	}
}

// refundWithSlots plays a refundable rule layered with a concurrency rule
// in one decision: a concurrency denial charges the refundable rule
// nothing (all-or-nothing), a refund gives back only the refundable
// rule's unit, and a release frees only the slot.
func refundWithSlots(t *testing.T, e *redlimit.Limiter) {
	t.Helper()
	ctx := context.Background()
	remaining := func(d *redlimit.Decision) [2]int64 {
		return [2]int64{d.Rules[0].Result.Remaining, d.Rules[1].Result.Remaining}
	}
	allow := func(want bool, rem [2]int64) *redlimit.Decision {
		t.Helper()
		d := e.Allow(ctx, "alice")
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		if d.Allowed != want || remaining(d) != rem {
			t.Fatalf("Allow = %v, remaining (failures, slots) %v; want %v, %v", d.Allowed, remaining(d), want, rem)
		}
		return d
	}
	d1 := allow(true, [2]int64{2, 1})
	d2 := allow(true, [2]int64{1, 0})
	allow(false, [2]int64{1, 0}) // no slot: the failure rule is not charged
	if err := refund(e, ctx, d1, 1); err != nil {
		t.Fatal(err)
	}
	e.Settle(ctx, d1)
	d4 := allow(true, [2]int64{1, 0}) // d1's unit and slot came back: 3 − d2 − d4
	e.Settle(ctx, d2)
	e.Settle(ctx, d4)
	if err := refund(e, ctx, d1, 1); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("second refund of d1: %v, want ErrNotRefunded", err)
	}
	e.Settle(ctx, allow(true, [2]int64{0, 1}))
}

func slotRules() []redlimit.Rule {
	return []redlimit.Rule{
		{Name: "fail", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(3), Refundable: true},
		{Name: "slots", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(2, time.Minute)},
	}
}

func TestRefundWithConcurrency(t *testing.T) {
	mem, _ := clockMemory(t)
	refundWithSlots(t, newEngine(t, mem, redlimit.Config{Rules: slotRules()}))
}

func TestRedisRefundWithConcurrency(t *testing.T) {
	client := redistest.Require(t).Client(t)
	refundWithSlots(t, newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second, Rules: slotRules()}))
}

// refund gives back n units to each refundable rule that d charged: Settle
// with each such rule's cost its reservation less n ("refund on
// failure").
func refund(e *redlimit.Limiter, ctx context.Context, d *redlimit.Decision, n int64) error {
	var costs []redlimit.Cost
	for i, r := range e.Rules() {
		if r.Refundable && i < len(d.Rules) {
			costs = append(costs, redlimit.Cost{Rule: r.Name, Units: d.Rules[i].Cost - n})
		}
	}
	return e.Settle(ctx, d, costs...)
}

// TestRefundableNeedsRefunder: a Refundable rule on a backend, or a
// fallback, that cannot give charges back is refused when the limiter is
// built, naming the rule and the field (every Settle would fail, and the
// charges stay, found only at request time); on one that can, it is built.
func TestRefundableNeedsRefunder(t *testing.T) {
	rule := redlimit.Rule{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(5), Refundable: true}
	for _, tt := range []struct {
		name     string
		backend  algorithms.Backend
		fallback algorithms.Backend
		policy   redlimit.ErrorPolicy
	}{
		{"backend", &remote{next: newMemory(t)}, nil, redlimit.FailClosed},
		{"backend, the default fallback", &remote{next: newMemory(t)}, nil, redlimit.Fallback},
		{"fallback", newMemory(t), &remote{next: newMemory(t)}, redlimit.Fallback},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redlimit.New(tt.backend, redlimit.Config{OnError: tt.policy, FallbackBackend: tt.fallback, Rules: []redlimit.Rule{rule}})
			var ce *algorithms.ConfigError
			if !errors.As(err, &ce) || ce.Rule != "login" || ce.Field != "Refundable" {
				t.Fatalf("New = %v, want a *ConfigError naming rule login, field Refundable", err)
			}
		})
	}
	e, err := redlimit.New(newMemory(t), redlimit.Config{Rules: []redlimit.Rule{rule}})
	if err != nil {
		t.Fatalf("New on memstore: %v", err)
	}
	e.Close()
	rule.Refundable = false
	e, err = redlimit.New(&remote{next: newMemory(t)}, redlimit.Config{Rules: []redlimit.Rule{rule}})
	if err != nil {
		t.Fatalf("New of a rule that is not Refundable on a backend that cannot refund: %v", err)
	}
	e.Close()
}
