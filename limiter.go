package redlimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The key-first API: Allow, Wait, Peek and Reset key every rule of a
// Limiter by one key material, for code that is not an HTTP handler (a
// worker, a queue consumer, an outbound client). Several materials (a
// per-IP rule next to a per-user rule) go through Decide, one Input per
// rule, keyed by rule name.

// Errors of Wait. Test for them with [errors.Is].
var (
	// ErrNeverAllowed reports that Wait was asked for what no wait can
	// give: a cost above a rule's capacity (a denial with a zero
	// [algorithms.Result].RetryAfter), or
	// an Input without key material for a rule that denies it
	// (DenyMissingKey). Nothing was consumed.
	ErrNeverAllowed = errors.New("redlimit: can never be allowed")

	// ErrWaitExceedsDeadline reports that Wait would have to wait past its
	// context's deadline. It returns at once, nothing consumed.
	ErrWaitExceedsDeadline = errors.New("redlimit: wait would exceed the context deadline")
)

// Allow decides one unit for material under every rule of e: it is
// AllowN(ctx, material, 1).
func (e *Limiter) Allow(ctx context.Context, material string) *Decision {
	return e.AllowN(ctx, material, 1)
}

// AllowN decides n units for material under every rule of e, each rule
// keyed by material, and consumes them if every rule allows. It is Decide
// with one Input per rule holding material and cost n: the same storage
// keys (so an HTTP middleware whose rule has the same name, algorithm and
// Config.Prefix counts in the same bucket for the same material), the same
// timeout, error policy, fallback, deny cache, shadow rules and hook. A
// negative n is refused, nothing consumed (RuleDecision.InvalidCost). The
// Decision is the caller's; one that holds the slots of a concurrency rule
// is to be settled ([Limiter.Settle]). To decide without allocating, reuse
// a Decision with Decide.
func (e *Limiter) AllowN(ctx context.Context, material string, n int64) *Decision {
	d := new(Decision)
	var buf [4]Input
	e.Decide(ctx, e.inputs(buf[:0], material, n), d)
	return d
}

// inputs appends to in one Input per rule of e, each with material and
// cost n.
func (e *Limiter) inputs(in []Input, material string, n int64) []Input {
	for i := range e.rules {
		in = append(in, Input{Rule: e.rules[i].Name, Material: material, Cost: n})
	}
	return in
}

// Wait blocks until one unit for material is allowed, or ctx ends: it is
// WaitN(ctx, material, 1).
func (e *Limiter) Wait(ctx context.Context, material string) error {
	return e.WaitN(ctx, material, 1)
}

// WaitN blocks until n units for material are allowed under every rule of
// e, and consumed, or until ctx ends. It returns nil once allowed, the
// units consumed.
//
// Each attempt is AllowN: a denied one consumes nothing, and WaitN then
// sleeps (Config.Sleep) for the longest RetryAfter among the rules that
// denied, the time until the request would be allowed were there no other
// traffic, and tries again. It never asks the backend more often; while
// others take the key's capacity first, it waits again. Callers waiting
// on one key are released in the order their RetryAfters end.
//
// WaitN returns, nothing consumed:
//   - at once, an error matching [ErrNeverAllowed] when the request can
//     never be allowed: n is above a rule's capacity, or material is
//     empty (no key material) for a rule that denies it;
//   - at once, an error matching [ErrWaitExceedsDeadline] when the
//     RetryAfter ends after ctx's deadline;
//   - context.Cause(ctx) when ctx ends before a backend decided, or while
//     WaitN sleeps (a backend call that the context cut short may have
//     consumed, as for Decide);
//   - Decision.Err when the request was refused without being decided: a
//     negative n, or under FailClosed a backend error.
//
// Under FailOpen a backend error allows the request (WaitN returns nil),
// and under Fallback the fallback decides, as Decide does; in shadow mode
// every attempt is allowed. Config.OnDecision hears of every attempt.
//
// A Limiter with a concurrency rule returns an *[algorithms.ConfigError]
// at once: WaitN would take slots that nobody could release (WaitN
// returns no Decision to settle). Use Allow, and Settle the Decision once
// the work is done.
func (e *Limiter) WaitN(ctx context.Context, material string, n int64) error {
	if err := e.noLeases("WaitN"); err != nil {
		return err
	}
	var buf [4]Input
	var d Decision
	return e.waitInputs(ctx, e.inputs(buf[:0], material, n), &d)
}

