package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// mounts are the two ways to put a Middleware on Echo: Echo's own
// WrapMiddleware, and limit.
var mounts = []struct {
	name string
	of   func(*middleware.Middleware) echo.MiddlewareFunc
}{
	{"WrapMiddleware", func(mw *middleware.Middleware) echo.MiddlewareFunc { return echo.WrapMiddleware(mw.Handler) }},
	{"limit", limit},
}

// TestSameAsNetHTTP: on every backend and in every header style, mounted
// either way, the same requests through Echo and through net/http's
// ServeMux (each its own backend, same configuration) get the same
// status, rate-limit headers and body, 429 included, in plain text and as
// a problem; the X-RateLimit values are checked exactly too. The rule is
// keyed by client IP: behind WrapMiddleware a route key is missing (see
// TestRouteKey).
func TestSameAsNetHTTP(t *testing.T) {
	want := []response{
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": "1700000020", "Content-Type": "text/plain; charset=UTF-8"}, "created\n"},
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "1700000040", "Content-Type": "text/plain; charset=UTF-8"}, "created\n"},
		{200, map[string]string{"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1700000060", "Content-Type": "text/plain; charset=UTF-8"}, "created\n"},
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
		for _, m := range mounts {
			for _, style := range []headers.Style{headers.XRateLimit, headers.IETF, headers.Both} {
				t.Run(b.name+"/"+m.name+"/"+style.String(), func(t *testing.T) {
					cfg := func() spec {
						return spec{
							Rules:   []specRule{{Name: "orders", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}},
							Headers: headers.Writer{Style: style},
						}
					}
					e := echo.New()
					e.POST("/api/orders", created, m.of(newMW(t, b.new(t), cfg())))

					mux := http.NewServeMux()
					std := cfg()
					std.Prefix = prefix(t) + "-std" // its own keys on the shared redis-server
					mux.Handle("POST /api/orders", newMW(t, b.new(t), std).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
						w.Write([]byte("created\n"))
					})))
					for i := range want {
						got, std := send(e, i), send(mux, i)
						if !reflect.DeepEqual(got, std) {
							t.Errorf("request %d: echo %+v,\n net/http %+v", i+1, got, std)
						}
						if style == headers.XRateLimit && !reflect.DeepEqual(got, want[i]) {
							t.Errorf("request %d: echo %+v,\n want %+v", i+1, got, want[i])
						}
						if style != headers.XRateLimit && got.header["Ratelimit-Policy"] == "" {
							t.Errorf("request %d: no RateLimit-Policy in style %s: %+v", i+1, style, got)
						}
					}
				})
			}
		}
	}
}

// failing is a Backend whose every call fails.
type failing struct{}

func (failing) Allow(context.Context, []algorithms.Check, []algorithms.Result) error {
	return errors.New("redis: connection refused")
}

// chain is an Echo with, around the limiter, an outer middleware that
// records what the chain left (the response's status and size, the error
// it returned) and Recover; after the limiter a counted middleware, then
// the route's handler.
type chain struct {
	*echo.Echo
	mu     sync.Mutex
	later  int   // calls of the middleware after the limiter
	status int   // c.Response().Status after the chain
	size   int64 // c.Response().Size after the chain
	err    error // what the chain returned
	same   bool  // c.Response() after the chain is the one before it
}

func newChain(limiter echo.MiddlewareFunc, handler echo.HandlerFunc) *chain {
	ch := &chain{Echo: echo.New()}
	ch.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res := c.Response()
			err := next(c)
			ch.mu.Lock()
			ch.status, ch.size, ch.err, ch.same = c.Response().Status, c.Response().Size, err, c.Response() == res
			ch.mu.Unlock()
			return err
		}
	})
	ch.Use(echomw.RecoverWithConfig(echomw.RecoverConfig{
		LogErrorFunc: func(_ echo.Context, err error, _ []byte) error { return err }, // 500, without a stack on the test's output
	}))
	ch.Use(limiter, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ch.mu.Lock()
			ch.later++
			ch.mu.Unlock()
			return next(c)
		}
	})
	ch.Any("/api/:thing", handler)
	return ch
}

