package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// benchWriter is a reusable ResponseWriter: the caller clears its Header
// before each request, which keeps the map's storage.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkMount measures one allowed request on existing keys through
// Echo alone, and with a Middleware of three rules (per IP, per user, per
// route; memstore) mounted with echo.WrapMiddleware and with limit. The
// route rule is skipped where it finds no route (WrapMiddleware), so
// that every contender answers 200.
func BenchmarkMount(b *testing.B) {
	huge := algorithms.PerSecond(1 << 30) // never runs out on the fixed clock
	mounts := map[string]func(*middleware.Middleware) echo.MiddlewareFunc{
		"echo":           nil,
		"WrapMiddleware": func(mw *middleware.Middleware) echo.MiddlewareFunc { return echo.WrapMiddleware(mw.Handler) },
		"limit":          limit,
	}
	for _, name := range []string{"echo", "WrapMiddleware", "limit"} {
		b.Run(name, func(b *testing.B) {
			e := echo.New()
			var mws []echo.MiddlewareFunc
			if mount := mounts[name]; mount != nil {
				mem, err := memstore.New(memstore.Config{Now: fixed})
				if err != nil {
					b.Fatal(err)
				}
				mw := newMW(b, mem, spec{Now: time.Now, Rules: []specRule{
					{Name: "ip", Key: ipFunc(b), Algorithm: algorithms.GCRA, Limit: huge},
					{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.GCRA, Limit: huge},
					{Name: "route", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: huge, MissingKey: redlimit.SkipMissingKey},
				}})
				mws = append(mws, mount(mw))
			}
			e.POST("/api/orders/:id", func(c echo.Context) error { return c.String(200, "ok") }, mws...)
			w, r := &benchWriter{h: http.Header{}}, req("POST", "/api/orders/42", "192.0.2.1:1234", "X-User", "alice")
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				w.code = 200
				e.ServeHTTP(w, r)
			}
			if w.code != 200 {
				b.Fatalf("status %d", w.code)
			}
		})
	}
}
