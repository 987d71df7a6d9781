package middleware

import (
	"context"
	"net/http"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// Rule is one limit applied to requests: whose requests (Key), how many
// (Limit, a per-tier limit, or a limit per request from LimitFunc) and how
// (Algorithm). A rule is data; validate it by building a Middleware.
type Rule struct {
	// Name identifies the rule in storage keys, headers, logs and hooks:
	// 1 to 64 characters from [A-Za-z0-9_.-], unique within a Middleware.
	//
	// A rule stores its state under "<prefix>:<name>:<tag>:{<material>}",
	// where tag names the algorithm ("fw" fixed window, "sl" sliding log,
	// "sw" sliding window, "tb" token bucket, "gcra") and material is the
	// sanitised key material (see Config.Prefix). A deploy that changes a
	// rule's algorithm therefore starts that rule afresh, never reading
	// another algorithm's state; changing its Limit or tier keeps the state
	// (see Tier). The braces are the Redis Cluster hash tag: every rule of
	// one key material lives in one hash slot.
	Name string

	// Key returns the request's key material for this rule (the client IP,
	// the user, the route, ...). Required. A key func returning an error
	// wrapping [keyfunc.ErrNoKey] triggers MissingKey; any other error goes
	// to the error policy.
	Key keyfunc.Func

	// Algorithm and Limit say how many requests a key may make.
	Algorithm algorithms.Algorithm
	Limit     algorithms.Limit

	// Tier, when set, names the request's tier (for example the user's plan);
	// a tier listed in Tiers gets that limit instead of Limit, and any other
	// tier (or "") gets Limit. All limits are validated by New. A key's
	// stored state carries over when its tier changes.
	Tier  func(*http.Request) string
	Tiers map[string]algorithms.Limit

	// LimitFunc, when set, returns the request's limit, for limits that are
	// not known when the rule is built: the caller's plan, loaded from a
	// database or from what an authentication middleware stored in the
	// request's context. Limit, Tier and Tiers must then be unset. It is
	// called on every request that reaches the rule (after its Key is
	// found), so cache slow lookups; it must be safe for concurrent use and
	// must not modify the request. What it returns is validated under
	// Algorithm.
	//
	// A key's stored state carries over when its limit changes (see
	// [algorithms.Check]), and the deny cache holds a denial only for the
	// limit it was made under: a key whose limit grows is decided afresh
	// at once.
	//
	// An error, or a limit Algorithm cannot enforce (the zero Limit
	// included), is never replaced by a default limit: the rule is not
	// decided for that request, the decision's RuleDecision.LimitFailed is
	// set and Decision.Err is an *[redlimit.LimitError] naming the rule. The
	// error policy then applies to that rule alone: under redlimit.FailClosed
	// ErrorHandler answers (503); under redlimit.FailOpen and redlimit.Fallback
	// the rule is left out and the other rules still apply. Return a
	// default plan for unknown callers yourself if that is what you mean.
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
	// negative cost denies the request under every error policy (429
	// without Retry-After, nothing consumed by any rule): the decision's
	// RuleDecision.InvalidCost is set and Decision.Err says which cost. A
	// shadow rule only reports that it would have denied.
	Cost func(*http.Request) int64

	// ResponseCost, when set, charges the request after the response:
	// "count only failed logins", "refund on 5xx". The rule reserves the
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
	// and the Logger hear of it) and the reservation stays charged:
	// nothing is ever charged beyond what was checked.
	//
	// Only requests with a ResponseCost rule pay for it: their
	// ResponseWriter is wrapped to see the status and the bytes (the
	// wrapper has http.Flusher, http.Hijacker and io.ReaderFrom when,
	// and only when, the ResponseWriter it wraps has them, and reaches
	// the rest through Unwrap for http.ResponseController), and their
	// keys get refund markers in the store for the refund window. It
	// must be safe for concurrent use.
	ResponseCost func(status int, written int64) int64

	// Blocks, when set, turns on quota blocks for the rule: most checks
	// of a hot key answered from units already charged in the store, k at
	// a time, exactly (see redlimit.Rule.Blocks and docs/leasing.md). Fixed
	// window, sliding window, token bucket and GCRA rules, without
	// ResponseCost or Shadow; Close the Middleware when done to give back
	// what the blocks hold.
	Blocks *redlimit.BlockConfig

	// MissingKey says what happens when Key finds no key material
	// (keyfunc.ErrNoKey): redlimit.DenyMissingKey (the zero value) answers
	// 429 without Retry-After, the decision naming the rule;
	// redlimit.SkipMissingKey leaves the rule out for this request. To fall
	// back to another key instead, use [keyfunc.Or] as the Key.
	MissingKey redlimit.MissingKey

	// Shadow decides and reports the rule but never denies with it.
	Shadow bool
}

// engineRules checks what the engine does not know of rules (their key
// funcs, tier funcs) and returns their engine rules.
func engineRules(rules []Rule) ([]redlimit.Rule, error) {
	out := make([]redlimit.Rule, len(rules))
	for i, r := range rules {
		fail := func(field, reason string) ([]redlimit.Rule, error) {
			return nil, &algorithms.ConfigError{Rule: r.Name, Field: field, Reason: reason}
		}
		switch {
		case r.Key == nil:
			return fail("Key", "must be set (a keyfunc.Func)")
		case r.LimitFunc != nil && r.Tiers != nil:
			return fail("Tiers", "must be nil when LimitFunc is set: a rule takes its limit from Limit and Tiers, or from LimitFunc")
		case r.Tiers != nil && r.Tier == nil:
			return fail("Tier", "must be set when Tiers is")
		case r.LimitFunc != nil && r.Tier != nil:
			return fail("Tier", "must be nil when LimitFunc is set: a rule takes its limit from Limit and Tiers, or from LimitFunc")
		case r.Tier != nil && len(r.Tiers) == 0:
			return fail("Tiers", "must list at least one tier when Tier is set")
		}
		out[i] = redlimit.Rule{Name: r.Name, Algorithm: r.Algorithm, Limit: r.Limit, Tiers: r.Tiers, MissingKey: r.MissingKey, Shadow: r.Shadow}
		out[i].Refundable = r.ResponseCost != nil
		out[i].Blocks = r.Blocks
		if r.LimitFunc != nil {
			// The middleware calls r.LimitFunc on the request and passes its
			// outcome in Input.Limit or Input.LimitErr; the engine calls
			// this one only when that Limit is the zero Limit, which it then
			// reports as invalid.
			out[i].LimitFunc = zeroLimit
		}
	}
	return out, nil
}

// zeroLimit is the engine's LimitFunc of a rule whose limit the middleware
// finds itself.
func zeroLimit(context.Context, string) (algorithms.Limit, error) { return algorithms.Limit{}, nil }
