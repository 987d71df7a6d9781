package ginlimit_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// TestConcurrencyRelease: a concurrency rule's slot is held while every
// later handler runs and released when the chain returns, or panics: one
// export in flight per user, a second refused with the lease as
// Retry-After, a third let through once the first is done. On every
// backend.
func TestConcurrencyRelease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			mw := newMW(t, b.new(t), spec{Rules: []specRule{{
				Name: "exports", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, 30*time.Second),
			}}})
			inFlight := func() int64 {
				return 1 - mw.Limiter().Peek(context.Background(), "alice").Rules[0].Result.Remaining
			}
			entered, release := make(chan int64), make(chan struct{})
			ch := newChain(ginlimit.Handler(mw), func(c *gin.Context) {
				if c.GetHeader("X-Panic") != "" {
					panic("export failed")
				}
				if c.GetHeader("X-Wait") != "" {
					entered <- inFlight()
					<-release
				}
				c.String(200, "exported")
			})
			first := make(chan int)
			go func() {
				first <- serve(ch, req("GET", "/api/export", "203.0.113.7:1", "X-User", "alice", "X-Wait", "1")).Code
			}()
			if n := <-entered; n != 1 {
				t.Errorf("while the handler runs: %d slots held, want 1", n)
			}
			w := serve(ch, req("GET", "/api/export", "203.0.113.7:1", "X-User", "alice"))
			if w.Code != 429 || w.Header().Get("Retry-After") != "30" || w.Header().Get("X-RateLimit-Limit") != "1" {
				t.Errorf("second in flight: %d, Retry-After %q, X-RateLimit-Limit %q; want 429, 30, 1",
					w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Limit"))
			}
			close(release)
			if code := <-first; code != 200 {
				t.Errorf("first: %d, want 200", code)
			}
			// the slot is released once the handler has returned, off the
			// response's path: shortly after the client has its answer
			if n := settled(inFlight); n != 0 {
				t.Errorf("after the first returned: %d slots held, want 0", n)
			}
			for range 3 {
				w = serve(ch, req("GET", "/api/export", "203.0.113.7:1", "X-User", "alice", "X-Panic", "1"))
				if w.Code != http.StatusInternalServerError {
					t.Errorf("a panicking handler: %d, want 500 (gin.Recovery)", w.Code)
				}
				settled(inFlight)
			}
			if n := settled(inFlight); n != 0 {
				t.Errorf("after 3 panics: %d slots held, want 0", n)
			}
			if w = serve(ch, req("GET", "/api/export", "203.0.113.7:1", "X-User", "alice")); w.Code != 200 {
				t.Errorf("after the panics: %d, want 200", w.Code)
			}
		})
	}
}

// settled polls held for up to 5 s until no slot is held, and returns the
// last count read: a slot never released fails the test after that.
func settled(held func() int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := held()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}
