package middleware

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
)

// Config configures a [Middleware]. Only Rules is required.
type Config struct {
	// Rules are decided together for every request, in one backend call.
	Rules []Rule

	// Prefix starts every storage key: "<Prefix>:<rule>:{<key>}". Default
	// "rate". No braces, no spaces.
	Prefix string

	// Headers selects the response headers (default X-RateLimit-* with an
	// epoch reset, and Retry-After on 429).
	Headers headers.Writer

	// Timeout bounds each backend call (default 100ms; negative disables).
	// The call gets a context with this deadline, and the request stops
	// waiting at the deadline even when the backend's client ignores it
	// (go-redis honours context deadlines only with
	// Options.ContextTimeoutEnabled; otherwise its ReadTimeout, 5s by
	// default, applies): the call runs in a goroutine of its own (two more
	// scheduler hand-offs per request, about 40µs per Redis call on a small
	// VM), and a late one finishes in the background, its answer dropped.
	// Give the client timeouts no longer than this one anyway, so abandoned
	// calls do not pile up; past 1024 of them still running (per
	// Middleware), calls fail at once. A backend with a method
	// HonoursDeadline() bool that returns true promises to return by its
	// context's deadline and is called directly, without the goroutine. An
	// in-process Memory backend is never given a timeout: it cannot block.
	Timeout time.Duration

	// NoDenyCache turns off the local deny cache. By default a backend that
	// is not in-process is wrapped in an [algorithms.DenyCache]: a key denied
	// with RetryAfter d is denied locally, without a backend call, until d
	// has passed (other instances can only consume more, never give
	// capacity back). Middlewares derived with With share it.
	NoDenyCache bool

	// DenyCache sizes the deny cache (default 65,536 denied keys).
	DenyCache algorithms.DenyCacheConfig

	// OnError is the error policy (default Fallback).
	OnError ErrorPolicy

	// FallbackBackend decides while the primary is down under the Fallback
	// policy. Default: a new algorithms.Memory.
	FallbackBackend algorithms.Backend

	// ProbeInterval is how often, under the Fallback policy, a background
	// probe checks whether the primary is back (default 1s).
	ProbeInterval time.Duration

	// Denied answers denied requests (default DefaultDenied). The Decision
	// is in the request context (FromContext); the rate-limit headers are
	// already set.
	Denied http.Handler

	// ErrorHandler answers under the FailClosed policy (default
	// DefaultError, a 503). The Decision, with Err, is in the context.
	ErrorHandler http.Handler

	// Shadow puts every rule in shadow mode: decide, write headers, report,
	// never deny.
	Shadow bool

	// DecisionInContext stores the Decision in the context of requests that
	// go through too, for handlers that read it with FromContext. Off by
	// default: it costs two allocations per request.
	DecisionInContext bool

	// OnDecision, when set, is called with every decision, after it is made
	// and before the response is written. The Decision and its Rules are
	// valid only during the call (copy what you keep). Wire metrics here
	// (Prometheus, OpenTelemetry, ...).
	OnDecision func(*http.Request, *Decision)

	// Logger receives backend errors (Warn), fallback switches (Warn/Info)
	// and, at Debug, every decision. Default slog.Default().
	Logger *slog.Logger

	// Now is the wall clock for the epoch X-RateLimit-Reset header (default
	// time.Now). It does not affect decisions: those use the backend's clock.
	Now func() time.Time
}

// Middleware limits requests by its rules. Build it with [New]; it is safe
// for concurrent use. Close it when done to stop a fallback probe.
type Middleware struct {
	backend  algorithms.Backend
	fallback algorithms.Backend
	cfg      Config
	raw      Config // cfg as given, before defaults: With starts from it
	rules    []compiled
	timeout  time.Duration
	logger   *slog.Logger
	pool     sync.Pool
	health   *health
	errors   atomic.Int64 // errors not yet logged
	lastLog  atomic.Int64 // unix ns of the last error line
	stalled  atomic.Int64 // abandoned backend calls still running (see bounded)
	inline   bool         // the backend honours deadlines: no goroutine per call
	wallNow  bool         // cfg.Now is time.Now: reuse the time decide read
	timed    bool         // something besides debug logging reads Decision.Latency
}

