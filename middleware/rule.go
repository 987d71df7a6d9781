package middleware

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// Rule is one limit applied to requests: whose requests (Key), how many
// (Limit, or a per-tier limit) and how (Algorithm). A rule is data; validate
// it by building a Middleware.
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

	// Cost, when set, returns how many units the request takes (default 1).
	// A cost of 0 counts as 1, as in [algorithms.Check]: every request that
	// reaches the rule takes something. A cost larger than the limit's
	// capacity is denied without Retry-After: waiting cannot help. A
	// negative cost denies the request under every error policy (429
	// without Retry-After, nothing consumed by any rule): the decision's
	// RuleDecision.InvalidCost is set and Decision.Err says which cost. A
	// shadow rule only reports that it would have denied.
	Cost func(*http.Request) int64

	// MissingKey says what happens when Key finds no key material.
	MissingKey MissingKey

	// Shadow decides and reports the rule but never denies with it.
	Shadow bool
}

// MissingKey is what a rule does with a request for which its key func
// finds no key (keyfunc.ErrNoKey): an anonymous request to a per-user rule,
// a request without an API key header. Never a silent shared bucket.
type MissingKey uint8

const (
	// DenyMissingKey (the zero value) denies the request: 429 without
	// Retry-After, the decision naming the rule. A request that cannot be
	// identified does not pass a rule that needs to identify it.
	DenyMissingKey MissingKey = iota

	// SkipMissingKey leaves the rule out for this request: the other rules
	// still apply. Typical for per-user rules on routes anonymous clients may
	// use, next to a per-IP rule. To fall back to another key instead, use
	// [keyfunc.Or] as the Key.
	SkipMissingKey
)

// window is the policy window for RateLimit-Policy's w: the time the limit
// takes to refill its whole capacity.
func window(alg algorithms.Algorithm, l algorithms.Limit) time.Duration {
	return time.Duration(int64(l.Period) / l.Rate * l.Capacity(alg))
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// compiled is a validated rule.
type compiled struct {
	Rule
	keys *keyCache // builds "<prefix>:<name>:<tag>:{<material>}"
}

func compile(prefix string, r Rule) (compiled, error) {
	name := r.Name
	fail := func(field, reason string) (compiled, error) {
		return compiled{}, &algorithms.ConfigError{Rule: name, Field: field, Reason: reason}
	}
	switch {
	case !validName(r.Name):
		return fail("Name", "must be 1-64 characters from [A-Za-z0-9_.-], got "+quote(r.Name))
	case r.Key == nil:
		return fail("Key", "must be set (a keyfunc.Func)")
	case r.MissingKey > SkipMissingKey:
		return fail("MissingKey", "unknown value")
	case r.Tiers != nil && r.Tier == nil:
		return fail("Tier", "must be set when Tiers is")
	case r.Tier != nil && len(r.Tiers) == 0:
		return fail("Tiers", "must list at least one tier when Tier is set")
	}
	if err := r.Limit.Validate(r.Algorithm); err != nil {
		return compiled{}, algorithms.WithRule(err, name)
	}
	for _, tier := range slices.Sorted(maps.Keys(r.Tiers)) { // sorted: the same error every time
		if err := r.Tiers[tier].Validate(r.Algorithm); err != nil {
			ce := algorithms.WithRule(err, name).(*algorithms.ConfigError)
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
