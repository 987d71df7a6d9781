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
// request there without examining a later rule: a failed Input always;
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
