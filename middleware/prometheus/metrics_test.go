package promlimit_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	promlimit "github.com/redlimit/redlimit/middleware/prometheus"
)

var t0 = time.Unix(1_700_000_000, 0)

var quiet = slog.New(slog.DiscardHandler)

func frozen() func() time.Time { return func() time.Time { return t0 } }

func newMem(t testing.TB) *memstore.Store {
	t.Helper()
	mem, err := memstore.New(memstore.Config{Now: frozen()})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

func newMetrics(t testing.TB, rules ...string) (*promlimit.Metrics, *prometheus.Registry) {
	t.Helper()
	m, err := promlimit.New(promlimit.Config{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	return m, reg
}

// scrape reads the registry's text exposition through promhttp over HTTP
// and returns every sample but the histogram buckets and sums (their
// values depend on the machine's speed), by "name{labels}".
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		name, value := line[:i], line[i+1:]
		if strings.Contains(name, "_bucket{") || strings.Contains(name, "_sum") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkScrape fails unless the scrape holds every series of want with its
// value and every other series is zero; names lists series that must
// exist (at zero if not in want).
func checkScrape(t *testing.T, reg *prometheus.Registry, want map[string]float64, exist ...string) {
	t.Helper()
	got := scrape(t, reg)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok && got[k] != 0 {
			t.Errorf("%s = %v, want 0", k, got[k])
		}
	}
	for _, k := range exist {
		if _, ok := got[k]; !ok {
			t.Errorf("series %s missing from the scrape", k)
		}
	}
}

// TestEngineOutcomes decides with a real engine over memstore and checks
// the exact count of every decision and rule outcome in a scrape.
func TestEngineOutcomes(t *testing.T) {
	m, reg := newMetrics(t, "tenant", "user", "audit")
	e, err := redlimit.New(newMem(t), redlimit.Config{
		OnDecision: m.Engine,
		Rules: []redlimit.Rule{
			{Name: "tenant", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(3)},
			{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: redlimit.SkipMissingKey},
			{Name: "audit", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1), Shadow: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	steps := []struct {
		in      []redlimit.Input
		allowed bool
	}{
		{[]redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Material: "alice"}, {Rule: "audit", Material: "acme"}}, true},         // all allow
		{[]redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Material: "alice"}, {Rule: "audit", Material: "acme"}}, true},         // audit would deny
		{[]redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Material: "alice"}, {Rule: "audit", Material: "acme"}}, true},         // audit would deny
		{[]redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Material: "alice"}, {Rule: "audit", Material: "acme"}}, false},        // tenant denies
		{[]redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Missing: true}, {Rule: "audit", Material: "acme"}}, false},            // user skipped
		{[]redlimit.Input{{Rule: "tenant", Exempt: true}, {Rule: "user", Exempt: true}, {Rule: "audit", Exempt: true}}, true},                      // allowlisted
		{[]redlimit.Input{{Rule: "tenant", Material: "globex"}, {Rule: "user", Material: "bob", Cost: -1}, {Rule: "audit", Material: "x"}}, false}, // invalid cost: refused
		{[]redlimit.Input{{Rule: "tenant", Missing: true}, {Rule: "user", Material: "bob"}, {Rule: "audit", Material: "x"}}, false},                // tenant's key missing
	}
	var d redlimit.Decision
	for i, s := range steps {
		e.Decide(context.Background(), s.in, &d)
		if d.Allowed != s.allowed {
			t.Fatalf("step %d: Allowed = %v, want %v (%+v)", i, d.Allowed, s.allowed, d)
		}
	}
	checkScrape(t, reg, map[string]float64{
		`redlimit_decisions_total{outcome="allowed",source="primary"}`:       1,
		`redlimit_decisions_total{outcome="shadow_denied",source="primary"}`: 2,
		`redlimit_decisions_total{outcome="denied",source="primary"}`:        2,
		`redlimit_decisions_total{outcome="allowed",source="none"}`:          1,
		`redlimit_decisions_total{outcome="denied",source="none"}`:           1,
		`redlimit_decisions_total{outcome="error",source="none"}`:            1, // the invalid cost: refused

		`redlimit_rule_decisions_total{outcome="allowed",rule="tenant"}`:     3,
		`redlimit_rule_decisions_total{outcome="denied",rule="tenant"}`:      2,
		`redlimit_rule_decisions_total{outcome="exempt",rule="tenant"}`:      1,
		`redlimit_rule_decisions_total{outcome="error",rule="tenant"}`:       1,
		`redlimit_rule_decisions_total{outcome="missing_key",rule="tenant"}`: 1,

		`redlimit_rule_decisions_total{outcome="allowed",rule="user"}`:      4,
		`redlimit_rule_decisions_total{outcome="skipped",rule="user"}`:      1,
		`redlimit_rule_decisions_total{outcome="exempt",rule="user"}`:       1,
		`redlimit_rule_decisions_total{outcome="invalid_cost",rule="user"}`: 1,
		`redlimit_rule_decisions_total{outcome="unevaluated",rule="user"}`:  1,

		`redlimit_rule_decisions_total{outcome="allowed",rule="audit"}`:       1,
		`redlimit_rule_decisions_total{outcome="shadow_denied",rule="audit"}`: 4,
		`redlimit_rule_decisions_total{outcome="exempt",rule="audit"}`:        1,
		`redlimit_rule_decisions_total{outcome="unevaluated",rule="audit"}`:   1,
		`redlimit_rule_decisions_total{outcome="error",rule="audit"}`:         1,

		`redlimit_decision_duration_seconds_count{source="primary"}`: 5,
		`redlimit_decision_duration_seconds_count{source="none"}`:    3,
	},
		`redlimit_decisions_total{outcome="error",source="fallback"}`,
		`redlimit_rule_decisions_total{outcome="error",rule="audit"}`,
		`redlimit_decision_duration_seconds_count{source="fallback"}`,
		`redlimit_local_denials_total`,
		`redlimit_stalled_backend_calls`,
		`redlimit_refund_errors_total`,
		`redlimit_unlisted_rule_decisions_total`,
	)
}

