package redlimit_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/hashslot"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestMain starts the redis-server the key-first API's tests share (see
// [redistest.Main]).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// redisStore returns a redisstore.Store on client, on the fixed clock
// when fixedClock is set (the server's clock otherwise).
func redisStore(t testing.TB, client redis.Scripter, fixedClock bool) *redisstore.Store {
	t.Helper()
	cfg := redisstore.Config{}
	if fixedClock {
		cfg.Now = fixed
	}
	b, err := redisstore.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// enginePrefix is a Config.Prefix unique to t.
func enginePrefix(t testing.TB) string {
	return strings.NewReplacer("/", ".", ":", "").Replace(strings.TrimSuffix(redistest.Prefix(t), ":"))
}

// TestRedisAllowExactConcurrent: 64 goroutines calling Allow on one key of
// a real redis-server get exactly the limit, on every algorithm.
func TestRedisAllowExactConcurrent(t *testing.T) {
	client := redistest.Require(t).Client(t)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second,
				Rules: []redlimit.Rule{{Name: "job", Algorithm: alg, Limit: algorithms.PerMinute(10)}}})
			allowConcurrently(t, e, 10)
		})
	}
}

// TestRedisWaitConcurrent: 64 goroutines Waiting on one key of a real
// redis-server, on the server's clock, are each released once: exactly 64
// allowed decisions, and no sooner than the limit lets them through (16
// per 200ms: the last no earlier than 600ms after the first call). A slow
// machine only makes the run longer.
func TestRedisWaitConcurrent(t *testing.T) {
	client := redistest.Require(t).Client(t)
	for _, alg := range []algorithms.Algorithm{algorithms.SlidingLog, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			waitConcurrently(t, redisStore(t, client, false), alg)
		})
	}
}

// waitConcurrently runs 64 goroutines Waiting on one key of backend, on
// the backend's clock, under a limit of 16 per 200ms: each is released
// once (exactly 64 allowed decisions), and no sooner than the limit lets
// them through: the 49th unit cannot pass before 3 periods after the
// first call (GCRA: 48 emission intervals of 12.5ms after the burst of
// 16). A slow machine only makes the run longer. The limit runs on the
// server's wall clock and the run is timed on this process's monotonic
// clock, which may drift apart by a few milliseconds (a wall clock being
// slewed or stepped): the bound allows 20ms for that, less than two
// emission intervals, so releasing two units early still fails.
func waitConcurrently(t *testing.T, backend algorithms.Backend, alg algorithms.Algorithm) {
	t.Helper()
	var allowed, denied atomic.Int64
	limit := algorithms.Limit{Rate: 16, Period: 200 * time.Millisecond}
	e := newEngine(t, backend, redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second,
		Rules: []redlimit.Rule{{Name: "out", Algorithm: alg, Limit: limit}},
		OnDecision: func(_ context.Context, d *redlimit.Decision) {
			if d.Err != nil {
				t.Error(d.Err)
			}
			if d.Allowed {
				allowed.Add(1)
			} else {
				denied.Add(1)
			}
		}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if err := e.Wait(ctx, "api.example.com"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("64 waiters released in %v: %d allowed, %d denied attempts (%d answered by the deny cache)", elapsed, allowed.Load(), denied.Load(), e.Status().LocalDenials)
	if allowed.Load() != 64 {
		t.Fatalf("%d allowed decisions for 64 waiters", allowed.Load())
	}
	if min := 600*time.Millisecond - 20*time.Millisecond; elapsed < min {
		t.Fatalf("64 waiters released in %v, the limit needs at least %v", elapsed, min)
	}
}

// dumpKeys returns DUMP of each key ("" for a missing key).
func dumpKeys(t *testing.T, client redis.Cmdable, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := client.Dump(context.Background(), k).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// TestRedisPeek: on a real redis-server, Peek reports what Allow then
// decides, on every algorithm, and leaves every key byte for byte as it
// was (DUMP), writing no key of its own.
func TestRedisPeek(t *testing.T) {
	client := redistest.Require(t).Client(t)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			prefix := enginePrefix(t)
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: prefix, NoDenyCache: true, Rules: []redlimit.Rule{
				{Name: "a", Algorithm: alg, Limit: algorithms.PerMinute(3)},
				{Name: "b", Algorithm: alg, Limit: algorithms.PerMinute(5)},
			}})
			peekMatchesAllow(t, e, "acme")
			peekKeepsState(t, e, client, prefix, []redlimit.Input{{Material: "acme"}, {Material: "acme"}})
		})
	}
}