// TestChain: mounted either way, a denied request, and one refused under
// FailClosed, stop the chain (no later middleware or handler runs) and
// the middlewares before the limiter see the status and size it wrote
// and no error; an allowed request runs the chain.
func TestChain(t *testing.T) {
	rule := specRule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}
	tests := []struct {
		name    string
		backend func(t *testing.T) algorithms.Backend
		policy  redlimit.ErrorPolicy
		codes   []int
		later   []int // calls of the later middleware so far
		bodies  []string
	}{
		{"denied", backends[0].new, redlimit.Fallback, []int{200, 429}, []int{1, 1},
			[]string{"created\n", "rate limit exceeded: ip; retry in 60s\n"}},
		{"fail closed", func(*testing.T) algorithms.Backend { return failing{} }, redlimit.FailClosed, []int{503, 503}, []int{0, 0},
			[]string{"rate limiter unavailable\n", "rate limiter unavailable\n"}},
	}
	for _, m := range mounts {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				mw := newMW(t, tt.backend(t), spec{Rules: []specRule{rule}, OnError: tt.policy})
				ch := newChain(m.of(mw), created)
				for i, code := range tt.codes {
					w := serve(ch, req("GET", "/api/orders", "203.0.113.7:1"))
					if w.Code != code || w.Body.String() != tt.bodies[i] {
						t.Errorf("request %d: %d %q, want %d %q", i+1, w.Code, w.Body, code, tt.bodies[i])
					}
					if ch.later != tt.later[i] || ch.status != code || ch.size != int64(len(tt.bodies[i])) || ch.err != nil {
						t.Errorf("request %d: later middleware ran %d times, echo status %d, size %d, error %v; want %d, %d, %d, nil",
							i+1, ch.later, ch.status, ch.size, ch.err, tt.later[i], code, len(tt.bodies[i]))
					}
				}
			})
		}
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

// TestRouteKey: behind echo.WrapMiddleware keyfunc.Route finds no route
// (Echo v4 sets no Request.Pattern) and the default MissingKey refuses
// every request; behind limit it is Echo's route: /users/1 and /users/2
// share a bucket, and the handlers' Request is left without a Pattern.
func TestRouteKey(t *testing.T) {
	newEcho := func(t *testing.T, mount func(*middleware.Middleware) echo.MiddlewareFunc, rec *decisions, pattern *[]string) *echo.Echo {
		mw := newMW(t, backends[0].new(t), spec{
			Rules:      []specRule{{Name: "route", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)}},
			OnDecision: rec.hook,
		})
		e := echo.New()
		e.Use(mount(mw))
		e.GET("/users/:id", func(c echo.Context) error {
			*pattern = append(*pattern, c.Request().Pattern)
			return c.NoContent(http.StatusNoContent)
		})
		return e
	}
	t.Run("WrapMiddleware", func(t *testing.T) {
		var rec decisions
		var pattern []string
		e := newEcho(t, mounts[0].of, &rec, &pattern)
		w := serve(e, req("GET", "/users/1", "203.0.113.7:1"))
		if w.Code != 429 || !strings.Contains(w.Body.String(), "can never be allowed") || len(pattern) != 0 {
			t.Errorf("%d %q, handler ran %d times; want 429 for a missing key, 0", w.Code, w.Body, len(pattern))
		}
	})
	t.Run("limit", func(t *testing.T) {
		var rec decisions
		var pattern []string
		e := newEcho(t, limit, &rec, &pattern)
		key := prefix(t) + ":route:gcra:{/users/:id}"
		for _, target := range []string{"/users/1", "/users/2"} {
			w := serve(e, req("GET", target, "203.0.113.7:1"))
			if got := rec.take(); w.Code != 204 || !reflect.DeepEqual(got, []string{key}) || w.Header().Get("X-RateLimit-Limit") != "100" {
				t.Errorf("GET %s: %d, keys %q, X-RateLimit-Limit %q; want 204, [%q], 100", target, w.Code, got, w.Header().Get("X-RateLimit-Limit"), key)
			}
		}
		if want := []string{"", ""}; !reflect.DeepEqual(pattern, want) {
			t.Errorf("the handler saw Request.Pattern %q, want %q", pattern, want)
		}
	})
	t.Run("limit/no route", func(t *testing.T) {
		// With e.Use the limiter also runs for the requests no route
		// matched: a 404 has no route, a 405 the route of its path.
		var rec decisions
		mw := newMW(t, backends[0].new(t), spec{
			Rules:      []specRule{{Name: "route", Key: mustKey(keyfunc.Or(keyfunc.Route(), keyfunc.Const("no-route"))), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)}},
			OnDecision: rec.hook,
		})
		e := echo.New()
		e.Use(limit(mw))
		e.GET("/users/:id", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
		for _, tt := range []struct {
			method, target string
			code           int
			key            string
		}{
			{"GET", "/nowhere", 404, "no-route"},
			{"POST", "/users/1", 405, "/users/:id"},
		} {
			w := serve(e, req(tt.method, tt.target, "203.0.113.7:1"))
			if got, want := rec.take(), []string{prefix(t) + ":route:gcra:{" + tt.key + "}"}; w.Code != tt.code || !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: %d, keys %q; want %d, %q", tt.method, tt.target, w.Code, got, tt.code, want)
			}
		}
	})
}

