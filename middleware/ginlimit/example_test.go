package ginlimit_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// clock is the fixed time of the examples, so that their output is
// reproducible. A real service leaves both Now fields nil (the store's
// and the Limiter's).
func clock() time.Time { return time.Unix(1_700_000_000, 0) }

// Limit POST /api/orders to 3 requests a minute per client IP and route,
// on a Gin engine: the same rule, headers and 429 as on an
// http.ServeMux (middleware.ExampleNew). The fourth request is denied
// with Retry-After, and the handler does not run.
func Example() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{}) // no proxy in front: the TCP peer is the client
	if err != nil {
		log.Fatal(err)
	}
	key, err := keyfunc.Join(keyfunc.Route(), ip) // Route: the Gin route, "/api/orders"
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

	r := gin.New()
	r.POST("/api/orders", ginlimit.Handler(mw), func(c *gin.Context) {
		c.String(200, "created\n")
	})

	for range 4 {
		req := httptest.NewRequest("POST", "/api/orders", nil)
		req.RemoteAddr = "203.0.113.7:50000"
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
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

// Mounted on the whole engine, the limiter still keys by route: Gin has
// routed the request before its middlewares run. /users/1 and /users/2
// share the bucket of "/users/:id"; a later handler reads the Decision
// from c.Request's context (Config.DecisionInContext); the denied third
// request never reaches it.
func ExampleHandler_route() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "route", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules:             []middleware.Rule{{Name: "route", Key: keyfunc.Route()}},
		DecisionInContext: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	r := gin.New()
	r.Use(ginlimit.Handler(mw))
	r.GET("/users/:id", func(c *gin.Context) {
		d, _ := middleware.FromContext(c.Request.Context())
		c.String(200, "user %s, %d left on %s\n", c.Param("id"), d.Rules[0].Result.Remaining, c.FullPath())
	})

	for _, id := range []string{"1", "2", "3"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/users/"+id, nil))
		fmt.Print(w.Code, " ", w.Body)
	}
	// Output:
	// 200 user 1, 1 left on /users/:id
	// 200 user 2, 0 left on /users/:id
	// 429 rate limit exceeded: route; retry in 30s
}