// New returns a Middleware deciding with backend, configured by cfg.
// Invalid configuration is an error naming the rule and field, for example
//
//	redlimit: rule "login": Limit.Burst must be >= 0, got -1
func New(backend algorithms.Backend, cfg Config) (*Middleware, error) {
	if backend == nil {
		return nil, &algorithms.ConfigError{Field: "backend", Reason: "must not be nil"}
	}
	raw := cfg
	if cfg.Prefix == "" {
		cfg.Prefix = "rate"
	}
	if strings.ContainsAny(cfg.Prefix, "{} \t\r\n") {
		return nil, &algorithms.ConfigError{Field: "Config.Prefix", Reason: "must not contain braces or spaces, got " + quote(cfg.Prefix)}
	}
	if len(cfg.Rules) == 0 {
		return nil, &algorithms.ConfigError{Field: "Config.Rules", Reason: "must hold at least one rule"}
	}
	if err := cfg.Headers.Validate(); err != nil {
		return nil, err
	}
	if cfg.OnError > FailClosed {
		return nil, &algorithms.ConfigError{Field: "Config.OnError", Reason: "unknown policy " + cfg.OnError.String()}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = time.Second
	}
	// Latency costs two clock reads a request; measure it only when
	// something can read it (debug logging is checked per request).
	timed := cfg.OnDecision != nil || cfg.DecisionInContext || cfg.Denied != nil || cfg.ErrorHandler != nil
	if cfg.Denied == nil {
		cfg.Denied = DefaultDenied
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = DefaultError
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wallNow := cfg.Now == nil
	if wallNow {
		cfg.Now = time.Now
	}
	_, inProcess := backend.(*algorithms.Memory)
	if _, wrapped := backend.(*algorithms.DenyCache); wrapped {
		cfg.NoDenyCache = true // already wrapped: With shares its parent's cache
	}
	if !inProcess && !cfg.NoDenyCache {
		dc, err := algorithms.NewDenyCache(backend, cfg.DenyCache)
		if err != nil {
			return nil, err
		}
		backend = dc
	}
	m := &Middleware{backend: backend, cfg: cfg, raw: raw, timeout: cfg.Timeout, logger: cfg.Logger, wallNow: wallNow, timed: timed}
	if inProcess {
		m.timeout = -1
	}
	m.inline = honoursDeadline(backend)
	seen := map[string]bool{}
	for _, r := range cfg.Rules {
		c, err := compile(cfg.Prefix, r)
		if err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, &algorithms.ConfigError{Rule: r.Name, Field: "Name", Reason: "is used by two rules"}
		}
		seen[r.Name] = true
		m.rules = append(m.rules, c)
	}
	if cfg.OnError == Fallback {
		m.fallback = cfg.FallbackBackend
		if m.fallback == nil {
			mem, err := algorithms.NewMemory(algorithms.MemoryConfig{})
			if err != nil {
				return nil, err
			}
			m.fallback = mem
		}
		m.health = newHealth(m)
	}
	n := len(m.rules)
	m.pool.New = func() any {
		return &scratch{
			checks:   make([]algorithms.Check, 0, n),
			results:  make([]algorithms.Result, n),
			index:    make([]int, 0, n),
			policies: make([]headers.Policy, 0, n),
			dec:      Decision{Rules: make([]RuleDecision, n)},
		}
	}
	return m, nil
}

// With returns a new Middleware with the same backend and configuration
// and the given rules added after m's: per-route rules layered on shared
// ones, decided together in one call. It shares m's fallback state.
func (m *Middleware) With(rules ...Rule) (*Middleware, error) {
	cfg := m.raw
	cfg.Rules = append(append([]Rule(nil), m.cfg.Rules...), rules...)
	cfg.FallbackBackend = m.fallback
	n, err := New(m.backend, cfg)
	if err != nil {
		return nil, err
	}
	if m.health != nil {
		n.health = m.health
	}
	return n, nil
}

