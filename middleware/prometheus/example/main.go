// Command example is a small service limited by redlimit that serves its
// rate-limit metrics to Prometheus when -metrics asks for it:
//
//	go run ./example -metrics 127.0.0.1:9090   # from middleware/prometheus
//	curl -H 'X-User-ID: alice' -X POST http://127.0.0.1:8080/api/orders
//	curl http://127.0.0.1:9090/metrics
//
// It decides on an embedded miniredis, or on the Redis of REDIS_URL. The
// metrics listen apart from the service, so /metrics is not public. The
// X-User-ID header stands in for authentication.
//
// Routes and limits:
//
//	GET  /api/profile   per client IP 1000/min, per user 100/min
//	POST /api/orders    the same two, plus 10/min per user on orders
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	promlimit "github.com/redlimit/redlimit/middleware/prometheus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address of the service")
	metricsAddr := flag.String("metrics", "", "listen address of /metrics (default: no metrics)")
	flag.Parse()

	client, cleanup, err := redisClient()
	if err != nil {
		return err
	}
	defer cleanup()
	svc, err := newService(client, 0)
	if err != nil {
		return err
	}
	defer svc.close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 2)
	var servers []*http.Server
	serve := func(addr string, h http.Handler, what string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		fmt.Printf("%s on http://%s\n", what, ln.Addr())
		go func() { errc <- srv.Serve(ln) }()
		return nil
	}
	if err := serve(*addr, svc.handler, "service"); err != nil {
		return err
	}
	if *metricsAddr != "" {
		if err := serve(*metricsAddr, svc.metrics, "metrics"); err != nil {
			return err
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			return err
		}
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// service is the limited routes and the /metrics handler that counts
// their decisions.
type service struct {
	handler, metrics http.Handler
	close            func()
}

// newService builds the service on client. timeout is the Middleware's
// Config.Timeout: 0, the default 100ms, for the service; the test gives
// a loaded machine more, so that its counts do not depend on how fast
// the machine answers.
func newService(client redis.UniversalClient, timeout time.Duration) (*service, error) {
	// Every rule of every Middleware below, so each gets its own series.
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"ip", "user", "orders"}})
	if err != nil {
		return nil, err
	}
	backend, err := redisstore.New(client, redisstore.Config{OnRefundError: metrics.RefundError})
	if err != nil {
		return nil, err
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{})
	if err != nil {
		return nil, err
	}
	user, err := keyfunc.Header("X-User-ID")
	if err != nil {
		return nil, err
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Timeout: timeout,
		Rules: []redlimit.Rule{
			{Name: "ip", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(1000)},
			{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100), MissingKey: redlimit.SkipMissingKey},
		},
	})
	if err != nil {
		return nil, err
	}
	base, err := middleware.New(lim, middleware.Config{
		OnDecision:    metrics.HTTP,
		OnSettleError: metrics.SettleError, // once a rule charges after the response
		Rules:         []middleware.Rule{{Name: "ip", Key: ip}, {Name: "user", Key: user}},
	})
	if err != nil {
		lim.Close()
		return nil, err
	}
	orderLim, err := lim.With(redlimit.Rule{Name: "orders", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: redlimit.SkipMissingKey})
	if err != nil {
		lim.Close()
		return nil, err
	}
	orders, err := base.With(orderLim, middleware.Rule{Name: "orders", Key: user})
	if err != nil {
		lim.Close()
		return nil, err
	}
	metrics.Watch(lim) // orders' Limiter shares its deny cache

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	mux.Handle("GET /api/profile", base.Handler(http.HandlerFunc(ok)))
	mux.Handle("POST /api/orders", orders.Handler(http.HandlerFunc(ok)))
	return &service{
		handler: mux,
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		close:   func() { base.Close(); lim.Close() }, // orders shares base's queue and lim's probe
	}, nil
}

// redisClient returns the Redis of REDIS_URL, or an embedded miniredis.
func redisClient() (redis.UniversalClient, func(), error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.ContextTimeoutEnabled = true
		c := redis.NewClient(opt)
		return c, func() { c.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	return c, func() { c.Close(); mr.Close() }, nil
}