// waitInputs waits until the request in describes (Inputs keyed by rule
// name, as for Decide) is allowed, as WaitN does, deciding into d, which
// holds the allowed Decision when it returns nil. A programmer error in
// in (see Decide) is returned at once.
func (e *Limiter) waitInputs(ctx context.Context, in []Input, d *Decision) error {
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		e.Decide(ctx, in, d)
		if d.Source == SourceNone && ctx.Err() != nil {
			// not decided by any backend: the context ended first
			return context.Cause(ctx)
		}
		if d.Allowed {
			return nil
		}
		if d.Failed {
			return d.Err
		}
		retry, err := retryAfter(d)
		if err != nil {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < retry {
			return fmt.Errorf("%w: retry after %v", ErrWaitExceedsDeadline, retry)
		}
		if err := e.s.sleep(ctx, retry); err != nil {
			return err
		}
	}
}

// retryAfter returns how long a denied decision must wait: the longest
// RetryAfter of the rules that denied it, or ErrNeverAllowed.
func retryAfter(d *Decision) (time.Duration, error) {
	var retry time.Duration
	for i := range d.Rules {
		rd := &d.Rules[i]
		if rd.Shadow {
			continue
		}
		if rd.InvalidCost {
			return 0, d.Err
		}
		if rd.MissingKey {
			return 0, fmt.Errorf("%w: rule %q: no key material (DenyMissingKey)", ErrNeverAllowed, rd.Name)
		}
		if !rd.Evaluated || rd.Result.Allowed {
			continue
		}
		if rd.Result.RetryAfter == 0 { // never: cost above capacity
			return 0, fmt.Errorf("%w: rule %q: cost %d is above its capacity %d", ErrNeverAllowed, rd.Name, rd.Cost, rd.Result.Limit)
		}
		retry = max(retry, rd.Result.RetryAfter)
	}
	if retry <= 0 {
		// a denial that names no rule to wait for cannot happen; never
		// spin on one
		return 0, fmt.Errorf("%w: denied without a RetryAfter", ErrNeverAllowed)
	}
	return retry, nil
}

// sleep is the default Config.Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Peek reports what Allow(ctx, material) would decide now, without
// consuming anything, on any backend, Redis Cluster included. Each rule's
// Result is its state as if it were decided alone: Allowed says whether
// one unit would pass, Remaining is what the key holds now, RetryAfter is
// how long until a unit would pass (zero when it would), ResetAfter how
// long until the key is full. Decision.Allowed is whether Allow would
// allow, Decision.WouldDeny whether a shadow rule would deny.
//
// A peek goes through the same timeout, error policy and fallback as
// Decide, and the deny cache: a rule whose key is cached as denied is
// answered locally, and the other rules are then not evaluated
// (RuleDecision.Evaluated false), as for Decide. It is not a decision:
// Config.OnDecision does not hear of it. A fixed window rule with quota
// blocks is peeked at the epoch the backend is at (a reset by another
// process moves it: see Reset), read first with one more call (under
// its own Timeout) per such rule.
//
// How: the backend is asked about the rules' checks plus, per hash tag
// (key material), one check on a key that is never written,
// "<prefix>:_peek:{<material>}", of a cost above its capacity. That check
// always denies, so the all-or-nothing call consumes nothing, and, living
// in the hash slot of the material's keys, it makes every slot of the call
// deny on a cluster: no slot commits, none is refunded. (The empty
// material is no key: see Input.Material.)
func (e *Limiter) Peek(ctx context.Context, material string) *Decision {
	var buf [4]Input
	d := new(Decision)
	e.peekInputs(ctx, e.inputs(buf[:0], material, 1), d)
	return d
}

// peekInputs fills d with what Decide(ctx, in, d) would decide now, and
// consumes nothing (see Peek).
func (e *Limiter) peekInputs(ctx context.Context, in []Input, d *Decision) {
	e.begin(d)
	s := e.pool.Get().(*scratch)
	if err := e.order(in, s); err != nil {
		e.s.refuse(d, err)
		e.pool.Put(s)
		return
	}
	in = s.in
	s.checks, s.index = s.checks[:0], s.index[:0]
	if e.build(ctx, in, s, d, 0) == pass && len(s.checks) > 0 {
		e.peekEpochs(ctx, in, s, d)
		e.s.peek(ctx, s, in, d)
	}
	clear(s.checks)
	clear(s.in)
	e.pool.Put(s)
}

// begin resets d for a call of e, as Decide does.
func (e *Limiter) begin(d *Decision) {
	n := len(e.rules)
	if cap(d.Rules) < n {
		d.Rules = make([]RuleDecision, n)
	}
	*d = Decision{Rules: d.Rules[:n]}
	for i := range e.rules {
		r := &e.rules[i]
		d.Rules[i] = RuleDecision{Name: r.Name, Shadow: r.Shadow || e.s.shadow}
	}
}

// peekLimit is the limit of a peek check: capacity 1, asked for 2 units.
var peekLimit = algorithms.Limit{Rate: 1, Period: time.Second}