// LocalDenials returns how many requests the deny cache answered without a
// backend call (0 without a deny cache).
func (m *Middleware) LocalDenials() uint64 {
	if dc, ok := m.backend.(*algorithms.DenyCache); ok {
		return dc.LocalDenials()
	}
	return 0
}

// Close stops the fallback probe, if one runs. The Middleware keeps working.
func (m *Middleware) Close() error {
	if m.health != nil {
		m.health.close()
	}
	return nil
}

// scratch is the per-request working memory, pooled.
type scratch struct {
	checks   []algorithms.Check
	results  []algorithms.Result
	index    []int // rule index of each check
	policies []headers.Policy
	dec      Decision
	now      time.Time // when decide finished: the wall clock for headers when Config.Now is time.Now
}

type outcome uint8

const (
	pass outcome = iota
	deny
	fail // FailClosed
)

// Handler returns next wrapped by the limiter. Use it as a method value:
// r.With(mw.Handler), mw.Handler(mux).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := m.pool.Get().(*scratch)
		defer m.pool.Put(s)
		out := m.decide(r, s, m.timed)
		switch out {
		case pass:
			m.writeHeaders(w.Header(), s)
			if m.cfg.DecisionInContext {
				r = r.WithContext(withDecision(r.Context(), s.dec.clone()))
			}
			next.ServeHTTP(w, r)
		case deny:
			m.writeHeaders(w.Header(), s)
			m.cfg.Denied.ServeHTTP(w, r.WithContext(withDecision(r.Context(), s.dec.clone())))
		case fail:
			m.cfg.ErrorHandler.ServeHTTP(w, r.WithContext(withDecision(r.Context(), s.dec.clone())))
		}
	})
}

// Check decides r without writing anything: for code that decides inside a
// handler. The returned Decision is the caller's. A non-nil error is the
// one the error policy handled (also in Decision.Err); the Decision still
// says whether to proceed (Allowed) according to that policy.
func (m *Middleware) Check(r *http.Request) (*Decision, error) {
	s := m.pool.Get().(*scratch)
	defer m.pool.Put(s)
	m.decide(r, s, true)
	d := s.dec.clone()
	return d, d.Err
}

// WriteHeaders writes the rate-limit headers of a Decision returned by
// Check (the Handler writes them itself).
func (m *Middleware) WriteHeaders(h http.Header, d *Decision) {
	var pol []headers.Policy
	for i, rd := range d.Rules {
		if rd.Evaluated {
			pol = append(pol, m.policy(i, &rd))
		}
	}
	m.cfg.Headers.Write(h, m.cfg.Now(), pol)
	if d.Allowed && d.WouldDeny {
		h.Del("Retry-After") // shadow denials: the response is not a 429
	}
}

func (m *Middleware) policy(i int, rd *RuleDecision) headers.Policy {
	l := rd.limit
	if l.Rate <= 0 {
		l = m.limitOf(i, rd)
	}
	return headers.Policy{Name: rd.Name, Window: window(m.rules[i].Algorithm, l), Result: rd.Result}
}

// limitOf recovers the limit a rule used from its result's capacity, for a
// RuleDecision that does not record it (one built by the caller): the tier
// whose capacity matches, else the rule's Limit.
func (m *Middleware) limitOf(i int, rd *RuleDecision) algorithms.Limit {
	r := &m.rules[i]
	if r.Limit.Capacity(r.Algorithm) == rd.Result.Limit {
		return r.Limit
	}
	for _, l := range r.Tiers {
		if l.Capacity(r.Algorithm) == rd.Result.Limit {
			return l
		}
	}
	return r.Limit
}

