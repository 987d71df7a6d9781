package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestMetrics sends orders until the orders rule denies and reads the
// counts on /metrics. The service's Timeout is 10s: under the default
// 100ms a loaded machine has calls to miniredis refused (503) or, after
// FallbackAfter of them, decided by the fallback, and the counts change.
func TestMetrics(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	svc, err := newService(client, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	codes := map[int]int{}
	for range 13 { // the orders bucket holds 10: 3 denied, 2 of them by the deny cache
		r := httptest.NewRequest("POST", "/api/orders", nil)
		r.Header.Set("X-User-ID", "alice")
		w := httptest.NewRecorder()
		svc.handler.ServeHTTP(w, r)
		codes[w.Code]++
	}
	if codes[200] != 10 || codes[429] != 3 {
		t.Fatalf("status codes %v, want 10 × 200 and 3 × 429", codes)
	}
	w := httptest.NewRecorder()
	svc.metrics.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]bool{}
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		got[sc.Text()] = true
	}
	for _, line := range []string{
		`redlimit_decisions_total{outcome="allowed",source="primary"} 10`,
		`redlimit_decisions_total{outcome="denied",source="primary"} 3`,
		`redlimit_rule_decisions_total{outcome="allowed",rule="orders"} 10`,
		`redlimit_rule_decisions_total{outcome="denied",rule="orders"} 3`,
		`redlimit_local_denials_total 2`,
		`redlimit_refund_errors_total 0`,
	} {
		if !got[line] {
			t.Errorf("no line %q in the scrape:\n%s", line, strings.Join(keys(got), "\n"))
		}
	}
	if w.Code != http.StatusOK {
		t.Errorf("GET /metrics: %d", w.Code)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, "redlimit_") {
			out = append(out, k)
		}
	}
	return out
}
