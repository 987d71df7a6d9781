package middleware_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/admin"
)

// benchWriter is a reusable ResponseWriter: the caller clears its Header
// before each request, which keeps the map's storage (as net/http does not:
// it hands each request a fresh map, whose growth is not the limiter's).
type benchWriter struct {
	h    http.Header
	code int
}

func newBenchWriter() *benchWriter                           { return &benchWriter{h: http.Header{}, code: 200} }
func (w *benchWriter) Header() http.Header                   { return w.h }
func (w *benchWriter) Write(b []byte) (int, error)           { return len(b), nil }
func (w *benchWriter) WriteString(s string) (int, error)     { return len(s), nil }
func (w *benchWriter) WriteHeader(code int)                  { w.code = code }
func (w *benchWriter) reset()                                { clear(w.h); w.code = 200 }
func (w *benchWriter) serve(h http.Handler, r *http.Request) { w.reset(); h.ServeHTTP(w, r) }

// outOfProcess hides a memstore backend's capabilities (it forwards only
// Allow), so the middleware treats it as a remote backend: deny cache and
// a bounded call in a goroutine.
type outOfProcess struct{ mem *memstore.Store }

func (o outOfProcess) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	return o.mem.Allow(ctx, checks, results)
}

// huge never runs out under a fixed clock: each request moves the GCRA's
// arrival time by 2^-30 s.
var huge = algorithms.PerSecond(1 << 30)

// benchRules returns n (1 or 3) rules: per IP, per user (a header), per
// endpoint (the ServeMux pattern, which Route returns without allocating).
func benchRules(tb testing.TB, n int) []specRule {
	rules := []specRule{
		{Name: "ip", Key: ipFunc(tb), Algorithm: algorithms.GCRA, Limit: huge},
		{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.GCRA, Limit: huge},
		{Name: "endpoint", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: huge},
	}
	return rules[:n]
}

// benchRequest is a request as ServeMux hands it to the wrapped handler.
func benchRequest(remote string) *http.Request {
	r := req("POST", "/api/orders", remote, "X-User", "alice")
	r.Pattern = "POST /api/orders"
	return r
}

// benchHandler wraps ok in a middleware with n rules on backend b. The
// middleware's wall clock (for X-RateLimit-Reset) is the real one, as in
// production: one clock read per request.
func benchHandler(tb testing.TB, b algorithms.Backend, rules int, prefix string) http.Handler {
	mw := newMW(tb, b, spec{Rules: benchRules(tb, rules), Prefix: prefix, Now: time.Now})
	return mw.Handler(ok)
}

// adminHandler is benchHandler with an admin.Source's hook attached.
func adminHandler(tb testing.TB, b algorithms.Backend, rules int) http.Handler {
	adm, err := admin.New(admin.Config{Authorize: admin.Token("t")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { adm.Close() })
	src, err := adm.Source("bench")
	if err != nil {
		tb.Fatal(err)
	}
	// Now is left nil, as in production: with a hook the middleware reads
	// the clock once more for Decision.Latency (monotonic only), and reuses
	// its second reading for the headers, which it cannot do with a Now of
	// the caller's.
	mw := newMW(tb, b, spec{Rules: benchRules(tb, rules), OnDecision: src.OnHTTP})
	src.Attach(mw.Limiter())
	return mw.Handler(ok)
}

// BenchmarkHandler measures one allowed request through the middleware on
// existing keys: memory backend (fixed clock) and, when a redis-server is
// available, the shared real one.
func BenchmarkHandler(b *testing.B) {
	for _, n := range []int{1, 3} {
		name := "rules=" + strconv.Itoa(n)
		b.Run(name, func(b *testing.B) { benchSerial(b, benchHandler(b, newMemory(b, fixed), n, "")) })
		b.Run(name+"/parallel", func(b *testing.B) { benchParallel(b, benchHandler(b, newMemory(b, fixed), n, "")) })
		// The same with the admin page's hook attached (package admin):
		// counters, latency histogram, heavy-hitters summaries.
		b.Run(name+"/admin", func(b *testing.B) { benchSerial(b, adminHandler(b, newMemory(b, fixed), n)) })
		b.Run(name+"/admin/parallel", func(b *testing.B) { benchParallel(b, adminHandler(b, newMemory(b, fixed), n)) })
	}
	// A backend that is not in-process runs in a goroutine of its own so
	// that Timeout holds even when it ignores its context (see
	// Config.Timeout), unless it says it honours deadlines.
	b.Run("call=goroutine", func(b *testing.B) {
		benchSerial(b, benchHandler(b, outOfProcess{newMemory(b, fixed)}, 1, ""))
	})
	b.Run("call=direct", func(b *testing.B) {
		benchSerial(b, benchHandler(b, honest{contract.Carry(contract.Traits{HonoursDeadline: true}), ctxBackend{newMemory(b, fixed)}}, 1, ""))
	})
	redisHandler := func(b *testing.B, n int) http.Handler {
		srv := redistest.Require(b)
		rb, err := redisstore.New(srv.Client(b), redisstore.Config{Now: fixed})
		if err != nil {
			b.Fatal(err)
		}
		return benchHandler(b, rb, n, redistest.Prefix(b))
	}
	for _, n := range []int{1, 3} {
		name := "redis/rules=" + strconv.Itoa(n)
		b.Run(name, func(b *testing.B) { benchSerial(b, redisHandler(b, n)) })
		b.Run(name+"/parallel", func(b *testing.B) { benchParallel(b, redisHandler(b, n)) })
	}
}

// benchSerial serves one client's request on h in a loop.
func benchSerial(b *testing.B, h http.Handler) {
	w, r := newBenchWriter(), benchRequest("192.0.2.1:1234")
	w.serve(h, r)
	b.ReportAllocs()
	for b.Loop() {
		w.serve(h, r)
	}
	if w.code != 200 {
		b.Fatalf("status %d", w.code)
	}
}

// benchParallel serves requests on h from GOMAXPROCS goroutines, one
// client address each.
func benchParallel(b *testing.B, h http.Handler) {
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w, r := newBenchWriter(), benchRequest("192.0.2."+strconv.FormatInt(next.Add(1), 10)+":1234")
		for pb.Next() {
			w.serve(h, r)
		}
		if w.code != 200 {
			b.Errorf("status %d", w.code)
		}
	})
}

