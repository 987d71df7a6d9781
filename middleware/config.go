package middleware

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/after"
	"github.com/redlimit/redlimit/internal/contract"
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
	// default, applies): the call then runs in a goroutine of its own, and
	// a late one finishes in the background, its answer dropped. Give the
	// client timeouts no longer than this one anyway, so abandoned calls do
	// not pile up; past 1024 of them still running (per Middleware and
	// those derived from it), calls fail at once. A redisstore whose
	// client honours deadlines is called directly, without the goroutine;
	// a memstore is never given a timeout: it cannot block. See [redlimit.Config].
	Timeout time.Duration

	// NoDenyCache turns off the local deny cache. By default a backend
	// other than a memstore or a [denycache.Cache] is wrapped in a [denycache.Cache]: a key
	// denied with RetryAfter d is denied locally, without a backend call,
	// until d has passed (other instances can only consume more, never
	// give capacity back). Middlewares derived with With share it.
	NoDenyCache bool

	// DenyCache sizes the deny cache (default 65,536 denied keys).
	DenyCache denycache.Config

	// OnError is the error policy (default redlimit.Fallback). Under
	// redlimit.FailOpen the request goes through without rate-limit headers;
	// under redlimit.FailClosed ErrorHandler answers (503), and so it does
	// under redlimit.Fallback for a failed backend call until the instance
	// switches to its fallback (see FallbackAfter). A failing key func
	// (an error other than keyfunc.ErrNoKey) goes to the policy too, and
	// passes under redlimit.Fallback. A programmer error (a negative Cost,
	// an invalid limit from LimitFunc) is refused under every policy:
	// ErrorHandler answers (DefaultError: 500). See
	// docs/failure-policies.md.
	OnError redlimit.ErrorPolicy

	// FallbackBackend decides while the primary is down under the Fallback
	// policy. Default: a memstore.Store shared by every Middleware and
	// Engine of the process built on the same backend value (and those
	// derived with With), so that a key several of them decide is held to
	// the instance's share once (see docs/failure-policies.md).
	FallbackBackend algorithms.Backend

	// FallbackAfter is how long, under the Fallback policy, the primary
	// must fail every call before this instance switches to its fallback
	// (default 1s); until then a request whose call failed is refused
	// (ErrorHandler, 503). See [redlimit.Config].
	FallbackAfter time.Duration

	// ProbeInterval is how often, under the Fallback policy, a background
	// probe checks whether the primary is back once on the fallback
	// (default 1s).
	ProbeInterval time.Duration

	// Instances is how many instances (processes) share the limits: on
	// its fallback, each enforces 1/Instances of every limit, so the
	// fleet's fallbacks admit at most the limit. 0 (default): unknown,
	// each fallback enforces the whole limit (N instances: up to N times
	// the limit during an outage). See [redlimit.Config].
	Instances int

	// Denied answers denied requests (default DefaultDenied). The Decision
	// is in the request context (FromContext); the rate-limit headers are
	// already set.
	Denied http.Handler

	// MissingKeyDenied, when set, answers instead of Denied the requests
	// denied because a rule found no key in them (its MissingKey is
	// redlimit.DenyMissingKey), which no rule denied by rate: for APIs whose
	// key is a credential, set it to [Unauthorized] to answer 401 instead
	// of 429. Other denials still go to Denied. The Decision is in the
	// request context (FromContext).
	MissingKeyDenied http.Handler

	// ErrorHandler answers the requests refused undecided
	// (redlimit.Decision.Failed): a backend failure under FailClosed, or
	// under Fallback before the instance switched to its fallback; and a
	// programmer error under every policy. Default DefaultError: 500 for a
	// programmer error, 503 otherwise. The Decision, with Err, is in the
	// context.
	ErrorHandler http.Handler

	// Exempt, when set, reports whether the request is exempt from every
	// rule (allowlisted: internal networks, health checkers, an admin
	// key): it then goes to the next handler without a backend call,
	// without rate-limit headers, and with no rule's funcs called; every
	// RuleDecision reports Exempt. See [ExemptCIDRs], and Rule.Exempt to
	// exempt a request from one rule. It must be safe for concurrent use
	// and must not modify the request. Middlewares derived with With
	// keep it.
	Exempt func(*http.Request) bool

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
	OnDecision func(*http.Request, *redlimit.Decision)

	// RefundWindow is how long after a request's decision its
	// ResponseCost rules can still give back what the response did not
	// use (default 1 minute, at most 24 hours; see
	// redlimit.Config.RefundWindow).
	RefundWindow time.Duration

	// OnSettleError, when set, hears of every error of the work done
	// after a request's response: settling its ResponseCost rules (a
	// cost out of range, a refund that failed or came after
	// RefundWindow: the reservation then stays charged) and releasing
	// the slots of its concurrency rules (a release that failed or timed
	// out: the slots then come back when their leases expire). The
	// Logger hears of them too. It is called once the handler has
	// returned, usually from a worker goroutine after the response (see
	// Middleware.Handler), when the request's context is done already;
	// it must be safe for concurrent use. A panic in it is logged.
	OnSettleError func(*http.Request, error)

	// Logger receives backend errors (Warn), fallback switches (Warn/Info)
	// and, at Debug, every decision. Default slog.Default().
	Logger *slog.Logger

	// Now is the wall clock for the epoch X-RateLimit-Reset header (default
	// time.Now). It does not affect decisions: those use the backend's clock.
	Now func() time.Time
}