func (m *Middleware) writeHeaders(h http.Header, s *scratch) {
	if m.cfg.Headers.Style == headers.None {
		return
	}
	s.policies = s.policies[:0]
	for i := range s.dec.Rules {
		rd := &s.dec.Rules[i]
		if rd.Evaluated {
			s.policies = append(s.policies, m.policy(i, rd))
		}
	}
	if len(s.policies) == 0 {
		return
	}
	now := s.now
	if !m.wallNow || now.IsZero() {
		now = m.cfg.Now()
	}
	m.cfg.Headers.Write(h, now, s.policies)
	if s.dec.Allowed && s.dec.WouldDeny {
		h.Del("Retry-After") // shadow denials: the response is not a 429
	}
}

// decide fills s.dec for r and returns what to do with the request. timed
// says whether to measure Decision.Latency.
func (m *Middleware) decide(r *http.Request, s *scratch, timed bool) outcome {
	debug := m.logger.Enabled(r.Context(), slog.LevelDebug)
	timed = timed || debug
	var start time.Time
	if timed {
		start = time.Now()
	}
	d := &s.dec
	*d = Decision{Rules: d.Rules[:len(m.rules)]}
	// Every rule starts afresh: build may stop at any rule, and what a
	// pooled scratch holds past it belongs to an earlier request.
	for i := range m.rules {
		d.Rules[i] = RuleDecision{Name: m.rules[i].Name, Shadow: m.rules[i].Shadow || m.cfg.Shadow}
	}
	s.checks, s.index = s.checks[:0], s.index[:0]
	out := m.build(r, s)
	if out == pass && len(s.checks) > 0 {
		out = m.evaluate(r.Context(), s)
	}
	s.now = time.Time{}
	if timed {
		s.now = time.Now()
		d.Latency = s.now.Sub(start)
	}
	m.report(r, d, debug)
	return out
}

// build runs the key funcs and fills s.checks. It returns deny for a
// missing key under DenyMissingKey, and applies the error policy to key
// func failures.
func (m *Middleware) build(r *http.Request, s *scratch) outcome {
	d := &s.dec
	for i := range m.rules {
		rule := &m.rules[i]
		rd := &d.Rules[i]
		material, err := rule.Key(r)
		if err != nil {
			if errors.Is(err, keyfunc.ErrNoKey) {
				if rule.MissingKey == SkipMissingKey {
					rd.Skipped = true
					continue
				}
				rd.MissingKey = true
				if rd.Shadow {
					d.WouldDeny = true
					continue
				}
				d.Allowed = false
				return deny
			}
			return m.policyFor(d, err, false)
		}
		limit := rule.Limit
		if rule.Tier != nil {
			if l, ok := rule.Tiers[rule.Tier(r)]; ok {
				limit = l
			}
		}
		var cost int64 = 1
		if rule.Cost != nil {
			cost = rule.Cost(r)
			if cost < 0 {
				return m.policyFor(d, &algorithms.ConfigError{Rule: rule.Name, Field: "Cost", Reason: "returned a negative cost"}, false)
			}
		}
		rd.Key = rule.keys.key(material)
		rd.limit = limit
		s.checks = append(s.checks, algorithms.Check{Key: rd.Key, Algorithm: rule.Algorithm, Limit: limit, Cost: cost})
		s.index = append(s.index, i)
	}
	d.Allowed = true
	return pass
}

