package otellimit

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/rulename"
)

// ScopeName is the name of the meter the instruments belong to.
const ScopeName = "github.com/redlimit/redlimit/middleware/otel"

// DefaultBuckets are the latency histogram's bucket boundaries in seconds,
// from 50µs (an in-process decision, a deny-cache hit) to 1s (a timeout).
var DefaultBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Config configures [Metrics]. Only Rules is required.
type Config struct {
	// Rules names the rules whose decisions are recorded per rule: every
	// rule of the Middlewares and Engines that report to the Metrics
	// (those derived with With included). Names are those of
	// redlimit.Rule.Name (1 to 64 characters from [A-Za-z0-9_.-]); a name
	// listed twice counts once. A decision about a rule not listed here is
	// counted in redlimit.rule.decisions.unlisted.
	Rules []string

	// Buckets are the bucket boundaries, in seconds and increasing, the
	// latency histogram advises. Default [DefaultBuckets]. A View of the
	// MeterProvider may override them.
	Buckets []float64
}

// numOutcomes is how many Outcomes there are: OutcomeUnevaluated is the
// last.
const numOutcomes = int(redlimit.OutcomeUnevaluated) + 1

// Metrics records redlimit's decisions with OpenTelemetry instruments.
// Build it with [New]; it is safe for concurrent use. Its methods
// [Metrics.HTTP], [Metrics.Engine], [Metrics.SettleError] and
// [Metrics.RefundError] are the hooks of middleware.Config (OnDecision,
// OnSettleError), redlimit.Config and redisstore.Config. Close it to stop
// observing the watched engines.
type Metrics struct {
	decisions metric.Int64Counter
	rules     metric.Int64Counter
	latency   metric.Float64Histogram
	unlisted  metric.Int64Counter
	refunds   metric.Int64Counter
	reg       metric.Registration

	// Options carrying pre-built attribute sets, one slice each so that
	// passing them allocates nothing.
	byDecision [numSources][numDecisionOutcomes][]metric.AddOption
	bySource   [numSources][]metric.RecordOption
	byRule     map[string]*[numOutcomes][]metric.AddOption

	mu      sync.Mutex
	watched []*redlimit.Limiter
}

// New returns Metrics recording with a meter of provider named
// [ScopeName]. Invalid configuration is an *[algorithms.ConfigError]
// naming the field; an instrument the provider refuses is an error too.
func New(provider metric.MeterProvider, cfg Config) (*Metrics, error) {
	if provider == nil {
		return nil, &algorithms.ConfigError{Field: "provider", Reason: "must not be nil"}
	}
	if len(cfg.Rules) == 0 {
		return nil, &algorithms.ConfigError{Field: "Config.Rules", Reason: "must name at least one rule"}
	}
	for _, name := range cfg.Rules {
		if !rulename.Valid(name) {
			return nil, &algorithms.ConfigError{Field: "Config.Rules", Reason: "must hold rule names of 1-64 characters from [A-Za-z0-9_.-], got " + quote(name)}
		}
	}
	if cfg.Buckets == nil {
		cfg.Buckets = DefaultBuckets
	}
	if err := validBuckets(cfg.Buckets); err != nil {
		return nil, err
	}
	meter := provider.Meter(ScopeName)
	m := &Metrics{byRule: make(map[string]*[numOutcomes][]metric.AddOption, len(cfg.Rules))}
	var errs [7]error
	m.decisions, errs[0] = meter.Int64Counter("redlimit.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Rate-limit decisions (one per request), by the backend that decided and outcome."))
	m.rules, errs[1] = meter.Int64Counter("redlimit.rule.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Each rule's part of the rate-limit decisions, by rule and the rule's own outcome."))
	m.latency, errs[2] = meter.Float64Histogram("redlimit.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time spent deciding a request, backend call included, by the backend that decided."),
		metric.WithExplicitBucketBoundaries(cfg.Buckets...))
	m.unlisted, errs[3] = meter.Int64Counter("redlimit.rule.decisions.unlisted", metric.WithUnit("{decision}"),
		metric.WithDescription("Rule decisions about rules the metrics were not configured with (not counted per rule)."))
	m.refunds, errs[4] = meter.Int64Counter("redlimit.refund.errors", metric.WithUnit("{refund}"),
		metric.WithDescription("Refunds that failed: cluster compensation and charges after the response. Their units stay consumed."))
	denials, err5 := meter.Int64ObservableCounter("redlimit.local_denials", metric.WithUnit("{decision}"),
		metric.WithDescription("Requests the local deny cache denied without a backend call."))
	stalled, err6 := meter.Int64ObservableGauge("redlimit.stalled_calls", metric.WithUnit("{call}"),
		metric.WithDescription("Backend calls that outlived the timeout and still run in the background."))
	errs[5], errs[6] = err5, err6
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, s := m.observed()
		o.ObserveInt64(denials, int64(n))
		o.ObserveInt64(stalled, s)
		return nil
	}, denials, stalled)
	if err != nil {
		return nil, err
	}
	m.reg = reg
	for s := range numSources {
		source := redlimit.Source(s).String()
		src := attribute.String("redlimit.source", source)
		for o := range numDecisionOutcomes {
			outcome := redlimit.Outcome(o).String()
			set := attribute.NewSet(src, attribute.String("redlimit.outcome", outcome))
			m.byDecision[s][o] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
		m.bySource[s] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(src))}
	}
	for _, name := range cfg.Rules {
		if m.byRule[name] != nil {
			continue
		}
		var opts [numOutcomes][]metric.AddOption
		rule := attribute.String("redlimit.rule", name)
		for o := range numOutcomes {
			outcome := redlimit.Outcome(o)
			set := attribute.NewSet(rule, attribute.String("redlimit.outcome", outcome.String()))
			opts[o] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
		m.byRule[name] = &opts
	}
	return m, nil
}

