package otellimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	otellimit "github.com/redlimit/redlimit/middleware/otel"
)

// The middleware reports every decision to the metrics, recorded with the
// service's MeterProvider (here the SDK's, read by a ManualReader; in a
// service, the one its exporter is set up with).
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := otellimit.New(provider, otellimit.Config{Rules: []string{"user"}})
	if err != nil {
		panic(err)
	}
	defer metrics.Close()

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

	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/api/profile", nil)
		r.Header.Set("X-User-ID", "alice")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "redlimit.rule.decisions" {
			for _, dp := range sum.DataPoints {
				rule, _ := dp.Attributes.Value("redlimit.rule")
				outcome, _ := dp.Attributes.Value("redlimit.outcome")
				fmt.Printf("%s rule=%s outcome=%s: %d\n", m.Name, rule.AsString(), outcome.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// redlimit.rule.decisions rule=user outcome=allowed: 2
	// redlimit.rule.decisions rule=user outcome=denied: 1
}

// A caller of the engine (a job queue, the key-first API) gives
// Metrics.Engine to redlimit.Config.OnDecision; a Redis Cluster store gives
// Metrics.RefundError to redisstore.Config.OnRefundError.
func ExampleMetrics_Engine() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := otellimit.New(provider, otellimit.Config{Rules: []string{"tenant"}})
	if err != nil {
		panic(err)
	}
	defer metrics.Close()
	_ = redisstore.Config{OnRefundError: metrics.RefundError} // then redisstore.New(client, cfg)

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

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "redlimit.decisions" {
			for _, dp := range sum.DataPoints {
				source, _ := dp.Attributes.Value("redlimit.source")
				outcome, _ := dp.Attributes.Value("redlimit.outcome")
				fmt.Printf("%s source=%s outcome=%s: %d\n", m.Name, source.AsString(), outcome.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// redlimit.decisions source=primary outcome=allowed: 1
	// redlimit.decisions source=primary outcome=denied: 1
}

// A rule that charges after the response (Rule.ResponseCost) may fail
// to settle: Metrics.SettleError counts it in redlimit.refund.errors with
// the failed refunds. Give it to middleware.Config.OnSettleError.
func ExampleMetrics_SettleError() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := otellimit.New(provider, otellimit.Config{Rules: []string{"login"}})
	if err != nil {
		panic(err)
	}
	defer metrics.Close()

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

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "redlimit.refund.errors" {
			for _, dp := range sum.DataPoints {
				fmt.Printf("%s: %d\n", m.Name, dp.Value)
			}
		}
	}
	// Output:
	// redlimit.refund.errors: 1
}
