package middleware

import (
	"net/http"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// Rule is what the Middleware finds in a request for one rule of its
// [redlimit.Limiter]: the key material (Key) and, optionally, the
// request's tier, limit and cost, and whether it is exempt. The rule's
// limit, algorithm, missing-key policy, shadow mode and quota blocks are
// the Limiter's ([redlimit.Rule]). A rule is data; validate it by
// building a Middleware.
type Rule struct {
	// Name names the Limiter's rule (redlimit.Rule.Name) this Rule finds
	// the request's inputs of. Every rule of the Limiter has one Rule.
	Name string

	// Key returns the request's key material for this rule (the client IP,
	// the user, the route, ...). Required. A key func returning an error
	// wrapping [keyfunc.ErrNoKey] triggers the rule's MissingKey
	// (redlimit.Rule.MissingKey); any other error goes to the error
	// policy (redlimit.Config.OnError).
	Key keyfunc.Func

	// Tier names the request's tier (for example the user's plan): a tier
	// listed in the Limiter rule's Tiers gets that limit instead of its
	// Limit, and any other tier (or "") gets Limit. Required when the
	// Limiter's rule has Tiers, and refused when it has none. A key's
	// stored state carries over when its tier changes.
	Tier func(*http.Request) string

	// LimitFunc, when set, returns the request's limit, for limits that
	// are not known when the rule is built: the caller's plan, loaded from
	// a database or from what an authentication middleware stored in the
	// request's context. For HTTP requests it takes the place of the
	// Limiter rule's Limit and LimitFunc (redlimit.Input.Limit); those
	// still serve the Limiter's callers without a request
	// (redlimit.Limiter.Allow). Not with Tier, nor on a rule with Tiers. It
	// is called on every request that reaches the rule (after its Key is
	// found), so cache slow lookups; it must be safe for concurrent use
	// and must not modify the request. What it returns is validated under
	// the rule's Algorithm.
	//
	// An error, or a limit the Algorithm cannot enforce (the zero Limit
	// included), is never replaced by a default limit: the rule is not
	// decided for that request, the decision's RuleDecision.LimitFailed is
	// set and Decision.Err is an *[redlimit.LimitError] naming the rule.
	// The error policy then applies to that rule alone: under
	// redlimit.FailClosed ErrorHandler answers (503); under
	// redlimit.FailOpen and redlimit.Fallback the rule is left out and the
	// other rules still apply. Return a default plan for unknown callers
	// yourself if that is what you mean.
	LimitFunc func(*http.Request) (algorithms.Limit, error)

	// Exempt, when set, reports whether the request is exempt from this
	// rule (allowlisted): the rule is then left out, not charged, not in
	// the headers, and its RuleDecision reports Exempt; Key and the other
	// funcs are not called. The request still reaches the next handler
	// when the other rules allow it. See [ExemptCIDRs] for internal
	// networks, and Config.Exempt to exempt a request from every rule.
	Exempt func(*http.Request) bool

	// Cost, when set, returns how many units the request takes (default 1).
	// A cost of 0 counts as 1, as in [algorithms.Check]: every request that
	// reaches the rule takes something. A cost larger than the limit's
	// capacity is denied without Retry-After: waiting cannot help. A
	// negative cost refuses the request under every error policy
	// (ErrorHandler, 500; nothing consumed by any rule): the decision's
	// RuleDecision.InvalidCost is set and Decision.Err says which cost. A
	// shadow rule only reports that it would have denied.
	Cost func(*http.Request) int64

	// ResponseCost, when set, charges the request after the response:
	// "count only failed logins", "refund on 5xx". The Limiter's rule must
	// be refundable (redlimit.Rule.Refundable). The rule reserves the
	// request's Cost (default 1) when the request is decided, before the
	// handler runs, so a key already at its limit is denied up front and
	// requests in flight count against it; once the handler has returned
	// (or panicked), ResponseCost gets the response's status code (200
	// when the handler wrote nothing; 500 when it panicked before writing
	// a status; 101, http.StatusSwitchingProtocols, when it hijacked the
	// connection) and the body bytes it wrote through the ResponseWriter
	// (Write, WriteString, ReadFrom; not what went through a hijacked
	// connection), and returns what the request really cost, from 0 to
	// the reservation. It runs on the request's goroutine, once the
	// handler has returned. The rest is given back (redlimit.Limiter.Settle)
	// after the response, off its path (see Middleware.Handler): for
	// "count only failed logins", return 1 for a 401 or 403 and 0
	// otherwise.
	//
	// What is atomic: the check and the reservation, as for any rule
	// (one backend call with the request's other rules); the refund is a
	// second atomic call, made once, within redlimit.Config.RefundWindow
	// (a minute by default: a handler that runs longer keeps the whole
	// reservation). Between the two the reservation counts: a concurrent
	// request may be denied because of it (its denial is then
	// provisional, and the deny cache does not remember it). A cost
	// below 0 or above the reservation is an error (Config.OnSettleError
	// and the Limiter's Logger hear of it) and the reservation stays
	// charged: nothing is ever charged beyond what was checked.
	//
	// Only requests with a ResponseCost rule pay for it: their
	// ResponseWriter is wrapped to see the status and the bytes (the
	// wrapper has http.Flusher, http.Hijacker and io.ReaderFrom when,
	// and only when, the ResponseWriter it wraps has them, and reaches
	// the rest through Unwrap for http.ResponseController). It must be
	// safe for concurrent use.
	ResponseCost func(status int, written int64) int64
}

// rule is a Rule paired with what the Limiter knows of it.
type rule struct {
	Rule
	alg   algorithms.Algorithm // the Limiter rule's Algorithm
	stops bool                 // it denies a request without key material (DenyMissingKey, not in shadow mode)
}
