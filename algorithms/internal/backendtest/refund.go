package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// RefundWindow is the refund window of the refundable calls of
// RandomRefundWorkload: longer than any workload, so that no refund finds
// its commit expired by time alone.
const RefundWindow = 24 * time.Hour

// RefundStep is one step of a refund workload: a call (Of < 0), or a
// refund of Units[i] units of check i of the call at step Of (whose
// checks it holds), at At.
type RefundStep struct {
	Call
	Of    int
	Units []int64
}

// RandomRefundWorkload returns RandomWorkload(seed, steps) with most calls
// refundable (Check.RefundWindow = RefundWindow) and, after some of them,
// a refund of an earlier call, made later: units from 0 to each check's
// cost, sometimes of a call refunded already or denied.
func RandomRefundWorkload(seed uint64, steps int) []RefundStep {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []RefundStep
	var calls []int // steps that are calls
	for _, c := range RandomWorkload(seed, steps) {
		if rng.IntN(5) != 0 {
			for j := range c.Checks {
				if c.Checks[j].Algorithm != algorithms.Concurrency { // released, never refunded
					c.Checks[j].RefundWindow = RefundWindow
				}
			}
		}
		out = append(out, RefundStep{Call: c, Of: -1})
		calls = append(calls, len(out)-1)
		if rng.IntN(2) == 0 {
			of := calls[len(calls)-1-rng.IntN(min(len(calls), 4))]
			r := RefundStep{Call: Call{At: c.At, Checks: out[of].Checks}, Of: of}
			for _, ch := range out[of].Checks {
				r.Units = append(r.Units, rng.Int64N(max(ch.Cost, 1)+1))
			}
			out = append(out, r)
		}
	}
	return out
}

// RefundOutcome is what a refund step did: "refunded", "none" (nothing
// given back: ErrNotRefunded), "invalid" (the call was not refundable or
// not allowed: a ConfigError) or "skip" (no units).
type RefundOutcome string

// PlayRefund plays step st of a refund workload on b, whose clock is c:
// the call's Results, or the refund's outcome. results holds what b
// answered to the earlier steps (indexed by step); keys are prefixed with
// prefix.
func PlayRefund(t *testing.T, b algorithms.Refunder, c *Clock, prefix string, st RefundStep, results [][]algorithms.Result) ([]algorithms.Result, RefundOutcome) {
	t.Helper()
	if st.Of < 0 {
		return Run(t, b, c, prefix, st.Call), ""
	}
	c.T = st.At
	call := results[st.Of]
	var refunds []algorithms.Refund
	for i, ch := range withPrefix(prefix, st.Checks) {
		refunds = append(refunds, algorithms.Refund{Check: ch, Result: call[i], Units: st.Units[i]})
	}
	err := b.Refund(context.Background(), refunds)
	var ce *algorithms.ConfigError
	switch {
	case err == nil:
		return nil, "refunded"
	case errors.Is(err, algorithms.ErrNotRefunded):
		return nil, "none"
	case errors.As(err, &ce):
		return nil, "invalid"
	}
	t.Fatalf("Refund at %v: %v", st.At, err)
	return nil, ""
}

func withPrefix(prefix string, checks []algorithms.Check) []algorithms.Check {
	out := make([]algorithms.Check, len(checks))
	for i, ch := range checks {
		ch.Key = prefix + ch.Key
		out[i] = ch
	}
	return out
}

// ScaledRefund is Scaled for a refund step.
func ScaledRefund(st RefundStep, f int64) RefundStep {
	st.Call = Scaled(st.Call, f)
	return st
}

// SameResult reports whether two Results are equal but for the names of
// their receipts' markers, which each store chooses.
func SameResult(a, b algorithms.Result) bool {
	a.Receipt.Marker, b.Receipt.Marker = "", ""
	return a == b
}

// call is a refundable call of a vector: its checks and Results.
type call struct {
	checks  []algorithms.Check
	results []algorithms.Result
}

// parseRefund parses a vector's refund step,
// "<offset> refund <label> <units>... -> refunded|none", into st.
func parseRefund(st *Step, fields []string, sc *Scenario) error {
	arrow := indexOf(fields, "->")
	if arrow < 4 || arrow != len(fields)-2 || fields[arrow+1] != "refunded" && fields[arrow+1] != "none" {
		return fmt.Errorf("bad refund step: want <offset> refund <label> <units>... -> refunded|none")
	}
	st.Refund, st.Outcome = fields[2], fields[arrow+1]
	found := false
	for _, prev := range sc.Steps {
		if prev.Label == st.Refund {
			found = len(prev.Checks) == arrow-3
		}
	}
	if !found {
		return fmt.Errorf("refund of %q: no earlier call with that label and %d checks", st.Refund, arrow-3)
	}
	for _, f := range fields[3:arrow] {
		u, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return fmt.Errorf("units: %v", err)
		}
		st.Units = append(st.Units, u)
	}
	return nil
}

// playRefund plays a refund step on h.
func playRefund(t *testing.T, h *Harness, st Step, calls map[string]call, printed *strings.Builder, print bool) {
	t.Helper()
	r, ok := h.Backend.(algorithms.Refunder)
	if !ok {
		t.Skipf("line %d: the backend (%T) cannot refund", st.Line, h.Backend)
	}
	c := calls[st.Refund]
	refunds := make([]algorithms.Refund, len(c.checks))
	for i := range c.checks {
		refunds[i] = algorithms.Refund{Check: c.checks[i], Result: c.results[i], Units: st.Units[i]}
	}
	err := r.Refund(context.Background(), refunds)
	got := "refunded"
	switch {
	case errors.Is(err, algorithms.ErrNotRefunded):
		got = "none"
	case err != nil:
		t.Fatalf("line %d: %s: Refund: %v", st.Line, st.Text, err)
	}
	if print {
		arrow := strings.Index(st.Text, "->")
		fmt.Fprintf(printed, "%-40s -> %s\n", strings.TrimSpace(st.Text[:arrow]), got)
		return
	}
	if got != st.Outcome {
		t.Errorf("line %d: %s\n  Refund(%s, T0+%v) = %s, want %s", st.Line, st.Text, st.Refund, st.At, got, st.Outcome)
	}
}
