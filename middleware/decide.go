package middleware

import (
	"errors"
	"net/http"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// monoBase is the reference of the start of Decision.Latency: time.Since
// a Time that carries a monotonic reading reads the monotonic clock alone,
// one clock read where time.Now makes two (wall and monotonic).
var monoBase = time.Now()

// decide fills s.dec for r. timed says whether to measure
// Decision.Latency.
func (m *Middleware) decide(r *http.Request, s *scratch, timed bool) {
	var start time.Duration
	if timed {
		start = time.Since(monoBase) // the monotonic clock alone
	}
	in := m.inputs(r, s.in[:0])
	m.lim.Decide(r.Context(), in, &s.dec)
	clear(in) // drop the key material: the pool must not keep it alive
	s.now = time.Time{}
	if timed {
		s.now = time.Now() // also the wall clock of the headers
		s.dec.Latency = s.now.Sub(monoBase) - start
	}
	if m.cfg.OnDecision != nil {
		m.cfg.OnDecision(r, &s.dec)
	}
}

// inputs appends to in the Inputs of r, one per rule, keyed by rule
// name: it runs the exempt funcs and the rules' key, tier, cost and limit
// funcs, rule by rule, and stops once a rule's Input stops the request
// (the limiter decides rules in this order and stops there too): at a key
// func's error, which goes to the error policy, and at a missing key on a
// rule that denies it (DenyMissingKey, not in shadow mode). No later
// rule's funcs run for such a request; the rules after it get no Input.
// Other troubles (a negative cost, a LimitFunc's error) are the limiter's
// to judge: the later rules' funcs run, and the limiter stops at the
// rule all the same.
func (m *Middleware) inputs(r *http.Request, in []redlimit.Input) []redlimit.Input {
	if m.cfg.Exempt != nil && m.cfg.Exempt(r) {
		for i := range m.rules {
			in = append(in, redlimit.Input{Rule: m.rules[i].Name, Exempt: true})
		}
		return in
	}
	for i := range m.rules {
		rule := &m.rules[i]
		in = append(in, redlimit.Input{Rule: rule.Name})
		x := &in[len(in)-1]
		if rule.Exempt != nil && rule.Exempt(r) {
			x.Exempt = true
			continue
		}
		material, err := rule.Key(r)
		if err != nil {
			if !errors.Is(err, keyfunc.ErrNoKey) {
				x.Err = err
				return in
			}
			x.Missing = true
			if rule.stops {
				return in
			}
			continue
		}
		x.Material = material
		if rule.Tier != nil {
			x.Tier = rule.Tier(r)
		}
		if rule.Cost != nil {
			x.Cost = rule.Cost(r)
		}
		if rule.LimitFunc != nil {
			x.Limit, x.LimitErr = rule.LimitFunc(r)
			if x.LimitErr == nil && x.Limit == (algorithms.Limit{}) {
				// the zero Limit would let the Limiter's own limit decide:
				// never a default limit in place of the request's
				x.LimitErr = x.Limit.Validate(rule.alg)
			}
		}
	}
	return in
}
