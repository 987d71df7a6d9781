package ginlimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// ordersRule is 3 requests a minute per route and client IP: GCRA, so on
// the fixed clock the resets are t0+20s, +40s, +60s and the fourth
// request waits 20s.
func ordersRule(t testing.TB) specRule {
	return specRule{Name: "orders", Key: mustKey(keyfunc.Join(keyfunc.Route(), ipFunc(t))), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}
}

// TestSameAsNetHTTP: on every backend and in every header style, the
// same requests through Gin and through net/http's ServeMux (each its own
// backend, same configuration) get the same status, rate-limit headers
// and body, 429 included, in plain text and as a problem. The X-RateLimit
// values are checked exactly too, so two equally wrong answers fail.
func TestSameAsNetHTTP(t *testing.T) {
	want := []response{
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": "1700000020", "Content-Type": "text/plain; charset=utf-8"}, "created\n"},
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "1700000040", "Content-Type": "text/plain; charset=utf-8"}, "created\n"},
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1700000060", "Content-Type": "text/plain; charset=utf-8"}, "created\n"},
		{429, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1700000060", "Retry-After": "20",
			"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
			"rate limit exceeded: orders; retry in 20s\n"},
		{429, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1700000060", "Retry-After": "20",
			"Content-Type": "application/problem+json", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
			`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"rate limit exceeded: orders; retry in 20s","violated-policies":["orders"]}` + "\n"},
	}
	send := func(h http.Handler, i int) response {
		r := req("POST", "/api/orders", "203.0.113.7:50000")
		if i == 4 {
			r.Header.Set("Accept", "application/problem+json")
		}
		return responseOf(serve(h, r))
	}
	for _, b := range backends {
		for _, style := range []headers.Style{headers.XRateLimit, headers.IETF, headers.Both} {
			t.Run(b.name+"/"+style.String(), func(t *testing.T) {
				cfg := func() spec {
					return spec{Rules: []specRule{ordersRule(t)}, Headers: headers.Writer{Style: style}}
				}
				g := gin.New()
				g.POST("/api/orders", ginlimit.Handler(newMW(t, b.new(t), cfg())), created)

				std := cfg()
				std.Prefix = prefix(t) + "-std" // its own keys on the shared redis-server
				mw := newMW(t, b.new(t), std)
				mux := http.NewServeMux()
				mux.Handle("POST /api/orders", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
					w.Write([]byte("created\n"))
				})))
				for i := range want {
					got, std := send(g, i), send(mux, i)
					if !reflect.DeepEqual(got, std) {
						t.Errorf("request %d: gin %+v,\n net/http %+v", i+1, got, std)
					}
					if style == headers.XRateLimit && !reflect.DeepEqual(got, want[i]) {
						t.Errorf("request %d: gin %+v,\n want %+v", i+1, got, want[i])
					}
					if style != headers.XRateLimit && got.header["Ratelimit-Policy"] == "" {
						t.Errorf("request %d: no RateLimit-Policy in style %d: %+v", i+1, style, got)
					}
				}
			})
		}
	}
}

// failing is a Backend whose every call fails.
type failing struct{}

func (failing) Allow(context.Context, []algorithms.Check, []algorithms.Result) error {
	return errors.New("redis: connection refused")
}

// chain is a gin engine with, around the limiter, an outer middleware that
// records what the chain left in c (status, size, aborted) and, after it,
// a counted handler before the route's.
type chain struct {
	*gin.Engine
	mu     sync.Mutex
	later  int  // calls of the handler after the limiter
	status int  // c.Writer.Status() after the chain
	size   int  // c.Writer.Size() after the chain
	abort  bool // c.IsAborted() after the chain
}

func newChain(limiter gin.HandlerFunc, handler gin.HandlerFunc) *chain {
	ch := &chain{Engine: gin.New()}
	ch.Use(func(c *gin.Context) {
		c.Next()
		ch.mu.Lock()
		ch.status, ch.size, ch.abort = c.Writer.Status(), c.Writer.Size(), c.IsAborted()
		ch.mu.Unlock()
	})
	ch.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
	ch.Use(limiter, func(c *gin.Context) {
		ch.mu.Lock()
		ch.later++
		ch.mu.Unlock()
	})
	for _, m := range []string{"GET", "POST"} {
		ch.Handle(m, "/api/:thing", handler)
	}
	return ch
}

