package redlimit

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/rulename"
)

// Rule is one limit: how many (Limit, a per-tier limit, or a limit per
// key from LimitFunc) and how (Algorithm), for the key material the caller
// gives in each [Input]. A rule is data; validate it by building an
// [Limiter].
type Rule struct {
	// Name identifies the rule in storage keys, logs and hooks: 1 to 64
	// characters from [A-Za-z0-9_.-], unique within an Limiter.
	//
	// A rule stores its state under "<prefix>:<name>:<tag>:{<material>}",
	// where tag names the algorithm ("fw" fixed window, "sl" sliding log,
	// "sw" sliding window, "tb" token bucket, "gcra", "cc" concurrency) and material is the
	// sanitised key material (see Config.Prefix). A deploy that changes a
	// rule's algorithm therefore starts that rule afresh, never reading
	// another algorithm's state; changing its Limit or tier keeps the state.
	// The braces are the Redis Cluster hash tag: every rule of one key
	// material lives in one hash slot.
	Name string

	// Algorithm and Limit say how many requests a key may make.
	Algorithm algorithms.Algorithm
	Limit     algorithms.Limit

	// Tiers maps tier names to limits: an Input whose Tier is listed gets
	// that limit instead of Limit; any other tier (or "") gets Limit. All
	// limits are validated by New. A key's stored state carries over when
	// its tier changes.
	Tiers map[string]algorithms.Limit

	// LimitFunc, when set, gives the rule's limit per request, for limits
	// that are not known when the rule is built: a customer's plan loaded
	// from a database. Limit and Tiers must then be unset. Decide calls it
	// with its context and the Input's key material, for every Input that
	// applies (not exempt, not missing, not carrying an Input.Limit), and
	// validates what it returns under Algorithm. It is called on every
	// request: cache slow lookups. It must be safe for concurrent use.
	//
	// A key's stored state carries over when its limit changes (see
	// [algorithms.Check]), and the deny cache holds a denial only for the
	// limit it was made under: a key whose limit grows is decided afresh
	// at once.
	//
	// An error, or a limit Algorithm cannot enforce, is never replaced by
	// a default limit: the rule is not decided for that request, its
	// RuleDecision.LimitFailed is set and Decision.Err is a *[LimitError]
	// naming the rule. Under FailClosed the request is refused (Failed);
	// under FailOpen and Fallback (nothing to fall back to: the limit is
	// unknown) the rule is left out and the other rules still apply. A
	// shadow rule is only left out.
	LimitFunc func(ctx context.Context, material string) (algorithms.Limit, error)

	// MissingKey says what happens to an Input without key material.
	MissingKey MissingKey

	// Shadow decides and reports the rule but never denies with it.
	Shadow bool

	// Refundable lets what the rule charges be given back after the
	// decision, within Config.RefundWindow, through Limiter.Settle:
	// "charge after the response", where a request
	// reserves its cost when it is decided and gives back what the work
	// did not use ("count only failed logins"). A refundable rule costs
	// the store a few marker keys per decision (see
	// algorithms.Check.RefundWindow); every process sharing the rule's
	// keys must agree on it.
	Refundable bool

	// Blocks, when set, turns on quota blocks for the rule ("quota
	// leasing", not to be confused with the leases of concurrency slots):
	// the Limiter takes a hot key's units from the store k at a time, in
	// one atomic call that charges them as k requests would, answers up
	// to k checks of the key from memory, and gives back what it did not
	// use, at most once. The sum admitted by every instance never exceeds
	// the limit. Fixed window (calendar quotas included) and sliding
	// window rules, whose backend must be an [algorithms.Refunder]; token
	// bucket and GCRA rules, whose backend must be an [algorithms.Blocker]
	// (memstore and redisstore are both): a bucket's block is used within
	// its hold (Hold, at most a quarter of the bucket's full window) and
	// never given back. Not with Shadow or Refundable. A
	// fixed window rule with blocks keeps its keys' epochs in sibling keys
	// "<key>:epoch" (and "<key>:epoch<j>" past 63 resets in a window) and,
	// after a reset, its state in "<key>:e<n>"; its capacity (Limit and
	// Tiers) must be below 2^39, since a reset closes the key it leaves
	// with 2^39 units. See [BlockConfig] and docs/leasing.md.
	Blocks *BlockConfig
}

// MissingKey is what a rule does with a request for which the caller found
// no key material (Input.Missing): an anonymous request to a per-user rule,
// a request without an API key. Never a silent shared bucket.
type MissingKey uint8

