package middleware_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
)

// TestKeyFirstSharesBuckets: an HTTP middleware and the engine's key-first
// API with the same backend, prefix, rule name and algorithm count in the
// same bucket for the same key material, untrusted material included: a
// worker's Allow spends what a request would, Peek sees the requests, and
// Reset unblocks the HTTP client.
func TestKeyFirstSharesBuckets(t *testing.T) {
	backends := map[string]func(t *testing.T) algorithms.Backend{
		"memstore": func(t *testing.T) algorithms.Backend { return newMemory(t, fixed) },
		"redis": func(t *testing.T) algorithms.Backend {
			b, err := redisstore.New(redistest.Require(t).Client(t), redisstore.Config{Now: fixed})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			prefix := strings.NewReplacer("/", ".", ":", "").Replace(strings.TrimSuffix(redistest.Prefix(t), ":")) // unique per run
			mw := newMW(t, b, spec{Prefix: prefix, Rules: []specRule{
				{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.GCRA, Limit: gcra3},
			}})
			e, err := redlimit.New(b, redlimit.Config{Prefix: prefix, Logger: slog.New(slog.DiscardHandler), Rules: []redlimit.Rule{
				{Name: "user", Algorithm: algorithms.GCRA, Limit: gcra3},
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			h := mw.Handler(http.HandlerFunc(ok))
			const user = "al{ice} 🙂" // sanitised alike on both sides
			get := func() int {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-User", user)
				h.ServeHTTP(rec, req)
				return rec.Code
			}
			ctx := context.Background()
			if code := get(); code != 200 {
				t.Fatalf("first request: %d", code)
			}
			p := e.Peek(ctx, user)
			if r := p.Rules[0].Result; r.Remaining != 2 {
				t.Fatalf("Peek after one request: %+v, key %s; want remaining 2", r, p.Rules[0].Key)
			}
			if d := e.Allow(ctx, user); !d.Allowed || d.Rules[0].Result.Remaining != 1 {
				t.Fatalf("Allow after one request: %+v", d.Rules[0])
			}
			if code := get(); code != 200 {
				t.Fatalf("third unit, by HTTP: %d", code)
			}
			if code := get(); code != 429 {
				t.Fatalf("fourth unit, by HTTP: %d, want 429", code)
			}
			if d := e.Allow(ctx, user); d.Allowed {
				t.Fatalf("Allow after the HTTP client used the bucket up: %+v", d.Rules[0])
			}
			// Reset through a separate engine (another instance): the
			// middleware's deny cache, on Redis, still denies for the
			// RetryAfter it recorded; the store is reset.
			if err := e.Reset(ctx, user); err != nil {
				t.Fatal(err)
			}
			if p := e.Peek(ctx, user); !p.Allowed || p.Rules[0].Result.Remaining != 3 {
				t.Fatalf("Peek after Reset: %+v", p.Rules[0].Result)
			}
			if code, want := get(), map[string]int{"memstore": 200, "redis": 429}[name]; code != want {
				t.Fatalf("after Reset by another engine, by HTTP: %d, want %d", code, want)
			}
			// Reset through the middleware's own engine: allowed at once
			for get() == 200 {
			}
			if err := mw.Limiter().Reset(ctx, user); err != nil {
				t.Fatal(err)
			}
			if code := get(); code != 200 {
				t.Fatalf("after Reset by the middleware's engine, by HTTP: %d, want 200", code)
			}
		})
	}
}