// peek asks the backend about sc.checks, built from in, plus one peek
// check per key material (hash tag), and fills d with the rules' states.
func (s *shared) peek(ctx context.Context, sc *scratch, in []Input, d *Decision) {
	rules := len(sc.checks)
	for _, i := range sc.index {
		pk := s.peekKeys.key(in[i].Material) // "<prefix>:_peek:{<material>}"
		dup := false
		for _, c := range sc.checks[rules:] {
			dup = dup || c.Key == pk
		}
		if !dup {
			sc.checks = append(sc.checks, algorithms.Check{Key: pk, Algorithm: algorithms.GCRA, Limit: peekLimit, Cost: 2})
		}
	}
	if cap(sc.results) < len(sc.checks) {
		sc.results = make([]algorithms.Result, len(sc.checks))
	}
	results := sc.results[:len(sc.checks)]
	if _, err := s.ask(ctx, sc.checks, results, d, time.Time{}); err != nil {
		s.backendFailed(d, err)
		return
	}
	live, shadowDenied := record(d, sc.index, results)
	d.Allowed = live
	if shadowDenied {
		d.WouldDeny = true
	}
}

// Reset forgets the state of material under every rule of e, so that
// each rule's key starts afresh at full capacity ("unblock this
// customer"). The keys are those Allow uses for material. An empty
// material is no key: Reset does nothing.
//
// It resets the keys on the backend given to New, which must be an
// [algorithms.Resetter] (memstore, redisstore and denycache are), and on
// the fallback when it is one. The deny cache of e forgets the keys too:
// once Reset returns nil, the next Decide on this process is
// decided by the backend, and allowed. Other processes' deny caches are
// not told: each may still deny a key it cached as denied for at most the
// RetryAfter the backend last reported to it (see package denycache,
// "Reset").
//
// A rule with quota blocks (Rule.Blocks) drops this process's blocks of
// the key, without giving their units back: they were charged before the
// reset. A fixed window rule's key then moves to its next epoch instead of
// being deleted, in one atomic call that also closes the key it leaves
// (charges it beyond any capacity), so that nothing given back to it is
// admitted again, by any process: other processes are denied there, read
// the new epoch (within half a Hold) and move to it. A key may be reset
// any number of times in a window; when another process's reset of the
// key comes first, the call is made again at the epoch it moved to. A
// sliding window rule's key is deleted: other processes keep answering
// from the blocks they hold until their time is up (2 Holds, plus a
// sweep), and what they give back then counts for the reset key. See
// docs/leasing.md, "Reset". The admin page and the redlimit command reset
// keys through this method.
//
// The call to the backend runs under Config.Timeout (as a context
// deadline: a backend that does not honour deadlines is waited for). It
// returns an error matching [errors.ErrUnsupported] when the backend
// cannot reset keys, or the backend's error; the error policy does not apply.
func (e *Limiter) Reset(ctx context.Context, material string) error {
	var buf [4]Input
	return e.resetInputs(ctx, e.inputs(buf[:0], material, 0))
}

// resetInputs forgets the state of the rules' keys for in (Inputs keyed by
// rule name, as for Decide; a rule with no Input, or whose Input is
// Missing, is left alone), as Reset does. It returns Input.Err of the
// first Input that has one.
func (e *Limiter) resetInputs(ctx context.Context, in []Input) error {
	s := e.pool.Get().(*scratch)
	err := e.order(in, s)
	ordered := append([]Input(nil), s.in...)
	clear(s.in)
	e.pool.Put(s)
	if err != nil {
		return err
	}
	in = ordered
	keys := make([]string, 0, len(in))
	var epochs []int // rules with quota blocks of a fixed window: see epoch.go
	for i := range e.rules {
		switch x := &in[i]; {
		case x.Err != nil:
			return x.Err
		case !x.Missing && x.Material != "":
			k := e.rules[i].keys.key(x.Material)
			if br := e.rules[i].blocks; br != nil && br.epochs {
				epochs = append(epochs, i)
				continue
			} else if br != nil {
				br.forget(k)
			}
			keys = append(keys, k)
		}
	}
	for _, i := range epochs {
		r := &e.rules[i]
		limit, err := r.limitFor(ctx, &in[i])
		if err != nil {
			return err
		}
		if err := e.s.resetEpoch(ctx, r.blocks, r.keys.key(in[i].Material), limit); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	r, ok := e.s.backend.(algorithms.Resetter)
	if !ok {
		return engineErr(fmt.Errorf("%w: the backend (%T) cannot reset keys (it is no algorithms.Resetter)", errors.ErrUnsupported, e.s.backend))
	}
	var ferr error
	if f, ok := e.s.fallback.(algorithms.Resetter); ok {
		ferr = f.Reset(ctx, keys)
	}
	if e.s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.s.timeout)
		defer cancel()
	}
	if err := r.Reset(ctx, keys); err != nil {
		return err
	}
	return ferr
}