// evaluate asks the backend (or the fallback) and applies shadow rules.
func (m *Middleware) evaluate(ctx context.Context, s *scratch) outcome {
	d := &s.dec
	backend, src := m.backend, SourcePrimary
	if m.health != nil && m.health.down.Load() {
		backend, src = m.fallback, SourceFallback
	}
	err := m.call(ctx, backend, s.checks, s.results)
	if err != nil && src == SourcePrimary && m.health != nil {
		// A request whose client has gone (its context canceled) says
		// nothing about the backend: fall back for it alone.
		if ctx.Err() == nil {
			m.health.failed(err)
		}
		backend, src = m.fallback, SourceFallback
		d.Err = err
		err = m.call(ctx, backend, s.checks, s.results)
	}
	if err != nil {
		return m.policyFor(d, err, true)
	}
	d.Source = src
	live, shadowDenied := true, false
	for j, i := range s.index {
		rd := &d.Rules[i]
		res := s.results[j]
		rd.Evaluated = res.Limit != 0
		rd.Result = res
		if rd.Evaluated && !res.Allowed {
			if rd.Shadow {
				shadowDenied = true
			} else {
				live = false
			}
		}
	}
	if d.WouldDeny || shadowDenied {
		d.WouldDeny = true
	}
	if !live {
		d.Allowed = false
		return deny
	}
	if shadowDenied {
		// The backend consumed nothing (all-or-nothing); charge the live
		// rules on their own.
		if out := m.chargeLive(ctx, backend, s); out != pass {
			return out
		}
	}
	d.Allowed = true
	return pass
}

// chargeLive re-runs the non-shadow checks of a request whose shadow rules
// denied, so the live rules are charged as if the shadow rules did not exist.
func (m *Middleware) chargeLive(ctx context.Context, backend algorithms.Backend, s *scratch) outcome {
	d := &s.dec
	var checks []algorithms.Check
	var idx []int
	for j, i := range s.index {
		if !d.Rules[i].Shadow {
			checks = append(checks, s.checks[j])
			idx = append(idx, i)
		}
	}
	if len(checks) == 0 {
		return pass
	}
	results := make([]algorithms.Result, len(checks))
	if err := m.call(ctx, backend, checks, results); err != nil {
		return m.policyFor(d, err, true)
	}
	for j, i := range idx {
		d.Rules[i].Result = results[j]
		d.Rules[i].Evaluated = results[j].Limit != 0
		if !results[j].Allowed {
			d.Allowed = false
			return deny
		}
	}
	return pass
}

func (m *Middleware) call(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) error {
	if m.timeout < 0 || b != m.backend {
		return b.Allow(ctx, checks, results)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return m.bounded(ctx, b, checks, results)
}

// policyFor applies the error policy to err. backendErr says whether the
// backend failed (Fallback then already tried the fallback backend).
func (m *Middleware) policyFor(d *Decision, err error, backendErr bool) outcome {
	d.Err = err
	d.Source = SourceNone
	for i := range d.Rules {
		d.Rules[i].Evaluated = false
		d.Rules[i].Result = algorithms.Result{}
	}
	m.logError(err)
	if m.cfg.OnError == FailClosed {
		d.Allowed = false
		return fail
	}
	d.Allowed = true
	return pass
}

// logError logs err at Warn, at most once a second, with the number of
// errors since the last line: an outage must not flood the log.
func (m *Middleware) logError(err error) {
	n := m.errors.Add(1)
	now := time.Now().UnixNano()
	last := m.lastLog.Load()
	if now-last < int64(time.Second) || !m.lastLog.CompareAndSwap(last, now) {
		return
	}
	m.errors.Add(-n)
	m.logger.Warn("redlimit: rate limit not decided", "err", err, "policy", m.cfg.OnError.String(), "errors", n)
}

func (m *Middleware) report(r *http.Request, d *Decision, debug bool) {
	if m.cfg.OnDecision != nil {
		m.cfg.OnDecision(r, d)
	}
	if debug {
		attrs := make([]any, 0, 8+2*len(d.Rules))
		attrs = append(attrs, "allowed", d.Allowed, "would_deny", d.WouldDeny, "source", d.Source.String(), "latency", d.Latency)
		for _, rd := range d.Rules {
			attrs = append(attrs, slog.Group(rd.Name, "key", rd.Key, "allowed", rd.Result.Allowed, "remaining", rd.Result.Remaining, "retry_after", rd.Result.RetryAfter, "skipped", rd.Skipped))
		}
		m.logger.Log(r.Context(), slog.LevelDebug, "redlimit: decision", attrs...)
	}
}
