package middleware

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/after"
	"github.com/redlimit/redlimit/internal/bridge"
)

// Config configures a [Middleware]: what only HTTP needs. The limits, the
// storage prefix, the timeout, the error policy, the fallback, shadow
// mode, the clock and the logger are the [redlimit.Limiter]'s
// ([redlimit.Config]). Only Rules is required.
type Config struct {
	// Rules gives the request's funcs of each rule of the Limiter: one
	// Rule per rule, named after it (Rule.Name), in any order.
	Rules []Rule

	// Headers selects the response headers (default X-RateLimit-* with an
	// epoch reset, and Retry-After on 429). The epoch reset is read on the
	// Limiter's clock (redlimit.Config.Now).
	Headers headers.Writer

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
	// under Fallback before the instance switched to its fallback; a key
	// func's error under FailClosed; and a programmer error under every
	// policy (redlimit.Config.OnError, docs/failure-policies.md). Default
	// DefaultError: 500 for a programmer error, 503 otherwise. The
	// Decision, with Err, is in the context.
	ErrorHandler http.Handler

	// Exempt, when set, reports whether the request is exempt from every
	// rule (allowlisted: internal networks, health checkers, an admin
	// key): it then goes to the next handler without a backend call,
	// without rate-limit headers, and with no rule's funcs called; every
	// RuleDecision reports Exempt. See [ExemptCIDRs], and Rule.Exempt to
	// exempt a request from one rule. It must be safe for concurrent use
	// and must not modify the request.
	Exempt func(*http.Request) bool

	// DecisionInContext stores the Decision in the context of requests that
	// go through too, for handlers that read it with FromContext. Off by
	// default: it costs two allocations per request.
	DecisionInContext bool

	// OnDecision, when set, is called with every decision of an HTTP
	// request, after it is made and before the response is written (the
	// Limiter's own redlimit.Config.OnDecision hears of it too, without
	// the request). The Decision and its Rules are valid only during the
	// call (copy what you keep). Wire metrics here (Prometheus,
	// OpenTelemetry, ...).
	OnDecision func(*http.Request, *redlimit.Decision)

	// OnSettleError, when set, hears of every error of the work done
	// after a request's response: settling its ResponseCost rules (a
	// cost out of range, a refund that failed or came after
	// redlimit.Config.RefundWindow: the reservation then stays charged)
	// and releasing the slots of its concurrency rules (a release that
	// failed or timed out: the slots then come back when their leases
	// expire). The Limiter's Logger hears of them too. It is called once
	// the handler has returned, usually from a worker goroutine after the
	// response (see Middleware.Handler), when the request's context is
	// done already; it must be safe for concurrent use. A panic in it is
	// logged.
	OnSettleError func(*http.Request, error)
}

// New returns a Middleware that decides requests with lim, configured by
// cfg: every rule of lim needs a Rule in cfg.Rules, naming it, to find
// its key material in a request. Invalid configuration is an
// *[algorithms.ConfigError] naming the rule and field, for example
//
//	redlimit: rule "login": Name names no rule of the Limiter (its rules: "ip")
//
// The Middleware does not own lim: Close the Limiter yourself, after the
// Middleware.
func New(lim *redlimit.Limiter, cfg Config) (*Middleware, error) {
	return build(lim, cfg, nil)
}

