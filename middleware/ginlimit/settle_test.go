package ginlimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// failedLogins costs 1 for a 401 or 403, nothing otherwise.
func failedLogins(status int, _ int64) int64 {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return 1
	}
	return 0
}

// loginMW is "3 failed logins an hour per user", counted after the
// response.
func loginMW(t *testing.T, b algorithms.Backend) *middleware.Middleware {
	return newMW(t, b, spec{Rules: []specRule{{
		Name: "login", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3),
		ResponseCost: failedLogins,
	}}})
}

// remaining is what alice has left of the Middleware's first rule.
func remaining(t *testing.T, mw *middleware.Middleware) int64 {
	t.Helper()
	d := mw.Limiter().Peek(context.Background(), "alice")
	if d.Err != nil {
		t.Fatalf("Peek: %v", d.Err)
	}
	return d.Rules[0].Result.Remaining
}

// TestResponseCost: a ResponseCost rule is settled with the status Gin
// sends, however a handler after the limiter answers: a body, JSON, an
// abort, a status alone (Gin sends it when the chain ends), a status
// changed before the body (Gin sends the last one) or after it (too
// late), a panic before and after the status went out with a body, a
// flush or WriteHeaderNow (gin.Recovery, before the limiter, answers 500
// to the first). On every backend.
func TestResponseCost(t *testing.T) {
	answers := []struct {
		name string
		h    gin.HandlerFunc
		code int // what the client gets
		cost int64
	}{
		{"String 401", func(c *gin.Context) { c.String(401, "wrong password") }, 401, 1},
		{"JSON 403", func(c *gin.Context) { c.JSON(403, gin.H{"error": "locked"}) }, 403, 1},
		{"AbortWithStatus 401", func(c *gin.Context) { c.AbortWithStatus(401) }, 401, 1},
		{"Status 401 alone", func(c *gin.Context) { c.Status(401) }, 401, 1},
		{"status changed before the body", func(c *gin.Context) {
			c.Status(200)
			c.Writer.WriteHeader(401)
			c.Writer.WriteString("no")
		}, 401, 1},
		{"String 200", func(c *gin.Context) { c.String(200, "welcome") }, 200, 0},
		{"nothing written", func(c *gin.Context) {}, 200, 0},
		{"status changed after the body", func(c *gin.Context) {
			c.String(200, "welcome")
			c.Status(401)
		}, 200, 0},
		{"panic after Status 401", func(c *gin.Context) {
			c.Status(401)
			panic("login backend down")
		}, 500, 0},
		{"panic after a 401 body", func(c *gin.Context) {
			c.String(401, "wrong password")
			panic("audit log down")
		}, 401, 1},
		{"panic after a flushed 401", func(c *gin.Context) {
			c.Status(401)
			c.Writer.Flush()
			panic("audit log down")
		}, 401, 1},
		{"panic after AbortWithStatus 401", func(c *gin.Context) {
			c.AbortWithStatus(401)
			panic("audit log down")
		}, 401, 1},
	}
	for _, b := range backends {
		for _, a := range answers {
			t.Run(b.name+"/"+a.name, func(t *testing.T) {
				mw := loginMW(t, b.new(t))
				ch := newChain(ginlimit.Handler(mw), a.h)
				w := serve(ch, req("POST", "/api/login", "203.0.113.7:1", "X-User", "alice"))
				if w.Code != a.code || ch.status != a.code {
					t.Errorf("client got %d, gin's writer says %d; want %d", w.Code, ch.status, a.code)
				}
				if w.Header().Get("X-RateLimit-Remaining") != "2" {
					t.Errorf("X-RateLimit-Remaining %q, want 2 (the reservation)", w.Header().Get("X-RateLimit-Remaining"))
				}
				// the rule is settled once the handler has returned, off the
				// response's path: a refund lands shortly after the answer
				if got, want := remainingSettled(t, mw, 3-a.cost), 3-a.cost; got != want {
					t.Errorf("after the response: %d failed logins left, want %d", got, want)
				}
			})
		}
	}
}

// TestResponseCostLockout: four wrong passwords in a row through Gin:
// the fourth is refused before the handler, which then does not run.
func TestResponseCostLockout(t *testing.T) {
	mw := loginMW(t, backends[0].new(t))
	ch := newChain(ginlimit.Handler(mw), func(c *gin.Context) {
		if c.GetHeader("X-Password") != "secret" {
			c.String(401, "wrong password")
			return
		}
		c.String(200, "welcome")
	})
	var got []string
	for _, pw := range []string{"secret", "guess1", "secret", "guess2", "guess3", "guess4", "secret"} {
		w := serve(ch, req("POST", "/api/login", "203.0.113.7:1", "X-User", "alice", "X-Password", pw))
		got = append(got, fmt.Sprintf("%s %d %s", pw, w.Code, w.Header().Get("X-RateLimit-Remaining")))
	}
	want := []string{"secret 200 2", "guess1 401 2", "secret 200 1", "guess2 401 1", "guess3 401 0", "guess4 429 0", "secret 429 0"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") || ch.later != 5 {
		t.Errorf("got %q, later handler ran %d times;\nwant %q, 5", got, ch.later, want)
	}
}

