package redlimit_test

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestOutcome: the Outcome of a Decision and of each rule, as metrics
// count them, for every way a request can end.
func TestOutcome(t *testing.T) {
	t.Parallel()
	one := algorithms.PerHour(1)
	rules := []redlimit.Rule{
		{Name: "a", Algorithm: algorithms.GCRA, Limit: one},
		{Name: "b", Algorithm: algorithms.GCRA, Limit: one, MissingKey: redlimit.SkipMissingKey},
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
		policy  redlimit.ErrorPolicy
		calls   [][]redlimit.Input // the last call is checked
		want    redlimit.Outcome
		rules   [3]redlimit.Outcome
	}{
		{"allowed", mem(), redlimit.Fallback, [][]redlimit.Input{{{Material: "x"}, {Material: "x"}, {Material: "x"}}},
			redlimit.OutcomeAllowed, [3]redlimit.Outcome{redlimit.OutcomeAllowed, redlimit.OutcomeAllowed, redlimit.OutcomeAllowed}},
		{"denied", mem(), redlimit.Fallback, [][]redlimit.Input{{{Material: "x"}, {Exempt: true}, {Exempt: true}}, {{Material: "x"}, {Material: "y"}, {Missing: true}}},
			redlimit.OutcomeDenied, [3]redlimit.Outcome{redlimit.OutcomeDenied, redlimit.OutcomeAllowed, redlimit.OutcomeMissingKey}},
		{"shadow", mem(), redlimit.Fallback, [][]redlimit.Input{{{Exempt: true}, {Exempt: true}, {Material: "x"}}, {{Material: "x"}, {Missing: true}, {Material: "x"}}},
			redlimit.OutcomeShadowDenied, [3]redlimit.Outcome{redlimit.OutcomeAllowed, redlimit.OutcomeSkipped, redlimit.OutcomeShadowDenied}},
		{"invalid cost", mem(), redlimit.Fallback, [][]redlimit.Input{{{Material: "x", Cost: -1}, {Material: "x"}, {Material: "x"}}},
			redlimit.OutcomeError, [3]redlimit.Outcome{redlimit.OutcomeInvalidCost, redlimit.OutcomeError, redlimit.OutcomeError}},
		{"fail closed", &failing{}, redlimit.FailClosed, [][]redlimit.Input{{{Material: "x"}, {Material: "x"}, {Exempt: true}}},
			redlimit.OutcomeError, [3]redlimit.Outcome{redlimit.OutcomeError, redlimit.OutcomeError, redlimit.OutcomeExempt}},
		{"fail open", &failing{}, redlimit.FailOpen, [][]redlimit.Input{{{Material: "x"}, {Material: "x"}, {Material: "x"}}},
			redlimit.OutcomeError, [3]redlimit.Outcome{redlimit.OutcomeError, redlimit.OutcomeError, redlimit.OutcomeError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.backend, redlimit.Config{Rules: rules, OnError: tc.policy, NoDenyCache: true})
			var d redlimit.Decision
			for _, in := range tc.calls {
				e.Decide(context.Background(), inOrder(e, in), &d)
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
	if got := redlimit.Outcome(200).String(); got != "unknown" {
		t.Errorf("Outcome(200).String() = %q", got)
	}
}