// TestDecisionInContext: mounted either way, with Config.DecisionInContext
// the handler reads the Decision from c.Request()'s context, on its own
// Request (without the Pattern limit sets for the key funcs).
func TestDecisionInContext(t *testing.T) {
	for _, m := range mounts {
		t.Run(m.name, func(t *testing.T) {
			mw := newMW(t, backends[0].new(t), spec{
				Rules:             []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}},
				DecisionInContext: true,
			})
			e := echo.New()
			e.GET("/api/profile", func(c echo.Context) error {
				d, ok := middleware.FromContext(c.Request().Context())
				if !ok {
					return c.String(500, "no decision")
				}
				if p := c.Request().Pattern; p != "" {
					return c.String(500, "the handler's Request has the Pattern "+p)
				}
				return c.String(200, fmt.Sprintf("allowed=%v remaining=%d", d.Allowed, d.Rules[0].Result.Remaining))
			}, m.of(mw))
			w := serve(e, req("GET", "/api/profile", "203.0.113.7:1"))
			if w.Code != 200 || w.Body.String() != "allowed=true remaining=2" {
				t.Errorf("%d %q, want 200 %q", w.Code, w.Body, "allowed=true remaining=2")
			}
		})
	}
}

// failedLogins costs 1 for a 401 or 403, nothing otherwise.
func failedLogins(status int, _ int64) int64 {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return 1
	}
	return 0
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

// settled polls held for up to 5 s until no slot is held, and returns
// the last count read: a slot never released fails the test after that.
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

