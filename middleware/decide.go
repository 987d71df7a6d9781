package middleware

import (
	"errors"
	"net/http"
	"time"

	"github.com/redlimit/redlimit"
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
	m.inputs(r, s.in)
	m.engine.Decide(r.Context(), s.in, &s.dec)
	clear(s.in) // drop the key material: the pool must not keep it alive
	s.now = time.Time{}
	if timed {
		s.now = time.Now() // also the wall clock of the headers
		s.dec.Latency = s.now.Sub(monoBase) - start
	}
	if m.cfg.OnDecision != nil {
		m.cfg.OnDecision(r, &s.dec)
	}
}

// inputs runs the exempt funcs and the rules' key, tier, cost and limit
// funcs into in, rule by rule, and stops finding Inputs where the engine
// will stop deciding (redlimit.Limiter.Stops says where): no later rule's
// funcs run for a request decided before them.
func (m *Middleware) inputs(r *http.Request, in []redlimit.Input) {
	if m.cfg.Exempt != nil && m.cfg.Exempt(r) {
		for i := range in {
			in[i].Exempt = true
		}
		return
	}
	for i := range m.cfg.Rules {
		rule := &m.cfg.Rules[i]
		x := &in[i]
		if rule.Exempt != nil && rule.Exempt(r) {
			x.Exempt = true
			continue
		}
		material, err := rule.Key(r)
		if err != nil {
			if errors.Is(err, keyfunc.ErrNoKey) {
				x.Missing = true
			} else {
				x.Err = err
			}
			if m.engine.Stops(i, x) {
				return
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
		if m.engine.Stops(i, x) {
			return
		}
		if rule.LimitFunc != nil {
			if x.Limit, x.LimitErr = rule.LimitFunc(r); m.engine.Stops(i, x) {
				return
			}
		}
	}
}
