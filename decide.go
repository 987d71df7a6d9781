package redlimit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

type verdict uint8

const (
	pass verdict = iota
	deny
	fail // FailClosed
)

// Decide decides one request: in holds its Inputs keyed by rule name
// (Input.Rule), at most one per rule, in any order; a rule that no Input
// names has no key material, and its MissingKey applies. It fills d,
// reusing d.Rules' storage, so a caller that reuses d decides without
// allocating. The rules' keys are decided together in one backend call,
// all-or-nothing.
//
// Decide examines the rules in rule order and stops at the first whose
// Input says the request cannot proceed (Err, or no key material under
// DenyMissingKey, or a negative Cost or an invalid limit, for a rule not
// in shadow mode, or an unknown limit under FailClosed): the later rules
// are not decided and no later LimitFunc is called. An exempt Input
// leaves its rule out before anything else is read.
//
// A programmer error is refused, whatever the error policy, and never
// handed to it: Decision.Failed is set and Decision.Err, which matches
// [algorithms.ErrInvalidConfig], says what is wrong. It is an Input
// naming no rule of the Limiter, or two Inputs naming one rule (an
// *[algorithms.ConfigError]), a negative Input.Cost, or an invalid limit
// for a rule (an Input.Limit, or a limit Rule.LimitFunc returned, that
// the rule's Algorithm cannot enforce: a *[LimitError]). The last two, on
// a shadow rule, only set WouldDeny. Nothing is consumed.
func (e *Limiter) Decide(ctx context.Context, in []Input, d *Decision) {
	debug := e.s.logger.Enabled(ctx, slog.LevelDebug)
	timed := debug || e.s.onDecision != nil
	var start time.Time
	if timed {
		start = time.Now()
	}
	// Every rule starts afresh: build may stop at any rule, and what d
	// holds past it belongs to an earlier request.
	e.begin(d)
	s := e.pool.Get().(*scratch)
	if err := e.order(in, s); err != nil {
		e.s.refuse(d, err)
		e.pool.Put(s)
	} else {
		in := s.in
		s.checks, s.index, s.local, s.leased = s.checks[:0], s.index[:0], s.local[:0], s.leased[:0]
		s.deadline = time.Time{}
		var now int64
		if e.s.blocks.n.Load() > 0 {
			now = e.s.blocks.clock()
		}
		if e.build(ctx, in, s, d, now) == pass {
			if len(s.checks) > 0 {
				if e.s.evaluate(ctx, s, d) == pass && d.Source != SourceNone {
					e.s.holdLeases(s, d)
				}
				e.s.blocks.observeLeased(s, d, now)
			} else if len(s.local) > 0 {
				d.Source = SourcePrimary
			}
		}
		if len(s.local) > 0 && !d.Allowed {
			giveBack(s) // all-or-nothing: the other rules denied
		}
		clear(s.checks) // drop the keys of this request
		clear(s.local)
		clear(s.leased)
		clear(s.in)
		e.pool.Put(s)
	}
	if timed {
		d.Latency = time.Since(start)
	}
	e.s.report(ctx, d, debug)
}

// order copies in into s.in in rule order (s.in[i] is rule i's Input; a
// rule that no Input names gets one without key material), or returns the
// programmer error of an Input naming no rule of e or a rule that another
// Input names too.
func (e *Limiter) order(in []Input, s *scratch) error {
	n := len(e.rules)
	if cap(s.in) < n {
		s.in = make([]Input, n)
	}
	s.in = s.in[:n]
	if cap(s.named) < n {
		s.named = make([]bool, n)
	}
	named := s.named[:n]
	clear(named)
	for j := range in {
		x := &in[j]
		i := e.ruleIndex(x.Rule, j)
		if i < 0 {
			clear(s.in)
			return &algorithms.ConfigError{Rule: x.Rule, Field: "Input.Rule", Reason: "names no rule of the Limiter (its rules: " + e.names() + ")"}
		}
		if named[i] {
			clear(s.in)
			return &algorithms.ConfigError{Rule: x.Rule, Field: "Input.Rule", Reason: "is named by two Inputs of one call"}
		}
		named[i] = true
		s.in[i] = *x
	}
	for i, ok := range named {
		if !ok {
			s.in[i] = Input{Rule: e.rules[i].Name, Missing: true}
		}
	}
	return nil
}

// ruleIndex returns the index of the rule named name, or -1. hint is
// where to look first: Inputs usually come in rule order.
func (e *Limiter) ruleIndex(name string, hint int) int {
	if hint >= 0 && hint < len(e.rules) && e.rules[hint].Name == name {
		return hint
	}
	for i := range e.rules {
		if e.rules[i].Name == name {
			return i
		}
	}
	return -1
}

// names lists e's rule names, for an error.
func (e *Limiter) names() string {
	var b strings.Builder
	for i := range e.rules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(e.rules[i].Name))
	}
	return b.String()
}