// New returns a Middleware deciding with backend, configured by cfg.
// Invalid configuration is an *[algorithms.ConfigError] naming the rule and
// field, for example
//
//	redlimit: rule "login": Limit.Burst must be >= 0, got -1
func New(backend algorithms.Backend, cfg Config) (*Middleware, error) {
	if backend == nil {
		return nil, &algorithms.ConfigError{Field: "backend", Reason: "must not be nil"}
	}
	if err := cfg.Headers.Validate(); err != nil {
		return nil, err
	}
	rules, err := engineRules(cfg.Rules)
	if err != nil {
		return nil, err
	}
	e, err := redlimit.New(backend, redlimit.Config{
		Rules:           rules,
		Prefix:          cfg.Prefix,
		Timeout:         cfg.Timeout,
		NoDenyCache:     cfg.NoDenyCache,
		DenyCache:       cfg.DenyCache,
		OnError:         cfg.OnError,
		FallbackBackend: cfg.FallbackBackend,
		FallbackAfter:   cfg.FallbackAfter,
		ProbeInterval:   cfg.ProbeInterval,
		Instances:       cfg.Instances,
		Shadow:          cfg.Shadow,
		RefundWindow:    cfg.RefundWindow,
		Logger:          cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	// Latency costs two clock reads a request; measure it only when
	// something can read it (debug logging is the engine's affair).
	timed := cfg.OnDecision != nil || cfg.DecisionInContext || cfg.Denied != nil || cfg.ErrorHandler != nil || cfg.MissingKeyDenied != nil
	if cfg.Denied == nil {
		cfg.Denied = DefaultDenied
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = DefaultError
	}
	wallNow := cfg.Now == nil
	if wallNow {
		cfg.Now = time.Now
	}
	m := newMiddleware(e, cfg, timed, wallNow, newAfter(after.Workers, after.Size))
	m.localPrimary = inProcess(backend)
	m.localFallback = cfg.FallbackBackend == nil || inProcess(cfg.FallbackBackend)
	return m, nil
}

// inProcess reports whether b decides in process, without I/O
// (memstore): its releases and refunds are made at once.
func inProcess(b algorithms.Backend) bool { return contract.TraitsOf(b).InProcess }

// newMiddleware returns the Middleware of e, whose rules are cfg.Rules,
// doing its work after responses on a.
func newMiddleware(e *redlimit.Limiter, cfg Config, timed, wallNow bool, a *after.Queue[job]) *Middleware {
	m := &Middleware{engine: e, cfg: cfg, timed: timed, wallNow: wallNow, settles: settles(cfg.Rules), after: a}
	for _, r := range e.Rules() { // Shadow set on every rule under Config.Shadow
		m.holds = m.holds || r.Algorithm == algorithms.Concurrency
		m.stopsMissing = append(m.stopsMissing, r.MissingKey == redlimit.DenyMissingKey && !r.Shadow)
	}
	n := len(cfg.Rules)
	m.pool.New = func() any {
		return &scratch{
			in:       make([]redlimit.Input, n),
			policies: make([]headers.Policy, 0, n),
			dec:      redlimit.Decision{Rules: make([]redlimit.RuleDecision, n)},
		}
	}
	return m
}

// With returns a new Middleware with the same backend and configuration
// and the given rules added after m's: per-route rules layered on shared
// ones, decided together in one call. It shares m's deny cache, fallback
// and probe; only the new rules are validated.
func (m *Middleware) With(rules ...Rule) (*Middleware, error) {
	er, err := engineRules(rules)
	if err != nil {
		return nil, err
	}
	e, err := m.engine.With(er...)
	if err != nil {
		return nil, err
	}
	cfg := m.cfg
	cfg.Rules = append(append([]Rule(nil), m.cfg.Rules...), rules...)
	d := newMiddleware(e, cfg, m.timed, m.wallNow, m.after)
	d.localPrimary, d.localFallback = m.localPrimary, m.localFallback
	return d, nil
}
