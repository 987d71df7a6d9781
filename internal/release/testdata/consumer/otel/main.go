// The OpenTelemetry instruments fed by the middleware's decisions.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	otellimit "github.com/redlimit/redlimit/middleware/otel"
)

func main() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := otellimit.New(provider, otellimit.Config{Rules: []string{"user"}})
	if err != nil {
		fail(err)
	}
	defer metrics.Close()
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		fail(err)
	}
	user, err := keyfunc.Header("X-User-ID")
	if err != nil {
		fail(err)
	}
	lim, err := redlimit.New(mem, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)}},
	})
	if err != nil {
		fail(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		OnDecision: metrics.HTTP,
		Rules:      []middleware.Rule{{Name: "user", Key: user}},
	})
	if err != nil {
		fail(err)
	}
	defer mw.Close()
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User-ID", "alice")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fail(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != "redlimit.rule.decisions" {
				continue
			}
			for _, dp := range sum.DataPoints {
				outcome, _ := dp.Attributes.Value("redlimit.outcome")
				counts[outcome.AsString()] += dp.Value
			}
		}
	}
	if counts["allowed"] != 2 || counts["denied"] != 1 {
		fail(fmt.Errorf("redlimit.rule.decisions %v, want allowed 2, denied 1", counts))
	}
	fmt.Println("ok: otel instruments counted 2 allowed, 1 denied")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
