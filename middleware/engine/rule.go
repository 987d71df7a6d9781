package engine

import (
	"maps"
	"slices"

	"github.com/redlimit/redlimit/algorithms"
)

// Rule is one limit: how many (Limit, or a per-tier limit) and how
// (Algorithm), for the key material the caller gives in each [Input]. A
// rule is data; validate it by building an [Engine].
type Rule struct {
	// Name identifies the rule in storage keys, logs and hooks: 1 to 64
	// characters from [A-Za-z0-9_.-], unique within an Engine.
	//
	// A rule stores its state under "<prefix>:<name>:<tag>:{<material>}",
	// where tag names the algorithm ("fw" fixed window, "sl" sliding log,
	// "sw" sliding window, "tb" token bucket, "gcra") and material is the
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

	// MissingKey says what happens to an Input without key material.
	MissingKey MissingKey

	// Shadow decides and reports the rule but never denies with it.
	Shadow bool
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
	case r.MissingKey > SkipMissingKey:
		return fail("MissingKey", "unknown value")
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