// build fills s.checks from in. It returns deny for a missing key under
// DenyMissingKey, refuses a negative cost and an invalid limit (fail),
// and applies the error policy to a failed Input and to an unknown limit. When now is not 0 (the blocks'
// clock of a Decide), a rule with quota blocks is answered from a block
// that has the units, into s.local, instead of a check.
func (e *Limiter) build(ctx context.Context, in []Input, s *scratch, d *Decision, now int64) verdict {
	for i := range e.rules {
		rule := &e.rules[i]
		rd := &d.Rules[i]
		x := &in[i]
		if x.Exempt {
			rd.Exempt = true
			continue
		}
		switch t := e.troubleOf(i, x); t {
		case troubleErr:
			return e.s.policyFor(d, x.Err)
		case troubleSkip:
			rd.Skipped = true
			continue
		case troubleMissing:
			rd.MissingKey = true
			if !e.stopsFor(i, t) {
				d.WouldDeny = true
				continue
			}
			d.Allowed = false
			return deny
		case troubleCost:
			// A request the rule cannot weigh is refused, whatever the
			// error policy: failing open would let a bug (or input a
			// client controls) bypass the limit.
			rd.InvalidCost = true
			err := &algorithms.ConfigError{Rule: rule.Name, Field: "Cost", Reason: "must be >= 0, got " + strconv.FormatInt(x.Cost, 10)}
			if !e.stopsFor(i, t) {
				d.Err = err
				e.s.logError(err)
				d.WouldDeny = true
				continue
			}
			return e.s.refuse(d, err)
		}
		limit, err := rule.limitFor(ctx, x)
		if err != nil {
			// Never a default limit: the rule is not decided. An invalid
			// limit is a programmer error, refused like a negative cost;
			// for a limit that could not be found, the error policy says
			// whether the request goes on without the rule.
			rd.LimitFailed = true
			t := limitTrouble(err)
			if e.stopsFor(i, t) {
				if t == troubleInvalidLimit {
					return e.s.refuse(d, err)
				}
				return e.s.policyFor(d, err)
			}
			d.Err = err
			e.s.logError(err)
			if t == troubleInvalidLimit {
				d.WouldDeny = true // a shadow rule: it would have refused
			}
			continue
		}
		rd.Key = rule.keys.key(x.Material)
		rd.Algorithm, rd.Limit = rule.Algorithm, limit
		rd.Cost = max(x.Cost, 1)
		c := algorithms.Check{Key: rd.Key, Algorithm: rule.Algorithm, Limit: limit, Cost: x.Cost}
		switch {
		case rule.blocks != nil && now == 0: // a peek: no blocks, the key of the epoch
			_, rd.Key = rule.blocks.key(rd.Key, 0).epochAt(e.s.blocks.clock())
			c.Key = rd.Key
		case rule.blocks != nil:
			k := rule.blocks.key(rd.Key, now)
			_, rd.Key = k.epochAt(now) // see epoch.go
			c.Key = rd.Key
			switch e.takeLocal(ctx, rule.blocks, k, &c, rd, s, now) {
			case blockAllow:
				continue
			case blockDenial:
				d.Allowed, d.Source = false, SourcePrimary
				return deny
			}
		}
		s.checks = append(s.checks, c)
		if rule.Algorithm == algorithms.Concurrency {
			s.checks[len(s.checks)-1].Lease = contract.NewLease()
		}
		s.index = append(s.index, i)
		if rule.Refundable {
			s.checks[len(s.checks)-1].RefundWindow = e.s.refundWindow
		}
	}
	d.Allowed = true
	return pass
}

// evaluate asks the backend (or the fallback) and applies shadow rules.
func (s *shared) evaluate(ctx context.Context, sc *scratch, d *Decision) verdict {
	backend, err := s.ask(ctx, sc.checks, sc.results, d, sc.deadline)
	if err != nil {
		return s.backendFailed(d, err)
	}
	live, shadowDenied := record(d, sc.index, sc.results)
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
		if out := s.chargeLive(ctx, backend, sc, d); out != pass {
			return out
		}
	}
	d.Allowed = true
	return pass
}

// ask asks the primary about checks, or, under the Fallback policy, the
// fallback (see onFallback) while the primary is down, and sets d.Source.
// It returns the backend that answered. A primary failure goes to the
// fallback, d.Err set to it, when it concerns one key's state
// (algorithms.ErrKeyState: this call alone) or when it makes the primary
// down (see health.failed); otherwise it is returned, for the error policy
// to refuse. A failure of a call whose context ended first (the caller
// gave up, or a wait for a quota block used the request's Timeout) says
// nothing about the primary: it is returned and counts for nothing. A
// deadline that is not zero (a wait for a quota block used part of the
// request's Timeout, see blocks.wait) bounds the call to the primary, not
// the fallback's.
func (s *shared) ask(ctx context.Context, checks []algorithms.Check, results []algorithms.Result, d *Decision, deadline time.Time) (algorithms.Backend, error) {
	if s.health != nil && s.health.down.Load() {
		err := s.onFallback(ctx, checks, results)
		if err == nil {
			d.Source = SourceFallback
		}
		return s.fallback, err
	}
	pctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	err := s.call(pctx, s.backend, checks, results)
	if err == nil {
		d.Source = SourcePrimary
		if s.health != nil {
			s.health.answered(results[:len(checks)])
		}
		return s.backend, nil
	}
	s.releaseAbandoned(checks)
	if s.health == nil {
		return s.backend, err
	}
	switch {
	case errors.Is(err, algorithms.ErrKeyState):
		// unusable state under one of its keys (another algorithm's, a
		// stray key) says nothing about the primary's health
	case pctx.Err() != nil:
		return s.backend, err
	case !s.health.failed(err):
		return s.backend, err
	}
	d.Err = err
	if err := s.onFallback(ctx, checks, results); err != nil {
		return s.fallback, err
	}
	d.Source = SourceFallback
	return s.fallback, nil
}

