package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// TestStops: Limiter.Stops, which an adapter asks while it finds Inputs,
// says exactly where Decide stops: for every kind of Input, rule mode and
// error policy, Decide stops at rule 0 (Decision.Stop names it, with why)
// if and only if Stops(0, x) is true, and then leaves rule 1, whose Input
// it must not read, undecided.
func TestStops(t *testing.T) {
	t.Parallel()
	inputs := []struct {
		name string
		x    redlimit.Input
		why  redlimit.Outcome // when it stops
	}{
		{"plain", redlimit.Input{Material: "a"}, 0},
		{"exempt with an error", redlimit.Input{Exempt: true, Err: errors.New("boom")}, 0},
		{"error", redlimit.Input{Material: "a", Err: errors.New("boom")}, redlimit.OutcomeError},
		{"missing", redlimit.Input{Missing: true}, redlimit.OutcomeMissingKey},
		{"empty material", redlimit.Input{}, redlimit.OutcomeMissingKey},
		{"negative cost", redlimit.Input{Material: "a", Cost: -1}, redlimit.OutcomeInvalidCost},
		{"limit error", redlimit.Input{Material: "a", LimitErr: errors.New("no plan")}, redlimit.OutcomeError},
		{"invalid limit", redlimit.Input{Material: "a", Limit: algorithms.Limit{Rate: -1, Period: 1}}, redlimit.OutcomeError},
		{"valid limit", redlimit.Input{Material: "a", Limit: algorithms.PerHour(5)}, 0},
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
					stops := e.Stops(0, &x)
					d := decide(e, context.Background(), x, redlimit.Input{Material: "b"})
					rule, why, ok := d.Stop()
					if ok != stops || ok && (rule != 0 || why != in.why) {
						t.Errorf("%s: Stops = %v, Decide's Stop() = %d, %v, %v; want %v and, when it stops, 0, %v", name, stops, rule, why, ok, stops, in.why)
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
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: twoPerHour})
	if e.Stops(-1, &redlimit.Input{Err: errors.New("x")}) || e.Stops(1, &redlimit.Input{Err: errors.New("x")}) {
		t.Error("Stops of a rule the engine does not have = true, want false")
	}
}
