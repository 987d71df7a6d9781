// Command echo is a small Echo v4 service limited by redlimit: POST
// /api/orders, 3 requests a minute per client IP, with the headers and
// the 429 of the net/http middleware. It is a module of its own
// (github.com/redlimit/redlimit/example/echo), so that the redlimit module
// does not require Echo; docs/frameworks.md shows it beside chi,
// http.ServeMux and Gin.
//
//	go run .                      # in example/echo, listening on localhost:8080
//	curl -i -X POST localhost:8080/api/orders
//
// The limiter is mounted with limit (limit.go), a few lines over
// echo.WrapMiddleware that keep Echo's route for keyfunc.Route and the
// status of a handler's returned error for Rule.ResponseCost. The backend
// is in process; a service with several instances passes a
// redisstore.Store instead (docs/redis.md).
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	backend, err := memstore.New(memstore.Config{})
	if err != nil {
		return err
	}
	e, mw, err := newServer(backend)
	if err != nil {
		return err
	}
	defer mw.Close()
	fmt.Printf("listening on http://%s (POST /api/orders: 3 a minute per client IP)\n", addr)
	if err := e.Start(addr); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newServer returns the service on backend and its Middleware (the caller
// closes it).
func newServer(backend algorithms.Backend) (*echo.Echo, *middleware.Middleware, error) {
	ip, err := keyfunc.IP(keyfunc.IPConfig{}) // behind a load balancer: TrustedProxies
	if err != nil {
		return nil, nil, err
	}
	key, err := keyfunc.Join(keyfunc.Route(), ip)
	if err != nil {
		return nil, nil, err
	}
	// one rule, "orders": the Middleware builds its Limiter, and its
	// Close closes both
	mw, err := middleware.PerKey(backend, key, algorithms.GCRA, algorithms.PerMinute(3), middleware.WithName("orders"))
	if err != nil {
		return nil, nil, err
	}
	e := echo.New()
	e.HideBanner = true
	e.POST("/api/orders", func(c echo.Context) error {
		return c.String(http.StatusOK, "created\n")
	}, limit(mw))
	return e, mw, nil
}