// TestAbort: a denied request, and one refused under FailClosed, abort the
// chain: no later handler runs, and the middlewares before the limiter see
// the status it wrote, its size and an aborted Context. An allowed
// request runs the chain.
func TestAbort(t *testing.T) {
	rule := specRule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}
	tests := []struct {
		name    string
		backend algorithms.Backend
		policy  redlimit.ErrorPolicy
		codes   []int
		later   []int // calls of the later handler so far
		bodies  []string
	}{
		{"denied", backends[0].new(t), redlimit.Fallback, []int{200, 429}, []int{1, 1},
			[]string{"created\n", "rate limit exceeded: ip; retry in 60s\n"}},
		{"fail closed", failing{}, redlimit.FailClosed, []int{503, 503}, []int{0, 0},
			[]string{"rate limiter unavailable\n", "rate limiter unavailable\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw := newMW(t, tt.backend, spec{Rules: []specRule{rule}, OnError: tt.policy})
			ch := newChain(ginlimit.Handler(mw), created)
			for i, code := range tt.codes {
				w := serve(ch, req("GET", "/api/orders", "203.0.113.7:1"))
				if w.Code != code || w.Body.String() != tt.bodies[i] {
					t.Errorf("request %d: %d %q, want %d %q", i+1, w.Code, w.Body, code, tt.bodies[i])
				}
				if abort := code != 200; ch.later != tt.later[i] || ch.abort != abort || ch.status != code || ch.size != len(tt.bodies[i]) {
					t.Errorf("request %d: later handler ran %d times, aborted %v, gin status %d, size %d; want %d, %v, %d, %d",
						i+1, ch.later, ch.abort, ch.status, ch.size, tt.later[i], abort, code, len(tt.bodies[i]))
				}
			}
		})
	}
}

// TestKeyFuncError: a key func's error goes to the error policy (503 and
// an aborted chain under FailClosed; let through, without headers under
// FailOpen, on the fallback's headers under Fallback); a missing key is
// denied by the rule's MissingKey, without Retry-After, or answered by
// Config.MissingKeyDenied.
func TestKeyFuncError(t *testing.T) {
	broken := keyfunc.Func(func(*http.Request) (string, error) { return "", errors.New("session store down") })
	missing := mustKey(keyfunc.Header("X-API-Key"))
	tests := []struct {
		name     string
		key      keyfunc.Func
		cfg      spec
		want     response
		wantNext int
	}{
		{"error, fail closed", broken, spec{OnError: redlimit.FailClosed},
			response{503, map[string]string{"Retry-After": "1", "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"}, "rate limiter unavailable\n"}, 0},
		{"error, fail open", broken, spec{OnError: redlimit.FailOpen},
			response{200, map[string]string{"Content-Type": "text/plain; charset=utf-8"}, "created\n"}, 1},
		{"error, fallback", broken, spec{OnError: redlimit.Fallback},
			response{200, map[string]string{"Content-Type": "text/plain; charset=utf-8"}, "created\n"}, 1},
		{"missing key", missing, spec{},
			response{429, map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
				"rate limit exceeded: key; this request can never be allowed (no key, invalid cost, or cost above the limit)\n"}, 0},
		{"missing key, 401", missing, spec{MissingKeyDenied: middleware.Unauthorized},
			response{401, map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
				"unauthorized: no key for rule key\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Rules = []specRule{{Name: "key", Key: tt.key, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}}
			ch := newChain(ginlimit.Handler(newMW(t, backends[0].new(t), cfg)), created)
			got := responseOf(serve(ch, req("GET", "/api/orders", "203.0.113.7:1")))
			if !reflect.DeepEqual(got, tt.want) || ch.later != tt.wantNext {
				t.Errorf("got %+v, later handler ran %d times;\nwant %+v, %d", got, ch.later, tt.want, tt.wantNext)
			}
			std := newMW(t, backends[0].new(t), cfg).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Write([]byte("created\n"))
			}))
			if want := responseOf(serve(std, req("GET", "/api/orders", "203.0.113.7:1"))); !reflect.DeepEqual(got, want) {
				t.Errorf("gin %+v,\nnet/http %+v", got, want)
			}
		})
	}
}

// decisions records the storage keys the middleware decided.
type decisions struct {
	mu   sync.Mutex
	keys []string
}

func (d *decisions) hook(_ *http.Request, dec *redlimit.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, rd := range dec.Rules {
		d.keys = append(d.keys, rd.Key)
	}
}

func (d *decisions) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.keys
	d.keys = nil
	return k
}

