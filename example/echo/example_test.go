package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// clock is the fixed time of the examples, so that their output is
// reproducible. A real service leaves both Now fields nil.
func clock() time.Time { return time.Unix(1_700_000_000, 0) }

// Limit POST /api/orders to 3 requests a minute per client IP and route,
// on Echo: the same rule, headers and 429 as on an http.ServeMux
// (middleware.ExampleNew). limit (limit.go) mounts the Middleware and
// gives keyfunc.Route Echo's route, "/api/orders".
func Example() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{}) // no proxy in front: the TCP peer is the client
	if err != nil {
		log.Fatal(err)
	}
	key, err := keyfunc.Join(keyfunc.Route(), ip)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "orders", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{{Name: "orders", Key: key}}})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	e := echo.New()
	e.POST("/api/orders", func(c echo.Context) error {
		return c.String(200, "created\n")
	}, limit(mw))

	for range 4 {
		req := httptest.NewRequest("POST", "/api/orders", nil)
		req.RemoteAddr = "203.0.113.7:50000"
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		h := w.Header()
		fmt.Printf("%d limit=%s remaining=%s reset=%s retry-after=%q\n", w.Code,
			h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), h.Get("Retry-After"))
	}
	// Output:
	// 200 limit=3 remaining=2 reset=1700000020 retry-after=""
	// 200 limit=3 remaining=1 reset=1700000040 retry-after=""
	// 200 limit=3 remaining=0 reset=1700000060 retry-after=""
	// 429 limit=3 remaining=0 reset=1700000060 retry-after="20"
}

// Count only failed logins, 3 an hour per user, where a wrong password
// is an error the handler returns: limit has Echo's error handler write
// the 401 inside the Middleware, which charges it. Behind
// echo.WrapMiddleware the 401 is written after the Middleware has
// settled the request as a 200, and no failed login would be counted.
func Example_failedLogins() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfunc.Header("X-User")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3), Refundable: true}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{
			Name: "login",
			Key:  user,
			ResponseCost: func(status int, _ int64) int64 {
				if status == http.StatusUnauthorized {
					return 1
				}
				return 0
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	e := echo.New()
	e.POST("/login", func(c echo.Context) error {
		if c.Request().Header.Get("X-Password") != "secret" {
			return echo.ErrUnauthorized
		}
		return c.String(200, "welcome\n")
	}, limit(mw))

	for _, pw := range []string{"secret", "guess1", "guess2", "secret", "guess3", "secret"} {
		req := httptest.NewRequest("POST", "/login", nil)
		req.Header.Set("X-User", "alice")
		req.Header.Set("X-Password", pw)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Printf("%-6s -> %d, %s failed logins left\n", pw, w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// secret -> 200, 2 failed logins left
	// guess1 -> 401, 2 failed logins left
	// guess2 -> 401, 1 failed logins left
	// secret -> 200, 0 failed logins left
	// guess3 -> 401, 0 failed logins left
	// secret -> 429, 0 failed logins left
}

// Without route keys and without a rule charged after the response, Echo's
// own adapter is enough: echo.WrapMiddleware(mw.Handler) writes the same
// headers and 429, and stops the chain on a denial.
func Example_wrapMiddleware() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	perIP, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(2), middleware.WithLimiterConfig(redlimit.Config{Now: clock}))
	if err != nil {
		log.Fatal(err)
	}
	defer perIP.Close()

	e := echo.New()
	e.Use(echo.WrapMiddleware(perIP.Handler))
	e.GET("/hello", func(c echo.Context) error {
		return c.String(200, "hello\n")
	})

	for range 3 {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/hello", nil))
		fmt.Printf("%d remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=1 retry-after=""
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="30"
}
