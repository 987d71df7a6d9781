package ginlimit_test

import (
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// benchWriter is a reusable ResponseWriter: the caller clears its Header
// before each request, which keeps the map's storage (as net/http does not:
// it hands each request a fresh map, whose growth is not the limiter's).
type benchWriter struct {
	h    http.Header
	code int
}

func newBenchWriter() *benchWriter                 { return &benchWriter{h: http.Header{}, code: 200} }
func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) serve(h http.Handler, r *http.Request) {
	clear(w.h)
	w.code = 200
	h.ServeHTTP(w, r)
}

// huge never runs out under a fixed clock: each request moves the GCRA's
// arrival time by 2^-30 s.
var huge = algorithms.PerSecond(1 << 30)

// benchMW is a Middleware of three rules (per IP, per user, per route)
// on the memory backend, with the real wall clock for the headers as in
// production; with a ResponseCost on the user rule when settle is set.
func benchMW(tb testing.TB, settle bool) *middleware.Middleware {
	rules := []specRule{
		{Name: "ip", Key: ipFunc(tb), Algorithm: algorithms.GCRA, Limit: huge},
		{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.GCRA, Limit: huge},
		{Name: "route", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: huge},
	}
	if settle {
		rules[1].ResponseCost = func(int, int64) int64 { return 1 }
	}
	b, err := memstore.New(memstore.Config{Now: fixed})
	if err != nil {
		tb.Fatal(err)
	}
	return newMW(tb, b, spec{Rules: rules, Now: time.Now})
}

// handlers are the contenders: Gin without a limiter, Gin with one,
// and the same Middleware on an http.ServeMux; each answers 200 "ok".
func handlers(tb testing.TB, settle bool) map[string]http.Handler {
	ok := func(c *gin.Context) { c.Writer.WriteString("ok") }
	bare := gin.New()
	bare.POST("/api/orders/:id", ok)
	limited := gin.New()
	limited.POST("/api/orders/:id", ginlimit.Handler(benchMW(tb, settle)), ok)
	okHTTP := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	bareMux := http.NewServeMux()
	bareMux.Handle("POST /api/orders/{id}", okHTTP)
	mux := http.NewServeMux()
	mux.Handle("POST /api/orders/{id}", benchMW(tb, settle).Handler(okHTTP))
	return map[string]http.Handler{"gin": bare, "gin+limiter": limited, "servemux": bareMux, "servemux+limiter": mux}
}

func benchRequest(remote string) *http.Request {
	return req("POST", "/api/orders/42", remote, "X-User", "alice")
}

// BenchmarkHandler measures one allowed request on existing keys, serial
// and from GOMAXPROCS goroutines (one client address each): Gin and
// http.ServeMux alone, and with the same Middleware; settle=true adds a
// ResponseCost rule.
func BenchmarkHandler(b *testing.B) {
	for _, settle := range []bool{false, true} {
		for _, name := range []string{"gin", "gin+limiter", "servemux", "servemux+limiter"} {
			full := name + "/settle=" + strconv.FormatBool(settle)
			b.Run(full, func(b *testing.B) {
				h := handlers(b, settle)[name]
				w, r := newBenchWriter(), benchRequest("192.0.2.1:1234")
				b.ReportAllocs()
				for b.Loop() {
					w.serve(h, r)
				}
				if w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			})
			b.Run(full+"/parallel", func(b *testing.B) {
				h := handlers(b, settle)[name]
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
			})
		}
	}
}

// TestHandlerAllocs enforces the allocation budget of the limiter on
// Gin, one allowed request on existing keys: what the Middleware
// allocates on an http.ServeMux (middleware.TestHandlerAllocs: 2, the
// header writer's; more with a ResponseCost rule, whose response writer
// and settle the Middleware makes), plus 1 for the copy of the Request
// that carries the Gin route as its Pattern (for keyfunc.Route). The call
// handed to the Middleware, and the writer a ResponseCost rule needs, are
// pooled.
func TestHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	// One P: a goroutine moved to another P between a pool's Get and Put
	// (a busy machine preempts often) leaves the item in that P's private
	// slot, out of reach of the next Get, which then allocates.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// The mean over many requests, not testing.AllocsPerRun's truncated
	// one: a ResponseCost rule's refund markers fill a map that grows now
	// and then, a few allocations over thousands of requests that would
	// flip a truncated 7.99 to 7 or 8.
	allocs := func(h http.Handler) float64 {
		w, r := newBenchWriter(), benchRequest("192.0.2.1:1234")
		w.serve(h, r)
		const runs = 5000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			w.serve(h, r)
		}
		runtime.ReadMemStats(&after)
		if w.code != 200 {
			t.Fatalf("status %d", w.code)
		}
		return float64(after.Mallocs-before.Mallocs) / runs
	}
	for _, settle := range []bool{false, true} {
		t.Run("settle="+strconv.FormatBool(settle), func(t *testing.T) {
			h := handlers(t, settle)
			onGin := allocs(h["gin+limiter"]) - allocs(h["gin"])
			onMux := allocs(h["servemux+limiter"]) - allocs(h["servemux"])
			t.Logf("the limiter allocates %.2f times per request on Gin, %.2f on http.ServeMux", onGin, onMux)
			if onGin > onMux+1.05 {
				t.Errorf("%.2f allocations per request on Gin, budget %.2f (the Middleware's %.2f, and the Request copy)", onGin, onMux+1, onMux)
			}
			if !settle && (onMux < 1.95 || onMux > 2.05) {
				t.Errorf("the Middleware allocates %.2f times per request, middleware.TestHandlerAllocs says 2", onMux)
			}
		})
	}
}
