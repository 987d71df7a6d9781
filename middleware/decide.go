package middleware

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// decide fills s.dec for r and returns what to do with the request. timed
// says whether to measure Decision.Latency.
func (m *Middleware) decide(r *http.Request, s *scratch, timed bool) outcome {
	debug := m.logger.Enabled(r.Context(), slog.LevelDebug)
	timed = timed || debug
	var start time.Time
	if timed {
		start = time.Now()
	}
	d := &s.dec
	*d = Decision{Rules: d.Rules[:len(m.rules)]}
	// Every rule starts afresh: build may stop at any rule, and what a
	// pooled scratch holds past it belongs to an earlier request.
	for i := range m.rules {
		d.Rules[i] = RuleDecision{Name: m.rules[i].Name, Shadow: m.rules[i].Shadow || m.cfg.Shadow}
	}
	s.checks, s.index = s.checks[:0], s.index[:0]
	out := m.build(r, s)
	if out == pass && len(s.checks) > 0 {
		out = m.evaluate(r.Context(), s)
	}
	s.now = time.Time{}
	if timed {
		s.now = time.Now()
		d.Latency = s.now.Sub(start)
	}
	m.report(r, d, debug)
	return out
}

// build runs the key funcs and fills s.checks. It returns deny for a
// missing key under DenyMissingKey and for a negative cost, and applies the
// error policy to key func failures.
func (m *Middleware) build(r *http.Request, s *scratch) outcome {
	d := &s.dec
	for i := range m.rules {
		rule := &m.rules[i]
		rd := &d.Rules[i]
		material, err := rule.Key(r)
		if err != nil {
			if errors.Is(err, keyfunc.ErrNoKey) {
				if rule.MissingKey == SkipMissingKey {
					rd.Skipped = true
					continue
				}
				rd.MissingKey = true
				if rd.Shadow {
					d.WouldDeny = true
					continue
				}
				d.Allowed = false
				return deny
			}
			return m.policyFor(d, err, false)
		}
		limit := rule.Limit
		if rule.Tier != nil {
			if l, ok := rule.Tiers[rule.Tier(r)]; ok {
				limit = l
			}
		}
		var cost int64 = 1
		if rule.Cost != nil {
			cost = rule.Cost(r)
			if cost < 0 {
				// A request the rule cannot weigh is denied, whatever the
				// error policy: failing open would let a bug (or input a
				// client controls) bypass the limit.
				rd.InvalidCost = true
				d.Err = &algorithms.ConfigError{Rule: rule.Name, Field: "Cost", Reason: "must be >= 0, got " + strconv.FormatInt(cost, 10)}
				m.logError(d.Err)
				if rd.Shadow {
					d.WouldDeny = true
					continue
				}
				d.Allowed = false
				return deny
			}
		}
		rd.Key = rule.keys.key(material)
		rd.limit = limit
		s.checks = append(s.checks, algorithms.Check{Key: rd.Key, Algorithm: rule.Algorithm, Limit: limit, Cost: cost})
		s.index = append(s.index, i)
	}
	d.Allowed = true
	return pass
}