// build returns the Middleware of lim and cfg, doing its work after
// responses on a (a new queue when nil).
func build(lim *redlimit.Limiter, cfg Config, a *after.Queue[job]) (*Middleware, error) {
	if lim == nil {
		return nil, &algorithms.ConfigError{Field: "lim", Reason: "must not be nil"}
	}
	if err := cfg.Headers.Validate(); err != nil {
		return nil, err
	}
	rules, err := pair(lim.Rules(), cfg.Rules)
	if err != nil {
		return nil, err
	}
	// Latency costs two clock reads a request; measure it only when
	// something can read it (debug logging is the limiter's affair).
	timed := cfg.OnDecision != nil || cfg.DecisionInContext || cfg.Denied != nil || cfg.ErrorHandler != nil || cfg.MissingKeyDenied != nil
	if cfg.Denied == nil {
		cfg.Denied = DefaultDenied
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = DefaultError
	}
	if a == nil {
		a = newAfter(after.Workers, after.Size)
	}
	tr := bridge.LimiterTraits.(func(*redlimit.Limiter) bridge.Traits)(lim)
	m := &Middleware{
		lim:           lim,
		cfg:           cfg,
		rules:         rules,
		timed:         timed,
		now:           tr.Now,
		wallNow:       !tr.Injected,
		log:           tr.Logger,
		after:         a,
		localPrimary:  lim.Status().InProcess,
		localFallback: tr.LocalFallback,
	}
	for i := range rules {
		m.holds = m.holds || rules[i].alg == algorithms.Concurrency
		m.settles = m.settles || rules[i].ResponseCost != nil
	}
	if m.now == nil { // a Limiter always has a clock; keep the headers safe anyway
		m.now, m.wallNow = time.Now, true
	}
	n := len(rules)
	m.pool.New = func() any {
		return &scratch{
			in:       make([]redlimit.Input, n),
			policies: make([]headers.Policy, 0, n),
			dec:      redlimit.Decision{Rules: make([]redlimit.RuleDecision, n)},
		}
	}
	return m, nil
}

// pair returns the HTTP rule of each of the limiter's rules lr, in the
// limiter's order, from the Rules of a Config, checking that each names
// a rule of the limiter, once, with the funcs that rule takes.
func pair(lr []redlimit.Rule, rules []Rule) ([]rule, error) {
	out := make([]rule, len(lr))
	seen := make([]bool, len(lr))
	for _, r := range rules {
		fail := func(field, reason string) ([]rule, error) {
			return nil, &algorithms.ConfigError{Rule: r.Name, Field: field, Reason: reason}
		}
		i := slices.IndexFunc(lr, func(l redlimit.Rule) bool { return l.Name == r.Name })
		if i < 0 {
			return fail("Name", "names no rule of the Limiter (its rules: "+names(lr)+")")
		}
		l := &lr[i]
		switch {
		case seen[i]:
			return fail("Name", "is used by two rules")
		case r.Key == nil:
			return fail("Key", "must be set (a keyfunc.Func)")
		case r.LimitFunc != nil && r.Tier != nil:
			return fail("Tier", "must be nil when LimitFunc is set: a request's limit comes from its tier or from LimitFunc")
		case r.LimitFunc != nil && l.Tiers != nil:
			return fail("LimitFunc", "must be nil: the Limiter's rule has Tiers, chosen by Tier")
		case r.Tier != nil && len(l.Tiers) == 0:
			return fail("Tier", "must be nil: the Limiter's rule has no Tiers (redlimit.Rule.Tiers)")
		case r.Tier == nil && r.LimitFunc == nil && len(l.Tiers) > 0:
			return fail("Tier", "must be set: the Limiter's rule has Tiers (redlimit.Rule.Tiers)")
		case r.ResponseCost != nil && !l.Refundable:
			return fail("ResponseCost", "needs a refundable rule: set redlimit.Rule.Refundable on the Limiter's rule")
		}
		seen[i] = true
		out[i] = rule{Rule: r, alg: l.Algorithm, stops: l.MissingKey == redlimit.DenyMissingKey && !l.Shadow}
	}
	for i, ok := range seen {
		if !ok {
			return nil, &algorithms.ConfigError{Rule: lr[i].Name, Field: "Config.Rules", Reason: "has no Rule for this rule of the Limiter: give it a Rule with its Key"}
		}
	}
	return out, nil
}

// names lists the names of rules, quoted.
func names(rules []redlimit.Rule) string {
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + r.Name + `"`)
	}
	return b.String()
}
