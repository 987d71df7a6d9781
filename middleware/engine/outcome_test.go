package engine_test

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/engine"
)

// TestOutcome: the Outcome of a Decision and of each rule, as metrics
// count them, for every way a request can end.
func TestOutcome(t *testing.T) {
	t.Parallel()
	one := algorithms.PerHour(1)
	rules := []engine.Rule{
		{Name: "a", Algorithm: algorithms.GCRA, Limit: one},
		{Name: "b", Algorithm: algorithms.GCRA, Limit: one, MissingKey: engine.SkipMissingKey},
		{Name: "s", Algorithm: algorithms.GCRA, Limit: one, Shadow: true},
	}
	mem := func() algorithms.Backend {
		m, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		backend algorithms.Backend
		policy  engine.ErrorPolicy
		calls   [][]engine.Input // the last call is checked
		want    engine.Outcome
		rules   [3]engine.Outcome
	}{
		{"allowed", mem(), engine.Fallback, [][]engine.Input{{{Material: "x"}, {Material: "x"}, {Material: "x"}}},
			engine.OutcomeAllowed, [3]engine.Outcome{engine.OutcomeAllowed, engine.OutcomeAllowed, engine.OutcomeAllowed}},
		{"denied", mem(), engine.Fallback, [][]engine.Input{{{Material: "x"}, {Exempt: true}, {Exempt: true}}, {{Material: "x"}, {Material: "y"}, {Missing: true}}},
			engine.OutcomeDenied, [3]engine.Outcome{engine.OutcomeDenied, engine.OutcomeAllowed, engine.OutcomeMissingKey}},
		{"shadow", mem(), engine.Fallback, [][]engine.Input{{{Exempt: true}, {Exempt: true}, {Material: "x"}}, {{Material: "x"}, {Missing: true}, {Material: "x"}}},
			engine.OutcomeShadowDenied, [3]engine.Outcome{engine.OutcomeAllowed, engine.OutcomeSkipped, engine.OutcomeShadowDenied}},
		{"invalid cost", mem(), engine.Fallback, [][]engine.Input{{{Material: "x", Cost: -1}, {Material: "x"}, {Material: "x"}}},
			engine.OutcomeError, [3]engine.Outcome{engine.OutcomeInvalidCost, engine.OutcomeError, engine.OutcomeError}},
		{"fail closed", &failing{}, engine.FailClosed, [][]engine.Input{{{Material: "x"}, {Material: "x"}, {Exempt: true}}},
			engine.OutcomeError, [3]engine.Outcome{engine.OutcomeError, engine.OutcomeError, engine.OutcomeExempt}},
		{"fail open", &failing{}, engine.FailOpen, [][]engine.Input{{{Material: "x"}, {Material: "x"}, {Material: "x"}}},
			engine.OutcomeError, [3]engine.Outcome{engine.OutcomeError, engine.OutcomeError, engine.OutcomeError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.backend, engine.Config{Rules: rules, OnError: tc.policy, NoDenyCache: true})
			var d engine.Decision
			for _, in := range tc.calls {
				e.Decide(context.Background(), in, &d)
			}
			if got := d.Outcome(); got != tc.want {
				t.Errorf("Outcome() = %v, want %v (decision %+v)", got, tc.want, d)
			}
			for i := range tc.rules {
				if got := d.RuleOutcome(i); got != tc.rules[i] {
					t.Errorf("RuleOutcome(%d) = %v, want %v (rule %+v)", i, got, tc.rules[i], d.Rules[i])
				}
			}
		})
	}
	if got := engine.Outcome(200).String(); got != "unknown" {
		t.Errorf("Outcome(200).String() = %q", got)
	}
}
