package otellimit_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	otellimit "github.com/redlimit/redlimit/middleware/otel"
)

var (
	t0    = time.Unix(1_700_000_000, 0)
	quiet = slog.New(slog.DiscardHandler)
)

func newMem(t testing.TB) *memstore.Store {
	t.Helper()
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

func newMetrics(t testing.TB, rules ...string) (*otellimit.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	m, err := otellimit.New(provider, otellimit.Config{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, reader
}

// collect reads every data point by "name{k=v,...}": the value of sums and
// gauges, the count of histograms.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	key := func(name string, attrs attribute.Set) string {
		var kv []string
		for _, a := range attrs.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellimit.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otellimit.ScopeName)
		}
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				if !data.IsMonotonic {
					t.Errorf("%s is not monotonic", md.Name)
				}
				for _, dp := range data.DataPoints {
					out[key(md.Name, dp.Attributes)] = float64(dp.Value)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					out[key(md.Name, dp.Attributes)] = float64(dp.Value)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					out[key(md.Name, dp.Attributes)] = float64(dp.Count)
				}
			default:
				t.Errorf("%s: unexpected data %T", md.Name, data)
			}
		}
	}
	return out
}

// checkCollect fails unless the collection holds exactly want, zero data
// points aside.
func checkCollect(t *testing.T, reader *sdkmetric.ManualReader, want map[string]float64) {
	t.Helper()
	got := collect(t, reader)
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
}

// TestEngineOutcomes decides with a real engine over memstore and checks
// the exact sum of every decision and rule outcome.
func TestEngineOutcomes(t *testing.T) {
	m, reader := newMetrics(t, "tenant", "user", "audit")
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
	checkCollect(t, reader, map[string]float64{
		`redlimit.decisions{redlimit.outcome=allowed,redlimit.source=primary}`:       1,
		`redlimit.decisions{redlimit.outcome=shadow_denied,redlimit.source=primary}`: 2,
		`redlimit.decisions{redlimit.outcome=denied,redlimit.source=primary}`:        2,
		`redlimit.decisions{redlimit.outcome=allowed,redlimit.source=none}`:          1,
		`redlimit.decisions{redlimit.outcome=denied,redlimit.source=none}`:           1,
		`redlimit.decisions{redlimit.outcome=error,redlimit.source=none}`:            1, // the invalid cost: refused

		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=tenant}`:     3,
		`redlimit.rule.decisions{redlimit.outcome=denied,redlimit.rule=tenant}`:      2,
		`redlimit.rule.decisions{redlimit.outcome=exempt,redlimit.rule=tenant}`:      1,
		`redlimit.rule.decisions{redlimit.outcome=error,redlimit.rule=tenant}`:       1,
		`redlimit.rule.decisions{redlimit.outcome=missing_key,redlimit.rule=tenant}`: 1,

		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=user}`:      4,
		`redlimit.rule.decisions{redlimit.outcome=skipped,redlimit.rule=user}`:      1,
		`redlimit.rule.decisions{redlimit.outcome=exempt,redlimit.rule=user}`:       1,
		`redlimit.rule.decisions{redlimit.outcome=invalid_cost,redlimit.rule=user}`: 1,
		`redlimit.rule.decisions{redlimit.outcome=unevaluated,redlimit.rule=user}`:  1,

		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=audit}`:       1,
		`redlimit.rule.decisions{redlimit.outcome=shadow_denied,redlimit.rule=audit}`: 4,
		`redlimit.rule.decisions{redlimit.outcome=exempt,redlimit.rule=audit}`:        1,
		`redlimit.rule.decisions{redlimit.outcome=unevaluated,redlimit.rule=audit}`:   1,
		`redlimit.rule.decisions{redlimit.outcome=error,redlimit.rule=audit}`:         1,

		`redlimit.decision.duration{redlimit.source=primary}`: 5,
		`redlimit.decision.duration{redlimit.source=none}`:    3,
	})
}

// failing is a Backend that fails while down is set; otherwise it asks
// next. It reports no capability, so the engine puts a deny cache in front
// of it.
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

// TestErrorPolicies records the decisions of each error policy with a
// backend that fails, and of the fallback that stands in for it.
func TestErrorPolicies(t *testing.T) {
	m, reader := newMetrics(t, "tenant")
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
	checkCollect(t, reader, map[string]float64{
		`redlimit.decisions{redlimit.outcome=error,redlimit.source=none}`:        4,
		`redlimit.decisions{redlimit.outcome=allowed,redlimit.source=fallback}`:  3,
		`redlimit.decisions{redlimit.outcome=denied,redlimit.source=fallback}`:   1,
		`redlimit.rule.decisions{redlimit.outcome=error,redlimit.rule=tenant}`:   4,
		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=tenant}`: 3,
		`redlimit.rule.decisions{redlimit.outcome=denied,redlimit.rule=tenant}`:  1,
		`redlimit.decision.duration{redlimit.source=none}`:                       4,
		`redlimit.decision.duration{redlimit.source=fallback}`:                   4,
	})
}