// evaluate asks the backend (or the fallback) and applies shadow rules.
func (m *Middleware) evaluate(ctx context.Context, s *scratch) outcome {
	d := &s.dec
	backend, src := m.backend, SourcePrimary
	if m.health != nil && m.health.down.Load() {
		backend, src = m.fallback, SourceFallback
	}
	err := m.call(ctx, backend, s.checks, s.results)
	if err != nil && src == SourcePrimary && m.health != nil {
		// A request whose client has gone (its context canceled) says
		// nothing about the backend, nor does unusable state under one
		// of its keys (another algorithm's, a stray key): fall back for
		// it alone.
		if ctx.Err() == nil && !errors.Is(err, algorithms.ErrKeyState) {
			m.health.failed(err)
		}
		backend, src = m.fallback, SourceFallback
		d.Err = err
		err = m.call(ctx, backend, s.checks, s.results)
	}
	if err != nil {
		return m.policyFor(d, err, true)
	}
	d.Source = src
	live, shadowDenied := true, false
	for j, i := range s.index {
		rd := &d.Rules[i]
		res := s.results[j]
		rd.Evaluated = res.Limit != 0
		rd.Result = res
		if rd.Evaluated && !res.Allowed {
			if rd.Shadow {
				shadowDenied = true
			} else {
				live = false
			}
		}
	}
	if shadowDenied {
		d.WouldDeny = true
	}
	if !live {
		d.Allowed = false
		return deny
	}
	if shadowDenied {
		// The backend consumed nothing (all-or-nothing); charge the live
		// rules on their own.
		if out := m.chargeLive(ctx, backend, s); out != pass {
			return out
		}
	}
	d.Allowed = true
	return pass
}

// chargeLive re-runs the non-shadow checks of a request whose shadow rules
// denied, so the live rules are charged as if the shadow rules did not exist.
func (m *Middleware) chargeLive(ctx context.Context, backend algorithms.Backend, s *scratch) outcome {
	d := &s.dec
	var checks []algorithms.Check
	var idx []int
	for j, i := range s.index {
		if !d.Rules[i].Shadow {
			checks = append(checks, s.checks[j])
			idx = append(idx, i)
		}
	}
	if len(checks) == 0 {
		return pass
	}
	results := make([]algorithms.Result, len(checks))
	if err := m.call(ctx, backend, checks, results); err != nil {
		return m.policyFor(d, err, true)
	}
	for j, i := range idx {
		d.Rules[i].Result = results[j]
		d.Rules[i].Evaluated = results[j].Limit != 0
		if !results[j].Allowed {
			d.Allowed = false
			return deny
		}
	}
	return pass
}

func (m *Middleware) call(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) error {
	if m.timeout < 0 || b != m.backend {
		return b.Allow(ctx, checks, results)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return m.bounded(ctx, b, checks, results)
}

// policyFor applies the error policy to err. backendErr says whether the
// backend failed (Fallback then already tried the fallback backend).
func (m *Middleware) policyFor(d *Decision, err error, backendErr bool) outcome {
	d.Err = err
	d.Source = SourceNone
	for i := range d.Rules {
		d.Rules[i].Evaluated = false
		d.Rules[i].Result = algorithms.Result{}
	}
	m.logError(err)
	if m.cfg.OnError == FailClosed {
		d.Allowed = false
		return fail
	}
	d.Allowed = true
	return pass
}

// logError logs err at Warn, at most once a second, with the number of
// errors since the last line: an outage must not flood the log.
func (m *Middleware) logError(err error) {
	n := m.errors.Add(1)
	now := time.Now().UnixNano()
	last := m.lastLog.Load()
	if now-last < int64(time.Second) || !m.lastLog.CompareAndSwap(last, now) {
		return
	}
	m.errors.Add(-n)
	m.logger.Warn("redlimit: rate limit not decided", "err", err, "policy", m.cfg.OnError.String(), "errors", n)
}

func (m *Middleware) report(r *http.Request, d *Decision, debug bool) {
	if m.cfg.OnDecision != nil {
		m.cfg.OnDecision(r, d)
	}
	if debug {
		attrs := make([]any, 0, 8+2*len(d.Rules))
		attrs = append(attrs, "allowed", d.Allowed, "would_deny", d.WouldDeny, "source", d.Source.String(), "latency", d.Latency)
		for _, rd := range d.Rules {
			attrs = append(attrs, slog.Group(rd.Name, "key", rd.Key, "allowed", rd.Result.Allowed, "remaining", rd.Result.Remaining, "retry_after", rd.Result.RetryAfter, "skipped", rd.Skipped))
		}
		m.logger.Log(r.Context(), slog.LevelDebug, "redlimit: decision", attrs...)
	}
}