// record copies the results of the rules in index (results[j] is rule
// index[j]'s) into d and reports whether every live rule passed and
// whether a shadow rule denied.
func record(d *Decision, index []int, results []algorithms.Result) (live, shadowDenied bool) {
	live = true
	for j, i := range index {
		rd := &d.Rules[i]
		res := results[j]
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
	return live, shadowDenied
}

// chargeLive re-runs the non-shadow checks of a request whose shadow rules
// denied, so the live rules are charged as if the shadow rules did not exist.
func (s *shared) chargeLive(ctx context.Context, backend algorithms.Backend, sc *scratch, d *Decision) verdict {
	var checks []algorithms.Check
	var idx []int
	for j, i := range sc.index {
		if !d.Rules[i].Shadow {
			checks = append(checks, sc.checks[j])
			idx = append(idx, i)
		}
	}
	if len(checks) == 0 {
		return pass
	}
	results := make([]algorithms.Result, len(checks))
	if err := s.call(ctx, backend, checks, results); err != nil {
		return s.backendFailed(d, err)
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

// call asks b about checks: the primary under the timeout, the fallback
// (in process) directly.
func (s *shared) call(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) error {
	if s.timeout < 0 || b != s.backend {
		return b.Allow(ctx, checks, results)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.bounded(ctx, b, checks, results)
}

// policyFor applies the error policy to err, a failed Input or a limit
// that could not be found: FailClosed refuses the request, FailOpen and
// Fallback let it through undecided.
func (s *shared) policyFor(d *Decision, err error) verdict {
	if s.policy == FailClosed {
		return s.refuse(d, err)
	}
	s.undecided(d, err)
	d.Allowed = true
	return pass
}

// backendFailed applies the error policy to err, the failure of a backend
// call that the fallback did not answer: FailOpen lets the request
// through undecided; FailClosed refuses it, and so does Fallback, whose
// instance is not down yet (see health.failed): a call that failed once
// is not decided by the fallback.
func (s *shared) backendFailed(d *Decision, err error) verdict {
	if s.policy == FailOpen {
		s.undecided(d, err)
		d.Allowed = true
		return pass
	}
	return s.refuse(d, err)
}

// refuse refuses the request undecided, with err, whatever the policy:
// under FailClosed, for a failed call under Fallback, and for a
// programmer error.
func (s *shared) refuse(d *Decision, err error) verdict {
	s.undecided(d, err)
	d.Allowed, d.Failed = false, true
	return fail
}

// undecided clears what the backend answered in d, records err and logs
// it.
func (s *shared) undecided(d *Decision, err error) {
	d.Err = err
	d.Source = SourceNone
	for i := range d.Rules {
		d.Rules[i].Evaluated = false
		d.Rules[i].Result = algorithms.Result{}
	}
	s.logError(err)
}

// logError logs err at Warn, at most once a second, with the number of
// errors since the last line: an outage must not flood the log.
func (s *shared) logError(err error) {
	if n, ok := s.errLog.due(); ok {
		s.logger.Warn("redlimit: rate limit not decided", "err", err, "policy", s.policy.String(), "errors", n)
	}
}

// throttle lets a log line through at most once a second.
type throttle struct {
	pending atomic.Int64 // events not yet logged
	last    atomic.Int64 // unix ns of the last line
}

// due counts one event and reports whether to log a line now, and how
// many events it stands for (this one and those not logged since the
// last line).
func (t *throttle) due() (int64, bool) {
	n := t.pending.Add(1)
	now := time.Now().UnixNano()
	last := t.last.Load()
	if now-last < int64(time.Second) || !t.last.CompareAndSwap(last, now) {
		return 0, false
	}
	t.pending.Add(-n)
	return n, true
}

func (s *shared) report(ctx context.Context, d *Decision, debug bool) {
	if s.onDecision != nil {
		s.onDecision(ctx, d)
	}
	if debug {
		attrs := make([]any, 0, 8+2*len(d.Rules))
		attrs = append(attrs, "allowed", d.Allowed, "would_deny", d.WouldDeny, "source", d.Source.String(), "latency", d.Latency)
		for _, rd := range d.Rules {
			attrs = append(attrs, slog.Group(rd.Name, "key", rd.Key, "allowed", rd.Result.Allowed, "remaining", rd.Result.Remaining, "retry_after", rd.Result.RetryAfter, "skipped", rd.Skipped, "exempt", rd.Exempt))
		}
		s.logger.Log(ctx, slog.LevelDebug, "redlimit: decision", attrs...)
	}
}
