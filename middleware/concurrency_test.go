package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware"
)

// exportRule is "3 concurrent exports per user", leases of 30s.
var exportRule = specRule{Name: "exports", Key: userFunc, Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, 30*time.Second)}

// TestConcurrencyHeaders: a concurrency rule's headers are its slots: the
// limit, the free slots after this request's, and on a 429 a Retry-After
// (and reset) of when the earliest lease expires, rounded up to 1s.
func TestConcurrencyHeaders(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{exportRule}})
	ctx := context.Background()
	held := mw.Limiter().Allow(ctx, "alice") // a slot taken elsewhere (same rule, same bucket)
	defer mw.Limiter().Settle(ctx, held)

	w := httptest.NewRecorder()
	mw.Handler(ok).ServeHTTP(w, req("GET", "/export", "192.0.2.1:1", "X-User", "alice"))
	want := map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "1700000030"}
	for k, v := range want {
		if got := w.Header().Get(k); got != v || w.Code != http.StatusOK {
			t.Errorf("allowed: %d, %s = %q, want 200, %q", w.Code, k, got, v)
		}
	}
	// the request's slot is free again: two more fit beside held
	a, b := mw.Limiter().Allow(ctx, "alice"), mw.Limiter().Allow(ctx, "alice")
	defer mw.Limiter().Settle(ctx, a)
	defer mw.Limiter().Settle(ctx, b)
	if !a.Allowed || !b.Allowed {
		t.Fatalf("the request's slot was not released: %+v %+v", a.Rules[0].Result, b.Rules[0].Result)
	}
	w = httptest.NewRecorder()
	mw.Handler(ok).ServeHTTP(w, req("GET", "/export", "192.0.2.1:1", "X-User", "alice"))
	want = map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1700000030", "Retry-After": "30"}
	for k, v := range want {
		if got := w.Header().Get(k); got != v || w.Code != http.StatusTooManyRequests {
			t.Errorf("denied: %d, %s = %q, want 429, %q", w.Code, k, got, v)
		}
	}
}

// TestConcurrencyReleaseOnPanic: a handler that panics frees its slot.
func TestConcurrencyReleaseOnPanic(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{exportRule}})
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("export failed") }))
	for range 5 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the handler's panic did not reach the caller")
				}
			}()
			h.ServeHTTP(httptest.NewRecorder(), req("GET", "/export", "192.0.2.1:1", "X-User", "alice"))
		}()
	}
	d := mw.Limiter().Peek(context.Background(), "alice")
	if r := d.Rules[0].Result; r.Remaining != 3 {
		t.Fatalf("after 5 panics: Remaining %d, want 3 (every slot released)", r.Remaining)
	}
}

// TestConcurrencyExactRedis: 64 goroutines × 2 instances (each its own
// client and Middleware) on one user's "3 in flight" rule, on a real
// redis-server and on a real cluster: the handler itself counts the
// requests in flight, and never sees more than 3; at the end every slot
// is free again. The rule is layered with a generous rate rule in
// another hash slot, decided in the same call.
func TestConcurrencyExactRedis(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		srv := redistest.Require(t)
		exactInFlight(t, func() redis.Scripter { return srv.Client(t) })
	})
	t.Run("cluster", func(t *testing.T) {
		redistest.RequireCluster(t)
		cl, err := redistest.StartCluster(3, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		exactInFlight(t, func() redis.Scripter { return cl.Client(t) })
	})
}

func exactInFlight(t *testing.T, client func() redis.Scripter) {
	const n, workers, each = 3, 64, 15
	prefix := strings.TrimSuffix(strings.ReplaceAll(redistest.Prefix(t), "/", "."), ":")
	var inFlight, most, served, denied atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := inFlight.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(time.Millisecond) // hold the slot a moment
		served.Add(1)
		inFlight.Add(-1)
	})
	var mws [2]*middleware.Middleware
	for i := range mws {
		b, err := redisstore.New(client(), redisstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		mws[i] = newMW(t, b, spec{Prefix: prefix, Timeout: 5 * time.Second, Rules: []specRule{
			{Name: "exports", Key: userFunc, Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(n, 10*time.Second)},
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1_000_000)},
		}})
	}
	var wg sync.WaitGroup
	for g := range workers {
		h := mws[g%2].Handler(next)
		wg.Go(func() {
			for range each {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req("GET", "/export", "192.0.2.1:1", "X-User", "alice"))
				switch w.Code {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("status %d", w.Code)
				}
			}
		})
	}
	wg.Wait()
	for _, mw := range mws { // the last slots are released after their responses
		waitFor(t, "the releases", func() bool { return middleware.Pending(mw) == 0 })
	}
	t.Logf("%d served, %d denied, at most %d in flight (limit %d)", served.Load(), denied.Load(), most.Load(), n)
	if most.Load() > n {
		t.Fatalf("%d requests in flight at once, limit %d", most.Load(), n)
	}
	if served.Load() < n || served.Load()+denied.Load() != workers*each {
		t.Fatalf("served %d, denied %d of %d", served.Load(), denied.Load(), workers*each)
	}
	for i, mw := range mws {
		d := mw.Limiter().Peek(context.Background(), "alice")
		if r := d.Rules[0].Result; r.Remaining != n || d.Err != nil {
			t.Fatalf("instance %d: after the run, Remaining %d (%v), want %d: slots not released", i, r.Remaining, d.Err, n)
		}
	}
}

// TestConcurrencyTransportRefused: a Transport only waits and could never
// release a slot: an engine with a concurrency rule is refused.
func TestConcurrencyTransportRefused(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{exportRule}})
	_, err := middleware.NewTransport(mw.Limiter(), middleware.TransportConfig{})
	var ce *algorithms.ConfigError
	if !errors.As(err, &ce) || ce.Field != "engine" {
		t.Fatalf("NewTransport = %v, want a *ConfigError naming the engine", err)
	}
}

// BenchmarkHandlerConcurrency measures one allowed request of a
// concurrency rule: the slot taken, the response, the slot released, on
// the memory backend and, when a redis-server is available, on the shared
// real one.
func BenchmarkHandlerConcurrency(b *testing.B) {
	rules := func(tb testing.TB) []specRule {
		return []specRule{{Name: "exports", Key: ipFunc(tb), Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(10_000, 30*time.Second)}}
	}
	b.Run("memory", func(b *testing.B) {
		benchSerial(b, newMW(b, newMemory(b, fixed), spec{Rules: rules(b), Now: time.Now}).Handler(ok))
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Require(b)
		rb, err := redisstore.New(srv.Client(b), redisstore.Config{})
		if err != nil {
			b.Fatal(err)
		}
		benchSerial(b, newMW(b, rb, spec{Rules: rules(b), Prefix: "bench" + strconv.FormatInt(time.Now().UnixNano(), 36), Now: time.Now}).Handler(ok))
	})
}
