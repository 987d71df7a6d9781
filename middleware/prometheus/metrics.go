package promlimit

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/rulename"
)

// DefaultBuckets are the latency histogram's upper bounds in seconds, from
// 50µs (an in-process decision, a deny-cache hit) to 1s (a timeout).
var DefaultBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Config configures [Metrics]. Only Rules is required.
type Config struct {
	// Rules names the rules whose decisions are counted per rule: every
	// rule of the Middlewares and Engines that report to the Metrics
	// (those derived with With included). Names are those of
	// redlimit.Rule.Name (1 to 64 characters from [A-Za-z0-9_.-]); a name
	// listed twice counts once. A decision about a rule not listed here is
	// counted in redlimit_unlisted_rule_decisions_total.
	Rules []string

	// Buckets are the upper bounds, in seconds and increasing, of the
	// latency histogram. Default [DefaultBuckets].
	Buckets []float64
}

// Metrics counts redlimit's decisions for Prometheus. It is a
// [prometheus.Collector]: register it once. Build it with [New]; it is
// safe for concurrent use. Its methods [Metrics.HTTP], [Metrics.Engine],
// [Metrics.SettleError] and [Metrics.RefundError] are the hooks of
// middleware.Config (OnDecision, OnSettleError), redlimit.Config and
// redisstore.Config.
type Metrics struct {
	decisions  *prometheus.CounterVec
	rules      *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	unlisted   prometheus.Counter
	refunds    prometheus.Counter
	denials    prometheus.CounterFunc
	stalled    prometheus.GaugeFunc
	byDecision [numSources][numDecisionOutcomes]prometheus.Counter
	bySource   [numSources]prometheus.Observer
	byRule     map[string]*[numOutcomes]prometheus.Counter
	mu         sync.Mutex
	watched    []*redlimit.Limiter
	collectors []prometheus.Collector
}

// numOutcomes is how many Outcomes there are: OutcomeUnevaluated is the
// last.
const numOutcomes = int(redlimit.OutcomeUnevaluated) + 1

var _ prometheus.Collector = (*Metrics)(nil)

// New returns Metrics for the rules cfg names, every series at zero.
// Invalid configuration is an *[algorithms.ConfigError] naming the field.
func New(cfg Config) (*Metrics, error) {
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
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_decisions_total",
			Help: "Rate-limit decisions (one per request), by the backend that decided and outcome.",
		}, []string{"source", "outcome"}),
		rules: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_rule_decisions_total",
			Help: "Each rule's part of the rate-limit decisions, by rule and the rule's own outcome.",
		}, []string{"rule", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redlimit_decision_duration_seconds",
			Help:    "Time spent deciding a request, backend call included, by the backend that decided.",
			Buckets: cfg.Buckets,
		}, []string{"source"}),
		unlisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redlimit_unlisted_rule_decisions_total",
			Help: "Rule decisions about rules the metrics were not configured with (not counted per rule).",
		}),
		refunds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redlimit_refund_errors_total",
			Help: "Refunds that failed: cluster compensation and charges after the response. Their units stay consumed.",
		}),
		byRule: make(map[string]*[numOutcomes]prometheus.Counter, len(cfg.Rules)),
	}
	m.denials = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "redlimit_local_denials_total",
		Help: "Requests the local deny cache denied without a backend call.",
	}, m.localDenials)
	m.stalled = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "redlimit_stalled_backend_calls",
		Help: "Backend calls that outlived the timeout and still run in the background.",
	}, m.stalledCalls)
	for s := range numSources {
		source := redlimit.Source(s).String()
		for o := range numDecisionOutcomes {
			outcome := redlimit.Outcome(o).String()
			m.byDecision[s][o] = m.decisions.WithLabelValues(source, outcome)
		}
		m.bySource[s] = m.latency.WithLabelValues(source)
	}
	for _, name := range cfg.Rules {
		if m.byRule[name] != nil {
			continue
		}
		var c [numOutcomes]prometheus.Counter
		for o := range numOutcomes {
			outcome := redlimit.Outcome(o)
			c[o] = m.rules.WithLabelValues(name, outcome.String())
		}
		m.byRule[name] = &c
	}
	m.collectors = []prometheus.Collector{m.decisions, m.rules, m.latency, m.unlisted, m.refunds, m.denials, m.stalled}
	return m, nil
}

// Observe counts d. It allocates nothing.
func (m *Metrics) Observe(d *redlimit.Decision) {
	s := d.Source
	m.byDecision[s][d.Outcome()].Inc()
	m.bySource[s].Observe(d.Latency.Seconds())
	for i := range d.Rules {
		rd := &d.Rules[i]
		c := m.byRule[rd.Name]
		if c == nil {
			m.unlisted.Inc()
			continue
		}
		c[d.RuleOutcome(i)].Inc()
	}
}

// HTTP is Observe with the signature of middleware.Config.OnDecision.
func (m *Metrics) HTTP(_ *http.Request, d *redlimit.Decision) { m.Observe(d) }

// Engine is Observe with the signature of redlimit.Config.OnDecision.
func (m *Metrics) Engine(_ context.Context, d *redlimit.Decision) { m.Observe(d) }

// RefundError counts a failed refund; it has the signature of
// redisstore.Config.OnRefundError. It ignores err: log it there if you
// need it.
func (m *Metrics) RefundError(error) { m.refunds.Inc() }

// SettleError counts a request whose charge after the response failed
// (a refund refused, failed or after the refund window, a cost out of
// range; a release of concurrency slots that failed) in the same counter
// as RefundError; it has the signature of
// middleware.Config.OnSettleError. It ignores r and err: the
// middleware's Logger logs the error.
func (m *Metrics) SettleError(*http.Request, error) { m.refunds.Inc() }

// Watch adds e's deny-cache hits (redlimit.Status.LocalDenials) and stalled
// backend calls (redlimit.Status.Stalled) to the metrics, read at each
// scrape. Engines derived from one New (with With, or a
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

func (m *Metrics) localDenials() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint64
	for _, e := range m.watched {
		n += e.Status().LocalDenials
	}
	return float64(n)
}

func (m *Metrics) stalledCalls() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, e := range m.watched {
		n += e.Status().Stalled
	}
	return float64(n)
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors {
		c.Collect(ch)
	}
}

func validBuckets(b []float64) error {
	if len(b) == 0 {
		return &algorithms.ConfigError{Field: "Config.Buckets", Reason: "must hold at least one bound"}
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, -1) || (math.IsInf(v, 1) && i != len(b)-1) {
			return &algorithms.ConfigError{Field: "Config.Buckets", Reason: "must hold finite bounds (+Inf last only)"}
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
