package promlimit

import "github.com/redlimit/redlimit/middleware/engine"

// The series are set up ahead for every source (indexed by engine.Source)
// and outcome (engine.Outcome: a Decision's is one of the first four).
const (
	numSources          = int(engine.SourceFallback) + 1
	numDecisionOutcomes = int(engine.OutcomeError) + 1
)