// TestResponseCost: "count only failed logins", however an Echo handler
// fails: behind limit the rule is settled with the status the client
// gets, the returned error included, and the middlewares before it still
// get the error, the answer written once. Behind echo.WrapMiddleware an
// error's answer is written after the settle, which saw 200: a failed
// login returned as an error is not counted (its row says so). On every
// backend.
func TestResponseCost(t *testing.T) {
	errDB := errors.New("db down")
	locked := echo.NewHTTPError(403, "locked")
	answers := []struct {
		name      string
		h         echo.HandlerFunc
		code      int // what the client gets
		body      string
		err       error // what the chain returns
		cost      int64 // behind limit
		wrapCost  int64 // behind WrapMiddleware
		wrapError bool  // WrapMiddleware returns the error unhandled
	}{
		{"return ErrUnauthorized", func(echo.Context) error { return echo.ErrUnauthorized }, 401, `{"message":"Unauthorized"}` + "\n", echo.ErrUnauthorized, 1, 0, true},
		{"return HTTPError 403", func(echo.Context) error { return locked }, 403, `{"message":"locked"}` + "\n", locked, 1, 0, true},
		{"String 401", func(c echo.Context) error { return c.String(401, "wrong password") }, 401, "wrong password", nil, 1, 1, false},
		{"NoContent 401", func(c echo.Context) error { return c.NoContent(401) }, 401, "", nil, 1, 1, false},
		{"return another error", func(echo.Context) error { return errDB }, 500, `{"message":"Internal Server Error"}` + "\n", errDB, 0, 0, true},
		{"String 200", func(c echo.Context) error { return c.String(200, "welcome") }, 200, "welcome", nil, 0, 0, false},
		{"nothing written", func(echo.Context) error { return nil }, 200, "", nil, 0, 0, false},
		{"error after the body", func(c echo.Context) error {
			c.String(200, "welcome")
			return echo.ErrUnauthorized
		}, 200, "welcome", echo.ErrUnauthorized, 0, 0, false},
		{"panic", func(echo.Context) error { panic("login backend down") }, 500, `{"message":"Internal Server Error"}` + "\n", nil, 0, 0, false},
	}
	for _, b := range backends {
		for _, m := range mounts {
			for _, a := range answers {
				t.Run(b.name+"/"+m.name+"/"+a.name, func(t *testing.T) {
					mw := newMW(t, b.new(t), spec{Rules: []specRule{{
						Name: "login", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3),
						ResponseCost: failedLogins,
					}}})
					ch := newChain(m.of(mw), a.h)
					w := serve(ch, req("POST", "/api/login", "203.0.113.7:1", "X-User", "alice"))
					if w.Code != a.code || w.Body.String() != a.body || w.Header().Get("X-RateLimit-Remaining") != "2" {
						t.Errorf("client got %d %q, X-RateLimit-Remaining %q; want %d %q, 2", w.Code, w.Body, w.Header().Get("X-RateLimit-Remaining"), a.code, a.body)
					}
					cost := a.cost
					if m.name == "WrapMiddleware" {
						cost = a.wrapCost
					}
					// the middleware settles the rule once the handler has
					// returned, off the response's path: the refund of a login
					// that did not fail lands shortly after the client has its
					// answer
					if got := remainingSettled(t, mw, 3-cost); got != 3-cost {
						t.Errorf("after the response: %d failed logins left, want %d", got, 3-cost)
					}
					if !errors.Is(ch.err, a.err) && !(m.name == "WrapMiddleware" && a.wrapError) {
						t.Errorf("the chain returned %v, want %v", ch.err, a.err)
					}
					if m.name == "limit" && (ch.status != a.code || !ch.same) {
						t.Errorf("the middleware before the limiter saw status %d and its own Response %v; want %d, true", ch.status, ch.same, a.code)
					}
				})
			}
		}
	}
}