// TestHandlerAllocs enforces the allocation budget of one allowed request
// on existing keys of the memory backend, as measured:
//
//   - nothing for the storage keys "<prefix>:<rule>:<algorithm>:{<material>}": each
//     rule caches the keys of the key materials it has seen (up to 4096),
//     and the key funcs used here allocate nothing;
//   - 2 for the header writer: one string holding every value and one
//     []string backing every field (headers.Writer.Write's budget);
//   - nothing else: working memory is pooled, the memory backend does not
//     allocate for existing keys, and no timeout context is made for it.
//
// DecisionInContext adds 4 (the Decision's copy, its Rules, the context
// value and the request copy WithContext makes); Style None saves the
// writer's 2. A concurrency rule (a slot taken, renewed by a timer, and
// released) and a ResponseCost rule (a reservation, the response
// recorder, and its refund) cost more, most of it in the memory
// backend's leases and refunds; on the memory backend both are made on
// the request's goroutine (no queue).
func TestHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	tests := []struct {
		name   string
		rules  int
		cfg    spec
		budget float64
	}{
		{"rules=1", 1, spec{}, 2},
		{"rules=3", 3, spec{}, 2},
		{"rules=1/ietf", 1, spec{Headers: headers.Writer{Style: headers.Both}}, 2},
		{"rules=1/none", 1, spec{Headers: headers.Writer{Style: headers.None}}, 0},
		{"rules=1/in context", 1, spec{DecisionInContext: true}, 6},
		{"rules=3/admin", 3, spec{}, 2},
		{"rules=1/concurrency", 1, spec{}, 17},
		{"rules=1/response cost", 1, spec{}, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Rules = benchRules(t, tt.rules)
			switch {
			case strings.HasSuffix(tt.name, "/concurrency"):
				cfg.Rules[0].Algorithm, cfg.Rules[0].Limit = algorithms.Concurrency, algorithms.InFlight(10_000, 30*time.Second)
			case strings.HasSuffix(tt.name, "/response cost"):
				cfg.Rules[0].ResponseCost = failedLogins
			}
			h := newMW(t, newMemory(t, fixed), cfg).Handler(ok)
			if strings.HasSuffix(tt.name, "/admin") {
				h = adminHandler(t, newMemory(t, fixed), tt.rules)
			}
			w, r := newBenchWriter(), benchRequest("192.0.2.1:1234")
			w.serve(h, r)
			got := testing.AllocsPerRun(1000, func() { w.serve(h, r) })
			if got > tt.budget {
				t.Errorf("%v allocations per request, budget %v", got, tt.budget)
			} else if got < tt.budget {
				t.Logf("%v allocations per request, under the budget of %v: lower the budget", got, tt.budget)
			}
		})
	}
}
