package middleware

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/headers"
)

// Config configures a [Middleware]. Only Rules is required.
type Config struct {
	// Rules are decided together for every request, in one backend call.
	Rules []Rule

	// Prefix starts every storage key:
	// "<Prefix>:<rule>:<algorithm tag>:{<key material>}" (see Rule.Name).
	// Default "rate". No braces, no spaces.
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
	// is not in-process is wrapped in an [denycache.Cache]: a key denied
	// with RetryAfter d is denied locally, without a backend call, until d
	// has passed (other instances can only consume more, never give
	// capacity back). Middlewares derived with With share it.
	NoDenyCache bool

	// DenyCache sizes the deny cache (default 65,536 denied keys).
	DenyCache denycache.Config

	// OnError is the error policy (default Fallback).
	OnError ErrorPolicy

	// FallbackBackend decides while the primary is down under the Fallback
	// policy. Default: a new memstore.Store.
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
	_, inProcess := backend.(*memstore.Store)
	if _, wrapped := backend.(*denycache.Cache); wrapped {
		cfg.NoDenyCache = true // already wrapped: With shares its parent's cache
	}
	if !inProcess && !cfg.NoDenyCache {
		dc, err := denycache.New(backend, cfg.DenyCache)
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
			mem, err := memstore.New(memstore.Config{})
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