// TestResponseCostBytes: the body bytes a ResponseCost rule is told are
// the ones written, whichever way a gin handler writes them, and Gin's
// Size agrees.
func TestResponseCostBytes(t *testing.T) {
	body := strings.Repeat("x", 123)
	writes := []struct {
		name string
		h    gin.HandlerFunc
	}{
		{"String", func(c *gin.Context) { c.String(200, body) }},
		{"Data", func(c *gin.Context) { c.Data(200, "application/octet-stream", []byte(body)) }},
		{"Writer.Write", func(c *gin.Context) { c.Writer.Write([]byte(body)) }},
		{"Writer.WriteString", func(c *gin.Context) { c.Writer.WriteString(body) }},
		{"io.Copy in two parts", func(c *gin.Context) {
			io.Copy(c.Writer, strings.NewReader(body[:100]))
			io.WriteString(c.Writer, body[100:])
		}},
	}
	for _, wr := range writes {
		t.Run(wr.name, func(t *testing.T) {
			mw := newMW(t, backends[0].new(t), spec{Rules: []specRule{{
				Name: "bytes", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10_000),
				Cost:         func(*http.Request) int64 { return 1000 },
				ResponseCost: func(_ int, written int64) int64 { return written },
			}}})
			ch := newChain(ginlimit.Handler(mw), wr.h)
			w := serve(ch, req("GET", "/api/download", "203.0.113.7:1", "X-User", "alice"))
			if w.Code != 200 || w.Body.String() != body || ch.size != len(body) {
				t.Errorf("%d, %d bytes, gin's Size %d; want 200, %d, %d", w.Code, w.Body.Len(), ch.size, len(body), len(body))
			}
			if got, want := remainingSettled(t, mw, int64(10_000-len(body))), int64(10_000-len(body)); got != want {
				t.Errorf("remaining %d, want %d (the 123 bytes written)", got, want)
			}
		})
	}
}

// TestResponseCostFlush: a handler that flushes through
// http.ResponseController sends its status first, and the rule is
// settled with it; the flush reaches the client's writer.
func TestResponseCostFlush(t *testing.T) {
	mw := loginMW(t, backends[0].new(t))
	ch := newChain(ginlimit.Handler(mw), func(c *gin.Context) {
		c.Status(401)
		if err := http.NewResponseController(c.Writer).Flush(); err != nil {
			c.Error(err)
		}
		c.Writer.WriteString("wrong password")
	})
	w := serve(ch, req("POST", "/api/login", "203.0.113.7:1", "X-User", "alice"))
	if w.Code != 401 || !w.Flushed || w.Body.String() != "wrong password" {
		t.Errorf("%d, flushed %v, %q; want 401, true, %q", w.Code, w.Flushed, w.Body, "wrong password")
	}
	if got := remainingSettled(t, mw, 2); got != 2 {
		t.Errorf("%d failed logins left, want 2", got)
	}
}

// TestResponseCostHijack: a handler may hijack the connection through the
// writer the limiter gives it (a WebSocket upgrade); the rule is then
// settled as a response the handler completed (200), as on net/http.
func TestResponseCostHijack(t *testing.T) {
	mw := loginMW(t, backends[0].new(t))
	settled := make(chan struct{})
	r := gin.New()
	r.GET("/ws", func(c *gin.Context) {
		c.Next()
		close(settled) // the limiter, and its settle, have returned
	}, ginlimit.Handler(mw), func(c *gin.Context) {
		conn, buf, err := c.Writer.Hijack()
		if err != nil {
			c.String(500, "hijack: %v", err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		buf.Flush()
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	hr, _ := http.NewRequest("GET", srv.URL+"/ws", nil)
	hr.Header.Set("X-User", "alice")
	resp, err := srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("status %d, want the hijacker's 401", resp.StatusCode)
	}
	<-settled
	if got := remainingSettled(t, mw, 3); got != 3 {
		t.Errorf("%d failed logins left, want 3 (a hijacked response is settled as 200)", got)
	}
}

// TestResponseCostParallel: 8 goroutines × 50 logins of one user, every
// third a wrong password, through one Gin engine: exactly the failed ones
// stay charged, and a middleware before the limiter reads each response's
// own status from c.Writer after the chain (the writer the limiter lends
// the handlers is its request's alone). On every backend.
func TestResponseCostParallel(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			mw := newMW(t, b.new(t), spec{Rules: []specRule{{
				Name: "login", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10_000),
				ResponseCost: failedLogins,
			}}})
			r := gin.New()
			var mismatched atomic.Int64
			r.POST("/login", func(c *gin.Context) {
				c.Next()
				if want := c.GetHeader("X-Want"); strconv.Itoa(c.Writer.Status()) != want {
					mismatched.Add(1)
				}
			}, ginlimit.Handler(mw), func(c *gin.Context) {
				if c.GetHeader("X-Password") != "secret" {
					c.String(401, "wrong password")
					return
				}
				c.String(200, "welcome")
			})
			var wg sync.WaitGroup
			var failed atomic.Int64
			for g := range 8 {
				wg.Go(func() {
					for i := range 50 {
						pw, want := "secret", "200"
						if (g*50+i)%3 == 0 {
							pw, want = "guess", "401"
							failed.Add(1)
						}
						w := serve(r, req("POST", "/login", "203.0.113.7:1", "X-User", "alice", "X-Password", pw, "X-Want", want))
						if strconv.Itoa(w.Code) != want {
							t.Errorf("status %d, want %s", w.Code, want)
						}
					}
				})
			}
			wg.Wait()
			// the refunds of the successful logins land after their responses
			if got, want := 10_000-remainingSettled(t, mw, 10_000-failed.Load()), failed.Load(); got != want || mismatched.Load() != 0 {
				t.Errorf("%d charged, want %d (the failed logins); %d statuses seen wrong before the limiter", got, want, mismatched.Load())
			}
		})
	}
}

// remainingSettled polls remaining for up to 5 s until it is want, and
// returns the last value read: a refund that never comes fails the test
// after that.
func remainingSettled(t *testing.T, mw *middleware.Middleware, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := remaining(t, mw)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}
