package otellimit

import "github.com/redlimit/redlimit/middleware/engine"

// The label values of source and outcome, indexed by the constants below.
var (
	sources          = [...]string{"primary", "fallback", "none"}
	decisionOutcomes = [...]string{"allowed", "denied", "shadow_denied", "error"}
	ruleOutcomes     = [...]string{"allowed", "denied", "shadow_denied", "error", "missing_key", "invalid_cost", "exempt", "skipped", "unevaluated"}
)

const (
	srcPrimary = iota
	srcFallback
	srcNone
)

const (
	outAllowed = iota
	outDenied
	outShadowDenied
	outError
	outMissingKey
	outInvalidCost
	outExempt
	outSkipped
	outUnevaluated
)

func sourceOf(d *engine.Decision) int {
	switch d.Source {
	case engine.SourcePrimary:
		return srcPrimary
	case engine.SourceFallback:
		return srcFallback
	}
	return srcNone
}

// decisionOutcome is the outcome of the whole request.
func decisionOutcome(d *engine.Decision) int {
	switch {
	case d.Failed:
		return outError
	case !d.Allowed:
		return outDenied
	case d.Source == engine.SourceNone && d.Err != nil:
		// Let through undecided: FailOpen, a failed Input under
		// Fallback, or no rule's limit known.
		return outError
	case d.WouldDeny:
		return outShadowDenied
	}
	return outAllowed
}

// ruleOutcome is rd's own verdict, rd being one of d.Rules.
func ruleOutcome(d *engine.Decision, rd *engine.RuleDecision) int {
	switch {
	case rd.Exempt:
		return outExempt
	case rd.Skipped:
		return outSkipped
	case rd.MissingKey:
		return outMissingKey
	case rd.InvalidCost:
		return outInvalidCost
	case rd.LimitFailed:
		return outError
	case rd.Evaluated:
		switch {
		case rd.Result.Allowed:
			return outAllowed
		case rd.Shadow:
			return outShadowDenied
		}
		return outDenied
	case d.Failed, d.Allowed && d.Source == engine.SourceNone && d.Err != nil:
		// The error policy decided the request.
		return outError
	}
	return outUnevaluated
}
