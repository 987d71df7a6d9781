package redlimit

import (
	"maps"
)

// Rules returns a copy of e's rules, in rule order (see RuleNames), as
// they were given to New and With, except that Shadow is set on every rule
// when Config.Shadow is: for an admin page or a tool that shows what the
// Limiter enforces. The Tiers maps are copies.
func (e *Limiter) Rules() []Rule {
	out := make([]Rule, len(e.rules))
	for i := range e.rules {
		r := e.rules[i].Rule
		r.Shadow = r.Shadow || e.s.shadow
		if r.Tiers != nil {
			r.Tiers = maps.Clone(r.Tiers)
		}
		out[i] = r
	}
	return out
}

// Status is a snapshot of an Limiter's health, for an admin page or
// metrics. See [Limiter.Status].
type Status struct {
	// Prefix starts the Limiter's storage keys (Config.Prefix).
	Prefix string
	// Policy is the error policy (Config.OnError).
	Policy ErrorPolicy
	// OnFallback reports that the primary backend is failing and the
	// Fallback policy decides with the fallback backend until a probe
	// sees the primary again.
	OnFallback bool
	// DenyCache reports whether a deny cache answers denied keys locally;
	// DenyCacheKeys is how many denials it holds (expired ones included
	// until swept), LocalDenials how many calls it answered.
	DenyCache     bool
	DenyCacheKeys int
	LocalDenials  uint64
	// Stalled is Limiter.Stalled: backend calls past Config.Timeout still
	// running.
	Stalled int64
}

// Status returns a snapshot of e's health: fallback state, deny cache
// size, stalled calls. It shares them with the Engines derived from the
// same New. It is cheap (a few atomic loads) and safe for concurrent use.
func (e *Limiter) Status() Status {
	st := Status{
		Prefix:       e.s.prefix,
		Policy:       e.s.policy,
		OnFallback:   e.s.health != nil && e.s.health.down.Load(),
		LocalDenials: e.LocalDenials(),
		Stalled:      e.s.stalled.Load(),
	}
	if c, ok := e.s.backend.(interface{ Len() int }); ok && cachesDenials(e.s.backend) {
		st.DenyCache, st.DenyCacheKeys = true, c.Len()
	}
	return st
}
