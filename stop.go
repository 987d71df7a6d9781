package redlimit

import (
	"errors"

	"github.com/redlimit/redlimit/algorithms"
)

// trouble is what is wrong with a rule's Input, before its limit is
// looked up, in the order Decide examines it.
type trouble uint8

const (
	troubleNone         trouble = iota
	troubleErr                  // Input.Err: the error policy decides the request
	troubleSkip                 // no key material under SkipMissingKey: the rule is left out
	troubleMissing              // no key material under DenyMissingKey
	troubleCost                 // a negative Cost
	troubleLimit                // no limit: Input.LimitErr, a LimitFunc's error
	troubleInvalidLimit         // an invalid limit: Input.Limit's, a LimitFunc's
)

// limitTrouble is the trouble of err, the *LimitError of a rule's limit:
// an invalid limit (a programmer error, refused) or one that could not be
// found (for the error policy).
func limitTrouble(err error) trouble {
	if errors.Is(err, algorithms.ErrInvalidConfig) {
		return troubleInvalidLimit
	}
	return troubleLimit
}

// troubleOf returns what is wrong with rule i's Input x, its limit left
// aside (see [compiled.limitFor]).
func (e *Limiter) troubleOf(i int, x *Input) trouble {
	switch {
	case x.Err != nil:
		return troubleErr
	case x.Missing || x.Material == "":
		if e.rules[i].MissingKey == SkipMissingKey {
			return troubleSkip
		}
		return troubleMissing
	case x.Cost < 0:
		return troubleCost
	}
	return troubleNone
}

// stopsFor reports whether Decide stops at rule i for t, deciding the
// request there without reading a later Input: a failed Input always;
// a missing key (denied), a negative cost or an invalid limit (refused:
// programmer errors) on a rule not in shadow mode; an unknown limit on
// such a rule under FailClosed (refused). This is the one place that says
// where a request stops.
func (e *Limiter) stopsFor(i int, t trouble) bool {
	switch t {
	case troubleNone, troubleSkip:
		return false
	case troubleErr:
		return true
	}
	if e.rules[i].Shadow || e.s.shadow {
		return false // a shadow rule only reports that it would have denied
	}
	return t != troubleLimit || e.s.policy == FailClosed
}

// Stops reports whether [Limiter.Decide], given x as rule i's Input (i in
// rule order), stops at rule i: it then decides the request there, denied,
// refused or by the error policy, without reading the later Inputs. x
// stops when it is not Exempt and it holds an Err; or, for a rule not in
// shadow mode, no key material (Missing, or an empty Material) under
// DenyMissingKey, a negative Cost or an invalid Limit (programmer errors,
// refused under every policy), or, under FailClosed, a LimitErr.
// Stops does not call Rule.LimitFunc: a limit that only it finds is
// examined by Decide.
//
// An adapter that finds the Inputs rule by rule (the HTTP middleware runs
// each rule's key func, Cost and LimitFunc on the request) asks Stops
// after each, and finds no more once it reports true: the later rules'
// funcs are not run for a request that Decide stops before them.
func (e *Limiter) Stops(i int, x *Input) bool {
	if i < 0 || i >= len(e.rules) || x.Exempt {
		return false
	}
	t := e.troubleOf(i, x)
	switch {
	case t != troubleNone:
	case x.LimitErr != nil:
		t = limitTrouble(x.LimitErr)
	case x.Limit != (algorithms.Limit{}) && x.Limit.Validate(e.rules[i].Algorithm) != nil:
		t = troubleInvalidLimit
	}
	return e.stopsFor(i, t)
}

// Stop returns the rule at which the request stopped before any backend
// call (see [Limiter.Stops]) and why: OutcomeMissingKey (denied),
// OutcomeInvalidCost (refused: a programmer error), or OutcomeError (its
// Input or its limit failed: the error policy decided, or, for an invalid
// limit, the request was refused as a programmer error). ok is false when no rule stopped it:
// the backend decided, or every rule was left out.
func (d *Decision) Stop() (rule int, why Outcome, ok bool) {
	if d.stop == 0 {
		return -1, OutcomeAllowed, false
	}
	return d.stop - 1, d.stopWhy, true
}