// failing is a Backend that fails while down is set; otherwise it asks
// next. It reports no capability, so the engine puts a deny cache in front
// of it and gives it a timeout.
type failing struct {
	next algorithms.Backend
	down bool
}

var errDown = errors.New("backend down")

func (f *failing) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if f.down {
		return errDown
	}
	return f.next.Allow(ctx, checks, results)
}

// TestErrorPolicies counts the decisions of each error policy with a
// backend that fails, and of the fallback that stands in for it.
func TestErrorPolicies(t *testing.T) {
	m, reg := newMetrics(t, "tenant")
	rules := []redlimit.Rule{{Name: "tenant", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(3)}}
	decide := func(policy redlimit.ErrorPolicy, n int) {
		t.Helper()
		e, err := redlimit.New(&failing{next: newMem(t), down: true}, redlimit.Config{
			Rules: rules, OnError: policy, OnDecision: m.Engine, Logger: quiet,
			FallbackBackend: newMem(t), ProbeInterval: time.Hour, FallbackAfter: time.Nanosecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var d redlimit.Decision
		for range n {
			e.Decide(context.Background(), []redlimit.Input{{Rule: "tenant", Material: "acme"}}, &d)
		}
	}
	decide(redlimit.FailOpen, 2)
	decide(redlimit.FailClosed, 1)
	decide(redlimit.Fallback, 5) // refused at the first failure; then the fallback allows 3, denies 1
	checkScrape(t, reg, map[string]float64{
		`redlimit_decisions_total{outcome="error",source="none"}`:        4,
		`redlimit_decisions_total{outcome="allowed",source="fallback"}`:  3,
		`redlimit_decisions_total{outcome="denied",source="fallback"}`:   1,
		`redlimit_rule_decisions_total{outcome="error",rule="tenant"}`:   4,
		`redlimit_rule_decisions_total{outcome="allowed",rule="tenant"}`: 3,
		`redlimit_rule_decisions_total{outcome="denied",rule="tenant"}`:  1,
		`redlimit_decision_duration_seconds_count{source="none"}`:        4,
		`redlimit_decision_duration_seconds_count{source="fallback"}`:    4,
	})
}

// TestLocalDenialsAndRefunds counts deny-cache hits of a watched engine,
// failed refunds and decisions about rules the metrics do not list.
func TestLocalDenialsAndRefunds(t *testing.T) {
	m, reg := newMetrics(t, "tenant")
	e, err := redlimit.New(&failing{next: newMem(t)}, redlimit.Config{
		OnDecision: m.Engine,
		Rules: []redlimit.Rule{
			{Name: "tenant", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
			{Name: "other", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m.Watch(e)
	m.Watch(nil) // ignored
	var d redlimit.Decision
	for range 4 { // allowed, denied by the backend, then twice by the deny cache
		e.Decide(context.Background(), []redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "other", Material: "acme"}}, &d)
	}
	if got := e.Status().LocalDenials; got != 2 {
		t.Fatalf("LocalDenials() = %d, want 2", got)
	}
	m.RefundError(errDown)
	m.RefundError(errDown)
	checkScrape(t, reg, map[string]float64{
		`redlimit_decisions_total{outcome="allowed",source="primary"}`:   1,
		`redlimit_decisions_total{outcome="denied",source="primary"}`:    3,
		`redlimit_rule_decisions_total{outcome="allowed",rule="tenant"}`: 1,
		`redlimit_rule_decisions_total{outcome="denied",rule="tenant"}`:  3,
		`redlimit_decision_duration_seconds_count{source="primary"}`:     4,
		`redlimit_unlisted_rule_decisions_total`:                         4,
		`redlimit_local_denials_total`:                                   2,
		`redlimit_refund_errors_total`:                                   2,
	})
}

// TestMiddleware counts the decisions of the HTTP middleware, with rules
// added by With, through Metrics.HTTP.
func TestMiddleware(t *testing.T) {
	m, reg := newMetrics(t, "user", "orders")
	lim, err := redlimit.New(newMem(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "user", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(100), MissingKey: redlimit.SkipMissingKey},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		OnDecision: m.HTTP,
		Exempt:     func(r *http.Request) bool { return r.Header.Get("X-Internal") != "" },
		Rules:      []middleware.Rule{{Name: "user", Key: mustKey(keyfunc.Header("X-User"))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	orderLim, err := lim.With(redlimit.Rule{Name: "orders", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(2)})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := mw.With(orderLim, middleware.Rule{Name: "orders", Key: mustKey(keyfunc.Header("X-User"))})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	codes := map[int]int{}
	get := func(h http.Handler, header ...string) {
		r := httptest.NewRequest("GET", "/", nil)
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[w.Code]++
	}
	for range 3 {
		get(mw.Handler(ok), "X-User", "alice")
		get(orders.Handler(ok), "X-User", "alice") // 2 allowed, 1 denied
	}
	get(mw.Handler(ok))                        // user skipped
	get(orders.Handler(ok))                    // orders: missing key
	get(orders.Handler(ok), "X-Internal", "1") // exempt
	if codes[200] != 7 || codes[429] != 2 {
		t.Fatalf("status codes %v, want 7 × 200 and 2 × 429", codes)
	}
	checkScrape(t, reg, map[string]float64{
		`redlimit_decisions_total{outcome="allowed",source="primary"}`: 5,
		`redlimit_decisions_total{outcome="denied",source="primary"}`:  1,
		`redlimit_decisions_total{outcome="allowed",source="none"}`:    2,
		`redlimit_decisions_total{outcome="denied",source="none"}`:     1,

		`redlimit_rule_decisions_total{outcome="allowed",rule="user"}`:       6,
		`redlimit_rule_decisions_total{outcome="skipped",rule="user"}`:       2,
		`redlimit_rule_decisions_total{outcome="exempt",rule="user"}`:        1,
		`redlimit_rule_decisions_total{outcome="allowed",rule="orders"}`:     2,
		`redlimit_rule_decisions_total{outcome="denied",rule="orders"}`:      1,
		`redlimit_rule_decisions_total{outcome="missing_key",rule="orders"}`: 1,
		`redlimit_rule_decisions_total{outcome="exempt",rule="orders"}`:      1,

		`redlimit_decision_duration_seconds_count{source="primary"}`: 6,
		`redlimit_decision_duration_seconds_count{source="none"}`:    3,
	})
}

// TestSettleErrors counts in redlimit_refund_errors_total the charges
// after the response that a real middleware failed to settle: a cost
// above the reservation and a refund after the refund window. A refund
// in time and a full charge count nothing.
func TestSettleErrors(t *testing.T) {
	m, reg := newMetrics(t, "login")
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	mem, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := redlimit.New(mem, redlimit.Config{
		Rules:        []redlimit.Rule{{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10), Refundable: true}},
		RefundWindow: time.Minute,
		Logger:       quiet,
		Now:          clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		OnDecision:    m.HTTP,
		OnSettleError: m.SettleError,
		Rules: []middleware.Rule{{
			Name: "login", Key: mustKey(keyfunc.Header("X-User")),
			ResponseCost: func(status int, _ int64) int64 {
				switch status {
				case http.StatusUnauthorized:
					return 1 // the whole reservation: nothing to refund
				case http.StatusRequestEntityTooLarge:
					return 5 // above the reservation of 1: an error
				}
				return 0 // refund the unit
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/wrong":
			w.WriteHeader(http.StatusUnauthorized)
		case "/big":
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case "/slow":
			now.Add(int64(2 * time.Minute)) // the refund comes after the window
		}
	}))
	for _, path := range []string{"/", "/wrong", "/big", "/slow"} {
		r := httptest.NewRequest("POST", path, nil)
		r.Header.Set("X-User", "alice")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if got := mw.Limiter().Peek(t.Context(), "alice").Rules[0].Result.Remaining; got != 7 {
		t.Errorf("%d left, want 7: the refund in time given back, the others charged", got)
	}
	checkScrape(t, reg, map[string]float64{
		`redlimit_decisions_total{outcome="allowed",source="primary"}`:  4,
		`redlimit_rule_decisions_total{outcome="allowed",rule="login"}`: 4,
		`redlimit_decision_duration_seconds_count{source="primary"}`:    4,
		`redlimit_refund_errors_total`:                                  2,
	})
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   promlimit.Config
		field string
	}{
		{"no rules", promlimit.Config{}, "Config.Rules"},
		{"empty name", promlimit.Config{Rules: []string{"ok", ""}}, "Config.Rules"},
		{"bad name", promlimit.Config{Rules: []string{"a b"}}, "Config.Rules"},
		{"long name", promlimit.Config{Rules: []string{strings.Repeat("a", 65)}}, "Config.Rules"},
		{"empty buckets", promlimit.Config{Rules: []string{"a"}, Buckets: []float64{}}, "Config.Buckets"},
		{"decreasing buckets", promlimit.Config{Rules: []string{"a"}, Buckets: []float64{1, 0.5}}, "Config.Buckets"},
		{"equal buckets", promlimit.Config{Rules: []string{"a"}, Buckets: []float64{1, 1}}, "Config.Buckets"},
		{"NaN bucket", promlimit.Config{Rules: []string{"a"}, Buckets: []float64{math.NaN()}}, "Config.Buckets"},
		{"inner +Inf", promlimit.Config{Rules: []string{"a"}, Buckets: []float64{math.Inf(1), 2}}, "Config.Buckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := promlimit.New(tc.cfg)
			var ce *algorithms.ConfigError
			if m != nil || !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, algorithms.ErrInvalidConfig) {
				t.Fatalf("New(%+v) = %v, %v; want a ConfigError naming %s", tc.cfg, m, err, tc.field)
			}
		})
	}
	// Duplicates count once; a trailing +Inf bound is accepted.
	m, err := promlimit.New(promlimit.Config{Rules: []string{"a", "a"}, Buckets: []float64{0.1, math.Inf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := prometheus.NewRegistry().Register(m); err != nil {
		t.Fatal(err)
	}
}

// decision is a typical decision of two rules, both allowed.
func decision() *redlimit.Decision {
	return &redlimit.Decision{
		Allowed: true, Source: redlimit.SourcePrimary, Latency: 300 * time.Microsecond,
		Rules: []redlimit.RuleDecision{
			{Name: "ip", Evaluated: true, Result: algorithms.Result{Allowed: true, Limit: 10, Remaining: 9}},
			{Name: "user", Evaluated: true, Result: algorithms.Result{Allowed: true, Limit: 10, Remaining: 9}},
		},
	}
}

func TestObserveAllocatesNothing(t *testing.T) {
	m, _ := newMetrics(t, "ip", "user")
	d := decision()
	if n := testing.AllocsPerRun(1000, func() { m.Observe(d) }); n != 0 {
		t.Errorf("Observe allocates %v times per decision, want 0", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	m, _ := newMetrics(b, "ip", "user")
	d := decision()
	b.Run("rules=2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Observe(d)
		}
	})
	b.Run("rules=2/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Observe(d)
			}
		})
	})
}
