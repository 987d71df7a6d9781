package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware/engine"
)

// TestStops: Engine.Stops, which an adapter asks while it finds Inputs,
// says exactly where Decide stops: for every kind of Input, rule mode and
// error policy, Decide stops at rule 0 (Decision.Stop names it, with why)
// if and only if Stops(0, x) is true, and then leaves rule 1, whose Input
// it must not read, undecided.
func TestStops(t *testing.T) {
	t.Parallel()
	inputs := []struct {
		name string
		x    engine.Input
		why  engine.Outcome // when it stops
	}{
		{"plain", engine.Input{Material: "a"}, 0},
		{"exempt with an error", engine.Input{Exempt: true, Err: errors.New("boom")}, 0},
		{"error", engine.Input{Material: "a", Err: errors.New("boom")}, engine.OutcomeError},
		{"missing", engine.Input{Missing: true}, engine.OutcomeMissingKey},
		{"empty material", engine.Input{}, engine.OutcomeMissingKey},
		{"negative cost", engine.Input{Material: "a", Cost: -1}, engine.OutcomeInvalidCost},
		{"limit error", engine.Input{Material: "a", LimitErr: errors.New("no plan")}, engine.OutcomeError},
		{"invalid limit", engine.Input{Material: "a", Limit: algorithms.Limit{Rate: -1, Period: 1}}, engine.OutcomeError},
		{"valid limit", engine.Input{Material: "a", Limit: algorithms.PerHour(5)}, 0},
	}
	for _, policy := range []engine.ErrorPolicy{engine.Fallback, engine.FailOpen, engine.FailClosed} {
		for _, missing := range []engine.MissingKey{engine.DenyMissingKey, engine.SkipMissingKey} {
			for _, shadow := range []string{"live", "shadow rule", "shadow engine"} {
				rules := []engine.Rule{
					{Name: "first", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2), MissingKey: missing, Shadow: shadow == "shadow rule"},
					{Name: "second", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)},
				}
				e := newEngine(t, newMemory(t), engine.Config{Rules: rules, OnError: policy, Shadow: shadow == "shadow engine"})
				for _, in := range inputs {
					name := fmt.Sprintf("%v/%v/%s/%s", policy, missing, shadow, in.name)
					x := in.x
					stops := e.Stops(0, &x)
					d := decide(e, context.Background(), x, engine.Input{Material: "b"})
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
	e := newEngine(t, newMemory(t), engine.Config{Rules: twoPerHour})
	if e.Stops(-1, &engine.Input{Err: errors.New("x")}) || e.Stops(1, &engine.Input{Err: errors.New("x")}) {
		t.Error("Stops of a rule the engine does not have = true, want false")
	}
}
