package redlimit

// Outcome says how a Decision, or one rule's part in it, ended, in the
// words metrics count: see [Decision.Outcome] and [Decision.RuleOutcome].
// Its String is a label value ("allowed", "shadow_denied", ...).
type Outcome uint8

const (
	// OutcomeAllowed: the request went through; for a rule, it passed.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: a limit denied the request; for a rule, this rule.
	OutcomeDenied
	// OutcomeShadowDenied: a shadow rule would have denied; the request
	// went through.
	OutcomeShadowDenied
	// OutcomeError: the error policy decided, not the limits (a backend
	// failure, a failed Input, a limit that could not be known).
	OutcomeError
	// OutcomeMissingKey (rules only): no key material; MissingKey denied.
	OutcomeMissingKey
	// OutcomeInvalidCost (rules only): a negative cost.
	OutcomeInvalidCost
	// OutcomeExempt (rules only): the Input was exempt.
	OutcomeExempt
	// OutcomeSkipped (rules only): no key material; SkipMissingKey.
	OutcomeSkipped
	// OutcomeUnevaluated (rules only): the rule was not evaluated: a
	// deny-cache hit on another rule, or the request was denied before.
	// It is the last Outcome: metrics that set up their series ahead
	// range from OutcomeAllowed to it.
	OutcomeUnevaluated
)

var outcomeNames = [...]string{
	"allowed", "denied", "shadow_denied", "error", "missing_key",
	"invalid_cost", "exempt", "skipped", "unevaluated",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Outcome is how the request ended: allowed, denied, shadow-denied (let
// through, a shadow rule would have denied) or error (decided by the error
// policy: refused under FailClosed, or let through undecided).
func (d *Decision) Outcome() Outcome {
	switch {
	case d.Failed:
		return OutcomeError
	case !d.Allowed:
		return OutcomeDenied
	case d.Source == SourceNone && d.Err != nil:
		// Let through undecided: FailOpen, a failed Input under
		// Fallback, or no rule's limit known.
		return OutcomeError
	case d.WouldDeny:
		return OutcomeShadowDenied
	}
	return OutcomeAllowed
}

// RuleOutcome is the verdict of d.Rules[i] on its own.
func (d *Decision) RuleOutcome(i int) Outcome {
	rd := &d.Rules[i]
	switch {
	case rd.Exempt:
		return OutcomeExempt
	case rd.Skipped:
		return OutcomeSkipped
	case rd.MissingKey:
		return OutcomeMissingKey
	case rd.InvalidCost:
		return OutcomeInvalidCost
	case rd.LimitFailed:
		return OutcomeError
	case rd.Evaluated:
		switch {
		case rd.Result.Allowed:
			return OutcomeAllowed
		case rd.Shadow:
			return OutcomeShadowDenied
		}
		return OutcomeDenied
	case d.Failed, d.Allowed && d.Source == SourceNone && d.Err != nil:
		// The error policy decided the request.
		return OutcomeError
	}
	return OutcomeUnevaluated
}