// TestConcurrencyRelease: mounted either way, a concurrency rule's slot
// is held while the Echo handler runs and released when it returns, or
// panics: one export in flight per user, a second refused with the lease
// as Retry-After, a third let through once the first is done.
func TestConcurrencyRelease(t *testing.T) {
	for _, b := range backends {
		for _, m := range mounts {
			t.Run(b.name+"/"+m.name, func(t *testing.T) {
				mw := newMW(t, b.new(t), spec{Rules: []specRule{{
					Name: "exports", Key: mustKey(keyfunc.Header("X-User")), Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, 30*time.Second),
				}}})
				inFlight := func() int64 {
					return 1 - mw.Limiter().Peek(context.Background(), "alice").Rules[0].Result.Remaining
				}
				entered, release := make(chan int64), make(chan struct{})
				ch := newChain(m.of(mw), func(c echo.Context) error {
					if c.Request().Header.Get("X-Panic") != "" {
						panic("export failed")
					}
					if c.Request().Header.Get("X-Wait") != "" {
						entered <- inFlight()
						<-release
					}
					return c.String(200, "exported")
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
				// the slot is released once the handler has returned, off
				// the response's path: shortly after the client has its answer
				if n := settled(inFlight); n != 0 {
					t.Errorf("after the first returned: %d slots held, want 0", n)
				}
				for range 3 {
					if w = serve(ch, req("GET", "/api/export", "203.0.113.7:1", "X-User", "alice", "X-Panic", "1")); w.Code != 500 {
						t.Errorf("a panicking handler: %d, want 500 (Recover)", w.Code)
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
}

// TestHostileRequests: whatever a client sends, limit answers without a
// panic and every storage key is bounded with one pair of braces.
func TestHostileRequests(t *testing.T) {
	trusted, err := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: trusted})
	if err != nil {
		t.Fatal(err)
	}
	var rec decisions
	mw := newMW(t, backends[0].new(t), spec{
		Rules: []specRule{
			{Name: "ip", Key: ip, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)},
			{Name: "key", Key: mustKey(keyfunc.Header("X-API-Key")), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000), MissingKey: redlimit.SkipMissingKey},
			{Name: "route", Key: mustKey(keyfunc.Or(keyfunc.Route(), keyfunc.Const("no-route"))), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000)},
		},
		OnDecision: rec.hook,
	})
	e := echo.New()
	e.Use(limit(mw))
	e.GET("/users/:id", func(c echo.Context) error { return c.String(200, "user "+c.Param("id")) })
	e.Any("/files/*", func(c echo.Context) error { return c.String(200, "file "+c.Param("*")) })
	binary := "\x00\xff{}%\r\n\t é \x7f"
	requests := []*http.Request{
		req("GET", "/users/1", "10.0.0.1:1", "X-Forwarded-For", strings.Repeat("1.2.3.4, ", 10_000)),
		req("GET", "/users/1", "10.0.0.1:1", "X-Forwarded-For", binary, "X-Forwarded-For", binary),
		req("GET", "/users/1", "203.0.113.7:1", "X-API-Key", strings.Repeat("{", 1<<20)),
		req("GET", "/users/1", "203.0.113.7:1", "X-API-Key", binary, "Accept", strings.Repeat("application/problem+json;q=", 1000)),
		req("GET", "/users/%00%ff%7B", "203.0.113.7:1"),
		req("FROB", "/files/../../etc/passwd", "203.0.113.7:1"),
		req("GET", "/"+strings.Repeat("x", 10_000), "203.0.113.7:1"),
		req("GET", "/users/1", ""),
		req("GET", "/users/1", "garbage"),
	}
	for i, r := range requests {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("request %d panicked: %v", i+1, v)
				}
			}()
			switch w := serve(e, r); w.Code {
			case 200, 404, 405, 429:
			default:
				t.Errorf("request %d: status %d", i+1, w.Code)
			}
		}()
	}
	for _, k := range rec.take() {
		if len(k) > 200 || k != "" && (strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1) {
			t.Errorf("storage key %q (%d bytes): want at most 200 bytes and one pair of braces", k, len(k))
		}
	}
}

// TestServer: the command's service answers 200 three times, then 429.
func TestServer(t *testing.T) {
	e, mw, err := newServer(backends[0].new(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	var got []string
	for range 4 {
		w := serve(e, req("POST", "/api/orders", "203.0.113.7:50000"))
		got = append(got, fmt.Sprint(w.Code, " ", w.Header().Get("X-RateLimit-Remaining")))
	}
	if want := []string{"200 2", "200 1", "200 0", "429 0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
