package promlimit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	promlimit "github.com/redlimit/redlimit/middleware/prometheus"
)

// The middleware reports every decision to the metrics, which a
// Prometheus registry serves on /metrics. Labels are rule names and
// outcomes, never keys.
func Example() {
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"user"}})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	user, err := keyfunc.Header("X-User-ID")
	if err != nil {
		panic(err)
	}
	lim, err := redlimit.New(mem, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)}},
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		OnDecision: metrics.HTTP,
		Rules:      []middleware.Rule{{Name: "user", Key: user}},
	})
	if err != nil {
		panic(err)
	}
	defer mw.Close()
	metrics.Watch(lim) // deny-cache hits and stalled calls

	mux := http.NewServeMux()
	mux.Handle("GET /api/profile", mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 3 {
		r := httptest.NewRequest("GET", "/api/profile", nil)
		r.Header.Set("X-User-ID", "alice")
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	// An excerpt of the scrape: the counters that moved.
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "redlimit_") && !strings.HasSuffix(line, " 0") &&
			!strings.Contains(line, "_bucket") && !strings.Contains(line, "_sum") {
			fmt.Println(line)
		}
	}
	// Output:
	// redlimit_decision_duration_seconds_count{source="primary"} 3
	// redlimit_decisions_total{outcome="allowed",source="primary"} 2
	// redlimit_decisions_total{outcome="denied",source="primary"} 1
	// redlimit_rule_decisions_total{outcome="allowed",rule="user"} 2
	// redlimit_rule_decisions_total{outcome="denied",rule="user"} 1
}

// A caller of the engine (a job queue, the key-first API) gives
// Metrics.Engine to redlimit.Config.OnDecision.
func ExampleMetrics_Engine() {
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"tenant"}})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{
		OnDecision: metrics.Engine,
		Rules:      []redlimit.Rule{{Name: "tenant", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(1)}},
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	e.Allow(context.Background(), "acme")
	e.Allow(context.Background(), "acme")
	printMoved(reg, "redlimit_rule_decisions_total")
	// Output:
	// redlimit_rule_decisions_total{outcome="allowed",rule="tenant"} 1
	// redlimit_rule_decisions_total{outcome="denied",rule="tenant"} 1
}

// On a Redis Cluster or Ring, Metrics.RefundError counts the refunds
// that failed: give it to redisstore.Config.OnRefundError.
func ExampleMetrics_RefundError() {
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"user"}})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	cfg := redisstore.Config{OnRefundError: metrics.RefundError} // then redisstore.New(client, cfg)

	cfg.OnRefundError(errors.New("a refund failed")) // what the Store does when one fails
	printMoved(reg, "redlimit_refund_errors_total")
	// Output:
	// redlimit_refund_errors_total 1
}

// A rule that charges after the response (Rule.ResponseCost) may fail
// to settle: Metrics.SettleError counts it with the failed refunds. Give
// it to middleware.Config.OnSettleError.
func ExampleMetrics_SettleError() {
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"login"}})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	user, err := keyfunc.Header("X-User")
	if err != nil {
		panic(err)
	}
	lim, err := redlimit.New(mem, redlimit.Config{
		Rules:  []redlimit.Rule{{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3), Refundable: true}},
		Logger: slog.New(slog.DiscardHandler), // it hears of settle errors too
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		OnDecision:    metrics.HTTP,
		OnSettleError: metrics.SettleError,
		Rules: []middleware.Rule{{
			Name: "login", Key: user,
			// A bug: 2 units where the rule reserved 1. The settle fails
			// and the reservation stays charged.
			ResponseCost: func(int, int64) int64 { return 2 },
		}},
	})
	if err != nil {
		panic(err)
	}
	defer mw.Close()

	r := httptest.NewRequest("POST", "/login", nil)
	r.Header.Set("X-User", "alice")
	mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), r)
	printMoved(reg, "redlimit_refund_errors_total")
	// Output:
	// redlimit_refund_errors_total 1
}

// printMoved prints the samples of the named metric that are not zero.
func printMoved(reg *prometheus.Registry, name string) {
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name) && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
}
