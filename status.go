package redlimit

import (
	"maps"
)

// Rules returns a copy of e's rules, in rule order, as
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
	// Stalled is how many backend calls that outlived Config.Timeout are
	// still running in the background (see Config.Timeout): a gauge for
	// metrics. It stays 0 for a backend that honours deadlines or runs in
	// process.
	Stalled int64
	// InProcess reports that the backend given to New runs in process
	// (memstore): its calls make no round trip, so an adapter makes the
	// calls after a response (Settle) at once instead of queueing them.
	InProcess bool
}

// Status returns a snapshot of e's health: fallback state, deny cache
// size, local denials, stalled calls. It shares them with the Limiters
// derived from the same New. It is cheap (a few atomic loads) and safe for concurrent use.
func (e *Limiter) Status() Status {
	st := Status{
		Prefix:       e.s.prefix,
		Policy:       e.s.policy,
		OnFallback:   e.s.health != nil && e.s.health.down.Load(),
		LocalDenials: e.localDenials(),
		Stalled:      e.s.stalled.Load(),
		InProcess:    inProcess(e.s.primary),
	}
	if c, ok := e.s.backend.(interface{ Len() int }); ok && cachesDenials(e.s.backend) {
		st.DenyCache, st.DenyCacheKeys = true, c.Len()
	}
	return st
}