// peekKeepsState checks that peeking in leaves the state of its keys as
// it was, and writes no other key of prefix.
func peekKeepsState(t *testing.T, e *redlimit.Limiter, client redis.Cmdable, prefix string, in []redlimit.Input) {
	t.Helper()
	ctx := context.Background()
	var d redlimit.Decision
	e.PeekInputs(ctx, in, &d)
	var keys []string
	for _, rd := range d.Rules {
		keys = append(keys, rd.Key)
	}
	before := dumpKeys(t, client, keys)
	for range 3 {
		e.PeekInputs(ctx, in, &d)
		e.PeekInputs(ctx, in, &d) // also where the deny cache, if any, answers
		for _, n := range []int64{1, 2, 1 << 20} {
			var x []redlimit.Input
			for _, i := range in {
				i.Cost = n
				x = append(x, i)
			}
			e.PeekInputs(ctx, x, &d)
		}
	}
	if after := dumpKeys(t, client, keys); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("Peek changed the state:\nbefore %q\nafter  %q", before, after)
	}
	for _, rd := range d.Rules {
		if pk := prefix + ":_peek:" + rd.Key[strings.IndexByte(rd.Key, '{'):]; client.Exists(ctx, pk).Val() != 0 {
			t.Fatalf("Peek wrote %s", pk)
		}
	}
}

// TestRedisReset: on a real redis-server, through the deny cache, Reset
// makes a denied key allowed at once, at full capacity.
func TestRedisReset(t *testing.T) {
	client := redistest.Require(t).Client(t)
	for _, alg := range algorithms.Algorithms {
		if alg == algorithms.Concurrency {
			continue // its denials are never cached (TestConcurrencyDenialNotCached); reset: TestConcurrencyReset
		}
		t.Run(alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), Rules: []redlimit.Rule{
				{Name: "a", Algorithm: alg, Limit: algorithms.PerMinute(3)},
				{Name: "b", Algorithm: alg, Limit: algorithms.PerMinute(5)},
			}})
			ctx := context.Background()
			for e.Allow(ctx, "acme").Allowed {
			}
			if d := e.Allow(ctx, "acme"); d.Allowed || e.Status().LocalDenials == 0 {
				t.Fatalf("not denied by the deny cache: %+v", d)
			}
			resetUnblocks(t, e)
		})
	}
}