// TestLocalDenialsAndRefunds records deny-cache hits of a watched engine,
// failed refunds and decisions about rules the metrics do not list.
func TestLocalDenialsAndRefunds(t *testing.T) {
	m, reader := newMetrics(t, "tenant")
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
	m.RefundError(errDown)
	m.RefundError(errDown)
	checkCollect(t, reader, map[string]float64{
		`redlimit.decisions{redlimit.outcome=allowed,redlimit.source=primary}`:   1,
		`redlimit.decisions{redlimit.outcome=denied,redlimit.source=primary}`:    3,
		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=tenant}`: 1,
		`redlimit.rule.decisions{redlimit.outcome=denied,redlimit.rule=tenant}`:  3,
		`redlimit.decision.duration{redlimit.source=primary}`:                    4,
		`redlimit.rule.decisions.unlisted{}`:                                     4,
		`redlimit.local_denials{}`:                                               2,
		`redlimit.refund.errors{}`:                                               2,
	})
}

// TestSettleErrors records in redlimit.refund.errors the charges after
// the response that a real middleware failed to settle: a cost above the
// reservation and a refund after the refund window. A refund in time and
// a full charge count nothing.
func TestSettleErrors(t *testing.T) {
	m, reader := newMetrics(t, "login")
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
	checkCollect(t, reader, map[string]float64{
		`redlimit.decisions{redlimit.outcome=allowed,redlimit.source=primary}`:  4,
		`redlimit.rule.decisions{redlimit.outcome=allowed,redlimit.rule=login}`: 4,
		`redlimit.decision.duration{redlimit.source=primary}`:                   4,
		`redlimit.refund.errors{}`:                                              2,
	})
}

func TestConfigErrors(t *testing.T) {
	provider := noop.NewMeterProvider()
	for _, tc := range []struct {
		name     string
		provider bool
		cfg      otellimit.Config
		field    string
	}{
		{"no provider", false, otellimit.Config{Rules: []string{"a"}}, "provider"},
		{"no rules", true, otellimit.Config{}, "Config.Rules"},
		{"bad name", true, otellimit.Config{Rules: []string{"a{b}"}}, "Config.Rules"},
		{"long name", true, otellimit.Config{Rules: []string{strings.Repeat("a", 65)}}, "Config.Rules"},
		{"empty buckets", true, otellimit.Config{Rules: []string{"a"}, Buckets: []float64{}}, "Config.Buckets"},
		{"decreasing buckets", true, otellimit.Config{Rules: []string{"a"}, Buckets: []float64{1, 0.5}}, "Config.Buckets"},
		{"infinite bucket", true, otellimit.Config{Rules: []string{"a"}, Buckets: []float64{1, math.Inf(1)}}, "Config.Buckets"},
		{"NaN bucket", true, otellimit.Config{Rules: []string{"a"}, Buckets: []float64{math.NaN()}}, "Config.Buckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p metric.MeterProvider
			if tc.provider {
				p = provider
			}
			m, err := otellimit.New(p, tc.cfg)
			var ce *algorithms.ConfigError
			if m != nil || !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, algorithms.ErrInvalidConfig) {
				t.Fatalf("New(%+v) = %v, %v; want a ConfigError naming %s", tc.cfg, m, err, tc.field)
			}
		})
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

// TestRecordAllocatesNothing: with the SDK's MeterProvider, recording a
// decision allocates nothing once its attribute sets have been seen.
func TestRecordAllocatesNothing(t *testing.T) {
	m, _ := newMetrics(t, "ip", "user")
	d := decision()
	ctx := context.Background()
	m.Record(ctx, d)
	if n := testing.AllocsPerRun(1000, func() { m.Record(ctx, d) }); n != 0 {
		t.Errorf("Record allocates %v times per decision, want 0", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	m, _ := newMetrics(b, "ip", "user")
	d := decision()
	ctx := context.Background()
	b.Run("rules=2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Record(ctx, d)
		}
	})
	b.Run("rules=2/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Record(ctx, d)
			}
		})
	})
}
