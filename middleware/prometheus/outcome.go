package promlimit

import "github.com/redlimit/redlimit"

// The series are set up ahead for every source (indexed by redlimit.Source)
// and outcome (redlimit.Outcome: a Decision's is one of the first four).
const (
	numSources          = int(redlimit.SourceFallback) + 1
	numDecisionOutcomes = int(redlimit.OutcomeError) + 1
)