// TestRedisCluster: on a real 3-master cluster, a per-IP and a per-user
// rule (different hash slots): Peek consumes nothing in any slot (no key
// written, no marker) and reports what Decide then decides; Reset
// unblocks both. Then Allow and Wait under 64 goroutines, exact.
func TestRedisCluster(t *testing.T) {
	redistest.RequireCluster(t)
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	client := cl.Client(t)
	ctx := context.Background()
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			prefix := enginePrefix(t)
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: prefix, Timeout: 5 * time.Second, Rules: []redlimit.Rule{
				{Name: "ip", Algorithm: alg, Limit: algorithms.PerMinute(3)},
				{Name: "user", Algorithm: alg, Limit: algorithms.PerMinute(5)},
			}})
			in := []redlimit.Input{{Material: "203.0.113.7"}, {Material: "alice"}}
			var d redlimit.Decision
			e.Decide(ctx, inOrder(e, in), &d)
			if hashslot.Of(d.Rules[0].Key) == hashslot.Of(d.Rules[1].Key) {
				t.Fatalf("%s and %s share a slot: the test needs two", d.Rules[0].Key, d.Rules[1].Key)
			}
			// every key of the test, markers of the Decide included, as it was
			all := func() []string {
				var mu sync.Mutex
				var keys []string
				err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
					ks, err := c.Keys(ctx, prefix+"*").Result()
					mu.Lock()
					keys = append(keys, ks...)
					mu.Unlock()
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(keys)
				return append(keys, dumpKeys(t, client, keys)...)
			}
			before := all()
			peekKeepsState(t, e, client, prefix, in)
			if after := all(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("Peek changed the cluster's keys:\nbefore %q\nafter  %q", before, after)
			}
			for i := range 6 {
				var p redlimit.Decision
				e.PeekInputs(ctx, in, &p)
				e.Decide(ctx, inOrder(e, in), &d)
				if p.Allowed != d.Allowed || p.Rules[0].Result.RetryAfter != d.Rules[0].Result.RetryAfter {
					t.Fatalf("step %d: Peek %+v, then Decide %+v", i, p.Rules, d.Rules)
				}
			}
			if d.Allowed {
				t.Fatal("the ip rule still allows after 7 calls")
			}
			if err := e.ResetInputs(ctx, in); err != nil {
				t.Fatal(err)
			}
			e.Decide(ctx, inOrder(e, in), &d)
			if !d.Allowed || d.Rules[0].Result.Remaining != 2 || d.Rules[1].Result.Remaining != 4 {
				t.Fatalf("after Reset: %+v", d.Rules)
			}
		})
	}
	// Exact counts under 64 goroutines on the cluster: the rules of one
	// material share a slot, decided by one script.
	for _, alg := range []algorithms.Algorithm{algorithms.SlidingLog, algorithms.GCRA} {
		t.Run("AllowExactConcurrent/"+alg.String(), func(t *testing.T) {
			e := newEngine(t, redisStore(t, client, true), redlimit.Config{Prefix: enginePrefix(t), Timeout: 10 * time.Second,
				Rules: []redlimit.Rule{{Name: "job", Algorithm: alg, Limit: algorithms.PerMinute(10)}, {Name: "job2", Algorithm: alg, Limit: algorithms.PerMinute(20)}}})
			allowConcurrently(t, e, 10)
		})
		t.Run("WaitConcurrent/"+alg.String(), func(t *testing.T) {
			waitConcurrently(t, redisStore(t, client, false), alg)
		})
	}
}

// TestRedisResetOtherInstance: Reset on one instance unblocks the key at
// once there; another instance's deny cache keeps denying it locally for
// at most the RetryAfter it recorded, then asks the store and is allowed.
func TestRedisResetOtherInstance(t *testing.T) {
	client := redistest.Require(t).Client(t)
	store := redisStore(t, client, true)
	prefix := enginePrefix(t)
	rules := []redlimit.Rule{{Name: "api", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}}
	localB := t0
	a := newEngine(t, store, redlimit.Config{Prefix: prefix, Rules: rules})
	b := newEngine(t, store, redlimit.Config{Prefix: prefix, Rules: rules, DenyCache: denycache.Config{Now: func() time.Time { return localB }}})
	ctx := context.Background()
	for a.Allow(ctx, "acme").Allowed {
	}
	d := b.Allow(ctx, "acme")
	if d.Allowed || d.Rules[0].Result.RetryAfter != 20*time.Second {
		t.Fatalf("instance b: %+v, want denied for 20s", d.Rules[0].Result)
	}
	if err := a.Reset(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if !a.Peek(ctx, "acme").Allowed {
		t.Fatal("instance a: denied after its Reset")
	}
	localB = localB.Add(20*time.Second - time.Microsecond)
	if d := b.Allow(ctx, "acme"); d.Allowed || b.Status().LocalDenials != 1 {
		t.Fatalf("instance b, 1µs before its cached RetryAfter ends: %+v, want denied locally", d.Rules[0].Result)
	}
	localB = localB.Add(time.Microsecond)
	if d := b.Allow(ctx, "acme"); !d.Allowed || d.Rules[0].Result.Remaining != 2 {
		t.Fatalf("instance b, once its cached RetryAfter ended: %+v, want allowed by the reset store", d.Rules[0].Result)
	}
}
