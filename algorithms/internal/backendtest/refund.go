package backendtest

import (
	"context"
	"errors"
	"math/rand/v2"
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
				c.Checks[j].RefundWindow = RefundWindow
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