const (
	// DenyMissingKey (the zero value) denies the request, the decision
	// naming the rule. A request that cannot be identified does not pass a
	// rule that needs to identify it.
	DenyMissingKey MissingKey = iota

	// SkipMissingKey leaves the rule out for this request: the other rules
	// still apply. Typical for per-user rules that anonymous clients may
	// pass, next to a per-IP rule.
	SkipMissingKey
)

// compiled is a validated rule.
type compiled struct {
	Rule
	keys   *keyCache  // builds "<prefix>:<name>:<tag>:{<material>}"
	blocks *blockRule // nil unless Rule.Blocks
}

func compile(prefix string, r Rule) (compiled, error) {
	name := r.Name
	fail := func(field, reason string) (compiled, error) {
		return compiled{}, &algorithms.ConfigError{Rule: name, Field: field, Reason: reason}
	}
	switch {
	case !rulename.Valid(r.Name):
		return fail("Name", "must be 1-64 characters from [A-Za-z0-9_.-], got "+quote(r.Name))
	case r.MissingKey > SkipMissingKey:
		return fail("MissingKey", "unknown value")
	case r.Refundable && r.Algorithm == algorithms.Concurrency:
		return fail("Refundable", "must be false for concurrency: its slots are released when the work ends, never refunded")
	}
	if r.LimitFunc != nil {
		switch {
		case r.Limit != (algorithms.Limit{}):
			return fail("Limit", "must be the zero Limit when LimitFunc is set, got "+r.Limit.String())
		case r.Tiers != nil:
			return fail("Tiers", "must be nil when LimitFunc is set: a rule takes its limit from Limit and Tiers, or from LimitFunc")
		case !r.Algorithm.Valid():
			return fail("Algorithm", "must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got "+r.Algorithm.String())
		}
	} else if err := r.Limit.Validate(r.Algorithm); err != nil {
		return compiled{}, contract.WithRule(err, name)
	}
	if err := compileBlocks(&r); err != nil {
		return compiled{}, err
	}
	for _, tier := range slices.Sorted(maps.Keys(r.Tiers)) { // sorted: the same error every time
		if err := r.Tiers[tier].Validate(r.Algorithm); err != nil {
			ce := contract.WithRule(err, name).(*algorithms.ConfigError)
			ce.Field = "Tiers[" + quote(tier) + "]." + ce.Field
			return compiled{}, ce
		}
	}
	return compiled{Rule: r, keys: newKeyCache(keyPrefix(prefix, r.Name, r.Algorithm))}, nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return `"` + s + `"`
}

// LimitError reports that a rule's limit for one request is unknown: its
// LimitFunc (or the caller, through Input.LimitErr) failed, or gave a
// limit the rule's algorithm cannot enforce. Its message reads like
//
//	redlimit: rule "plan": LimitFunc failed: plans: connection refused
//	redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Rate must be > 0, got 0
//
// It unwraps to Err; an invalid limit matches [algorithms.ErrInvalidConfig].
type LimitError struct {
	Rule string // the rule's name
	Err  error  // the function's error, or the *algorithms.ConfigError of the invalid limit
}

func (e *LimitError) Error() string {
	var ce *algorithms.ConfigError
	what := "LimitFunc failed: "
	if errors.As(e.Err, &ce) {
		what = "LimitFunc returned an invalid limit: "
	}
	return "redlimit: rule " + quote(e.Rule) + ": " + what + strings.TrimPrefix(e.Err.Error(), "redlimit: ")
}

// Unwrap returns Err.
func (e *LimitError) Unwrap() error { return e.Err }

// limitFor returns the limit of rule r for the Input x: x's own Limit, the
// rule's LimitFunc's, its tier's or its Limit. A dynamic limit is
// validated; an error is a *LimitError.
func (r *compiled) limitFor(ctx context.Context, x *Input) (algorithms.Limit, error) {
	var limit algorithms.Limit
	switch {
	case x.LimitErr != nil:
		return limit, &LimitError{Rule: r.Name, Err: x.LimitErr}
	case x.Limit != (algorithms.Limit{}):
		limit = x.Limit
	case r.LimitFunc != nil:
		l, err := r.LimitFunc(ctx, x.Material)
		if err != nil {
			return limit, &LimitError{Rule: r.Name, Err: err}
		}
		limit = l
	default:
		limit = r.Limit
		if r.Tiers != nil {
			if l, ok := r.Tiers[x.Tier]; ok {
				limit = l
			}
		}
		return limit, nil // validated by compile
	}
	if err := limit.Validate(r.Algorithm); err != nil {
		return algorithms.Limit{}, &LimitError{Rule: r.Name, Err: err}
	}
	return limit, nil
}
