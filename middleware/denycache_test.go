package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
)

// countingBackend counts calls to a Memory backend; not being a *Memory
// itself, it is treated like a remote backend (deny cache, timeout).
type countingBackend struct {
	next  *memstore.Store
	calls atomic.Int64
}

func (c *countingBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	c.calls.Add(1)
	return c.next.Allow(ctx, checks, results)
}

// TestDenyCacheDefault: by default a denied key is answered locally until
// its RetryAfter has passed; NoDenyCache sends every request to the backend.
// (Timeout 10s: the engine calls the counting backend from a goroutine of
// its own, which a loaded machine may not run within the default 100ms.)
func TestDenyCacheDefault(t *testing.T) {
	for _, off := range []bool{false, true} {
		mem, _ := memstore.New(memstore.Config{})
		cb := &countingBackend{next: mem}
		mw, err := build(cb, spec{NoDenyCache: off, Timeout: 10 * time.Second, Rules: []specRule{
			{Name: "k", Key: keyfunc.Const("all"), Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		codes := map[int]int{}
		for range 100 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			codes[rec.Code]++
			if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
				t.Fatal("local denial without Retry-After")
			}
		}
		if codes[200] != 2 || codes[429] != 98 {
			t.Fatalf("NoDenyCache=%v: %v, want 2 allowed and 98 denied", off, codes)
		}
		want, wantLocal := int64(3), uint64(97) // 2 allowed + the first denial; the rest local
		if off {
			want, wantLocal = 100, 0
		}
		if cb.calls.Load() != want || mw.Limiter().Status().LocalDenials != wantLocal {
			t.Fatalf("NoDenyCache=%v: %d backend calls, %d local denials; want %d and %d", off, cb.calls.Load(), mw.Limiter().Status().LocalDenials, want, wantLocal)
		}
		mw.Close()
	}
}