// Record records d; ctx goes to the instruments (exemplars). It builds no
// attribute set.
func (m *Metrics) Record(ctx context.Context, d *redlimit.Decision) {
	s := d.Source
	m.decisions.Add(ctx, 1, m.byDecision[s][d.Outcome()]...)
	m.latency.Record(ctx, d.Latency.Seconds(), m.bySource[s]...)
	for i := range d.Rules {
		rd := &d.Rules[i]
		opts := m.byRule[rd.Name]
		if opts == nil {
			m.unlisted.Add(ctx, 1)
			continue
		}
		m.rules.Add(ctx, 1, opts[d.RuleOutcome(i)]...)
	}
}

// HTTP is Record with the signature of middleware.Config.OnDecision: it
// records with the request's context.
func (m *Metrics) HTTP(r *http.Request, d *redlimit.Decision) { m.Record(r.Context(), d) }

// Engine is Record with the signature of redlimit.Config.OnDecision.
func (m *Metrics) Engine(ctx context.Context, d *redlimit.Decision) { m.Record(ctx, d) }

// RefundError counts a failed refund; it has the signature of
// redisstore.Config.OnRefundError. It ignores err: log it there if you
// need it.
func (m *Metrics) RefundError(error) { m.refunds.Add(context.Background(), 1) }

// SettleError counts a request whose charge after the response failed
// (a refund refused, failed or after the refund window, a cost out of
// range; a release of concurrency slots that failed) in the same counter as RefundError, with the request's context;
// it has the signature of middleware.Config.OnSettleError. It ignores
// err: the middleware's Logger logs it.
func (m *Metrics) SettleError(r *http.Request, _ error) { m.refunds.Add(r.Context(), 1) }

// Watch adds e's deny-cache hits (redlimit.Status.LocalDenials) and stalled
// backend calls (redlimit.Status.Stalled) to the observable instruments,
// read at each collection. Engines derived from one New (with With, or a
// middleware.Middleware's Engine and those of the Middlewares derived from
// it) share both: watch one of them.
func (m *Metrics) Watch(e *redlimit.Limiter) {
	if e == nil {
		return
	}
	m.mu.Lock()
	m.watched = append(m.watched, e)
	m.mu.Unlock()
}

// Close unregisters the callback that observes the watched engines. The
// counters keep recording.
func (m *Metrics) Close() error { return m.reg.Unregister() }

func (m *Metrics) observed() (denials uint64, stalled int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.watched {
		denials += e.Status().LocalDenials
		stalled += e.Status().Stalled
	}
	return denials, stalled
}

func validBuckets(b []float64) error {
	if len(b) == 0 {
		return &algorithms.ConfigError{Field: "Config.Buckets", Reason: "must hold at least one bound"}
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &algorithms.ConfigError{Field: "Config.Buckets", Reason: "must hold finite bounds"}
		}
		if i > 0 && v <= b[i-1] {
			return &algorithms.ConfigError{Field: "Config.Buckets", Reason: "must be strictly increasing"}
		}
	}
	return nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strconv.Quote(s)
}
