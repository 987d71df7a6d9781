// The Prometheus collector fed by the middleware's decisions.
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	promlimit "github.com/redlimit/redlimit/middleware/prometheus"
)

func main() {
	metrics, err := promlimit.New(promlimit.Config{Rules: []string{"user"}})
	if err != nil {
		fail(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
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
	families, err := reg.Gather()
	if err != nil {
		fail(err)
	}
	counts := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "redlimit_rule_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if counts["allowed"] != 2 || counts["denied"] != 1 {
		fail(fmt.Errorf("redlimit_rule_decisions_total %v, want allowed 2, denied 1", counts))
	}
	fmt.Println("ok: prometheus collector counted 2 allowed, 1 denied")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
