package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// TestStops: where Decide stops, for every kind of Input, rule mode and
// error policy: at rule 0 (its RuleOutcome says why) exactly when its
// Input holds an Err; or, on a rule not in shadow mode, no key material
// under DenyMissingKey, a negative Cost or an invalid Limit; or, under
// FailClosed, a LimitErr. It then leaves rule 1 undecided.
func TestStops(t *testing.T) {
	t.Parallel()
	inputs := []struct {
		name string
		x    redlimit.Input
		why  redlimit.Outcome // when it stops
		// when it stops: always, for a rule not in shadow mode, and under
		// FailClosed for such a rule
		always, live, closed bool
	}{
		{"plain", redlimit.Input{Material: "a"}, 0, false, false, false},
		{"exempt with an error", redlimit.Input{Exempt: true, Err: errors.New("boom")}, 0, false, false, false},
		{"error", redlimit.Input{Material: "a", Err: errors.New("boom")}, redlimit.OutcomeError, true, false, false},
		{"missing", redlimit.Input{Missing: true}, redlimit.OutcomeMissingKey, false, true, false},
		{"no input", redlimit.Input{Rule: "-"}, redlimit.OutcomeMissingKey, false, true, false},
		{"empty material", redlimit.Input{}, redlimit.OutcomeMissingKey, false, true, false},
		{"negative cost", redlimit.Input{Material: "a", Cost: -1}, redlimit.OutcomeInvalidCost, false, true, false},
		{"limit error", redlimit.Input{Material: "a", LimitErr: errors.New("no plan")}, redlimit.OutcomeError, false, false, true},
		{"invalid limit", redlimit.Input{Material: "a", Limit: algorithms.Limit{Rate: -1, Period: 1}}, redlimit.OutcomeError, false, true, false},
		{"valid limit", redlimit.Input{Material: "a", Limit: algorithms.PerHour(5)}, 0, false, false, false},
	}
	for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
		for _, missing := range []redlimit.MissingKey{redlimit.DenyMissingKey, redlimit.SkipMissingKey} {
			for _, shadow := range []string{"live", "shadow rule", "shadow engine"} {
				rules := []redlimit.Rule{
					{Name: "first", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2), MissingKey: missing, Shadow: shadow == "shadow rule"},
					{Name: "second", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)},
				}
				e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules, OnError: policy, Shadow: shadow == "shadow engine"})
				for _, in := range inputs {
					name := fmt.Sprintf("%v/%v/%s/%s", policy, missing, shadow, in.name)
					x := in.x
					x.Rule = "first"
					inputs := []redlimit.Input{x, {Rule: "second", Material: "b"}}
					if in.x.Rule == "-" { // rule 0 has no Input
						inputs = inputs[1:]
					}
					var d redlimit.Decision
					e.Decide(context.Background(), inputs, &d)
					isLive := shadow == "live"
					stops := in.always || isLive && (in.live || in.closed && policy == redlimit.FailClosed)
					if missing == redlimit.SkipMissingKey && in.why == redlimit.OutcomeMissingKey {
						stops = false
					}
					if why := d.RuleOutcome(0); stops && why != in.why {
						t.Errorf("%s: rule 0's outcome %v, want %v", name, why, in.why)
					}
					if stops && d.Rules[1].Evaluated {
						t.Errorf("%s: Decide stopped at rule 0 but evaluated rule 1", name)
					}
					if !stops && !d.Rules[1].Evaluated {
						t.Errorf("%s: Decide went on but did not evaluate rule 1: %+v", name, d)
					}
				}
			}
		}
	}
}
