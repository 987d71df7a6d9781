package redlimit

import "strconv"

// ErrorPolicy is what happens to a decision that cannot be made: the
// backend failed or timed out, or the caller's key material could not be
// found for a reason other than a missing key (Input.Err).
type ErrorPolicy uint8

const (
	// Fallback (the default) decides with the in-process fallback backend
	// once the primary has failed every call for Config.FallbackAfter
	// (default 1s), until it answers again: a background probe checks the
	// primary every Config.ProbeInterval and switches back by itself. A
	// call that fails before then is refused, as under FailClosed
	// (Decision.Failed): one slow call never switches an instance, and a
	// stall shorter than FallbackAfter admits nothing beyond the limit.
	// On the fallback, each instance enforces 1/Config.Instances of each
	// limit (the whole limit when Instances is 0: N instances then admit
	// up to N times it). An error about the state stored under
	// one call's keys ([algorithms.ErrKeyState]: a key of another Redis
	// type) says nothing about the primary's health: that call alone is
	// decided with the fallback, and the others still go to the primary. A
	// failed Input (not a backend problem) is allowed, as under FailOpen,
	// and a rule whose limit is unknown (see Rule.LimitFunc) is left out,
	// as under FailOpen.
	Fallback ErrorPolicy = iota
	// Programmer errors (see Limiter.Decide) are refused under every
	// policy, never handed to it.

	// FailOpen allows the request, undecided. A rule whose limit is
	// unknown (see Rule.LimitFunc) is left out and the other rules decide.
	FailOpen
	// FailClosed refuses the request, undecided: Decision.Failed is set
	// (the HTTP middleware answers 503). A rule whose limit is unknown
	// refuses it too, unless the rule is in shadow mode.
	FailClosed
)

func (p ErrorPolicy) String() string {
	switch p {
	case Fallback:
		return "fallback"
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	}
	return "ErrorPolicy(" + strconv.Itoa(int(p)) + ")"
}