// TestRouteKey: keyfunc.Route keys a request by its Gin route, mounted on
// the engine, a group or a route alike: /users/1 and /users/2 share a
// bucket, every method of a path too unless Method is joined, and a
// request no route matched has no route key. The handlers get their own
// Request, without the Pattern the key func read.
func TestRouteKey(t *testing.T) {
	var rec decisions
	pfx := prefix(t)
	mw := newMW(t, backends[0].new(t), spec{
		Rules: []specRule{
			{Name: "route", Key: mustKey(keyfunc.Or(keyfunc.Route(), keyfunc.Const("no-route"))), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
			{Name: "method", Key: mustKey(keyfunc.Join(keyfunc.Route(), keyfunc.Method())), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100), MissingKey: redlimit.SkipMissingKey},
		},
		OnDecision: rec.hook,
	})
	var pattern []string
	see := func(c *gin.Context) {
		pattern = append(pattern, c.Request.Pattern)
		c.Status(http.StatusNoContent)
	}
	r := gin.New()
	r.Use(ginlimit.Handler(mw))
	r.GET("/users/:id", see)
	r.POST("/users/:id", see)
	api := r.Group("/api")
	api.GET("/files/*path", see)
	tests := []struct {
		method, target string
		code           int
		keys           []string
	}{
		{"GET", "/users/1", 204, []string{pfx + ":route:gcra:{/users/:id}", pfx + ":method:gcra:{/users/%253Aid:GET}"}},
		{"GET", "/users/2", 204, []string{pfx + ":route:gcra:{/users/:id}", pfx + ":method:gcra:{/users/%253Aid:GET}"}},
		{"POST", "/users/2", 204, []string{pfx + ":route:gcra:{/users/:id}", pfx + ":method:gcra:{/users/%253Aid:POST}"}},
		{"GET", "/api/files/a/b.txt", 204, []string{pfx + ":route:gcra:{/api/files/*path}", pfx + ":method:gcra:{/api/files/*path:GET}"}},
		{"GET", "/nowhere", 404, []string{pfx + ":route:gcra:{no-route}", ""}},
	}
	for _, tt := range tests {
		w := serve(r, req(tt.method, tt.target, "203.0.113.7:1"))
		if got := rec.take(); w.Code != tt.code || !reflect.DeepEqual(got, tt.keys) {
			t.Errorf("%s %s: %d, keys %q; want %d, %q", tt.method, tt.target, w.Code, got, tt.code, tt.keys)
		}
		if w.Header().Get("X-RateLimit-Limit") != "100" {
			t.Errorf("%s %s: X-RateLimit-Limit %q, want 100", tt.method, tt.target, w.Header().Get("X-RateLimit-Limit"))
		}
	}
	if want := []string{"", "", "", ""}; !reflect.DeepEqual(pattern, want) {
		t.Errorf("the handlers saw Request.Pattern %q, want %q (their Request unchanged)", pattern, want)
	}

	// Route alone, with the default DenyMissingKey, on the engine: a
	// request no route matched is refused by the limiter (the package
	// documentation says so, and how to let Gin answer it).
	plain := gin.New()
	plain.Use(ginlimit.Handler(newMW(t, backends[0].new(t), spec{
		Rules: []specRule{{Name: "route", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)}},
	})))
	plain.GET("/users/:id", see)
	for target, code := range map[string]int{"/users/1": 204, "/nowhere": 429} {
		if w := serve(plain, req("GET", target, "203.0.113.7:1")); w.Code != code {
			t.Errorf("Route alone: GET %s: %d, want %d", target, w.Code, code)
		}
	}
}

// TestDecisionInContext: with Config.DecisionInContext a later handler
// reads the Decision from c.Request's context (and from c itself with
// ContextWithFallback); without it there is none, and c.Request is the
// very Request the handler chain started with.
func TestDecisionInContext(t *testing.T) {
	for _, inCtx := range []bool{true, false} {
		t.Run(fmt.Sprintf("DecisionInContext=%v", inCtx), func(t *testing.T) {
			mw := newMW(t, backends[0].new(t), spec{Rules: []specRule{ordersRule(t)}, DecisionInContext: inCtx})
			r := gin.New()
			r.ContextWithFallback = true
			var first *http.Request
			r.Use(func(c *gin.Context) { first = c.Request })
			r.POST("/api/orders", ginlimit.Handler(mw), func(c *gin.Context) {
				d, ok := middleware.FromContext(c.Request.Context())
				d2, ok2 := middleware.FromContext(c)
				switch {
				case ok != inCtx || ok2 != inCtx || d != d2:
					c.String(500, "FromContext(c.Request.Context()) = %v, FromContext(c) = %v, want %v", ok, ok2, inCtx)
				case !inCtx && c.Request != first:
					c.String(500, "c.Request replaced")
				case inCtx && (c.Request.URL != first.URL || c.Request.Pattern != ""):
					c.String(500, "c.Request is not the chain's with the decision's context")
				case inCtx:
					c.String(200, "allowed=%v remaining=%d", d.Allowed, d.Rules[0].Result.Remaining)
				default:
					c.String(200, "no decision")
				}
			})
			w := serve(r, req("POST", "/api/orders", "203.0.113.7:1"))
			want := "no decision"
			if inCtx {
				want = "allowed=true remaining=2"
			}
			if w.Code != 200 || w.Body.String() != want {
				t.Errorf("%d %q, want 200 %q", w.Code, w.Body, want)
			}
		})
	}
}

// TestNil: a nil Middleware panics when the routes are built, a Context
// without a Request is refused without a panic.
func TestNil(t *testing.T) {
	func() {
		defer func() {
			if v := recover(); v == nil || !strings.HasPrefix(fmt.Sprint(v), "redlimit: ") {
				t.Errorf("Handler(nil) panicked with %v, want a redlimit: message", v)
			}
		}()
		ginlimit.Handler(nil)
	}()
	mw := newMW(t, backends[0].new(t), spec{Rules: []specRule{ordersRule(t)}})
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	ginlimit.Handler(mw)(c)
	if w.Code != 500 || !c.IsAborted() {
		t.Errorf("no Request: %d, aborted %v; want 500, true", w.Code, c.IsAborted())
	}
}
