package redlimit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// TestExempt: an exempt Input leaves its rule out, whatever else it
// carries: not charged, not decided, reported as Exempt. The other rules
// apply as usual; a request exempt from every rule makes no backend call.
func TestExempt(t *testing.T) {
	cb := &counting{next: newMemory(t)}
	e := newEngine(t, cb, redlimit.Config{OnError: redlimit.FailClosed, Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)},
		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(3)},
	}})
	ctx := context.Background()
	// Exempt from the ip rule: only the user rule counts, three times.
	for i := range 5 {
		d := decide(e, ctx, redlimit.Input{Material: "192.0.2.1", Exempt: true}, redlimit.Input{Material: "alice"})
		ip, user := d.Rules[0], d.Rules[1]
		if !ip.Exempt || ip.Evaluated || ip.Key != "" || ip.Skipped || user.Exempt || !user.Evaluated {
			t.Fatalf("request %d: ip %+v, user %+v; want ip exempt and user decided", i, ip, user)
		}
		if d.Allowed != (i < 3) {
			t.Errorf("request %d: allowed=%v, want %v (the user rule's 3)", i, d.Allowed, i < 3)
		}
	}
	// The ip rule's key was never charged: its one unit is still there.
	if d := decide(e, ctx, redlimit.Input{Material: "192.0.2.1"}, redlimit.Input{Material: "bob"}); !d.Allowed || d.Rules[0].Result.Remaining != 0 {
		t.Errorf("ip key after exempt requests: %+v, want allowed with its 1 unit", d.Rules[0])
	}
	// Exempt from everything: whatever the Inputs say otherwise (an error,
	// a missing key, a negative cost, a failed limit), allowed without a
	// backend call, even for a key over its limit.
	calls := cb.calls.Load()
	for _, in := range [][]redlimit.Input{
		{{Material: "192.0.2.1", Exempt: true}, {Material: "bob", Exempt: true}},
		{{Err: errors.New("broken"), Exempt: true}, {Missing: true, Exempt: true}},
		{{Material: "x", Cost: -1, Exempt: true}, {Material: "y", LimitErr: errNoPlan, Exempt: true}},
	} {
		d := decide(e, ctx, in...)
		if !d.Allowed || d.Failed || d.Err != nil || d.Source != redlimit.SourceNone || !d.Rules[0].Exempt || !d.Rules[1].Exempt || d.Rules[0].Key != "" {
			t.Errorf("all exempt %+v: %+v, want allowed, no error, no source", in, d)
		}
	}
	if got := cb.calls.Load() - calls; got != 0 {
		t.Errorf("all-exempt requests made %d backend calls, want 0", got)
	}
	// Exempt from a shadow rule: nothing would have been denied.
	es := newEngine(t, newMemory(t), redlimit.Config{Shadow: true, Rules: []redlimit.Rule{{Name: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}}})
	for range 3 {
		if d := decide(es, ctx, redlimit.Input{Material: "a", Exempt: true}); !d.Allowed || d.WouldDeny || !d.Rules[0].Exempt {
			t.Errorf("exempt shadow rule: %+v, want allowed, not WouldDeny", d)
		}
	}
}

// TestDecideMisnamedInputs: an Input naming no rule, or two Inputs naming
// one rule, is a programmer error: refused under every error policy, in
// shadow mode too, nothing consumed, whatever the other Inputs say.
func TestDecideMisnamedInputs(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
		for _, shadow := range []bool{false, true} {
			e := newEngine(t, newMemory(t), redlimit.Config{OnError: policy, Shadow: shadow, Rules: []redlimit.Rule{
				{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)},
				{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)},
			}})
			for _, in := range [][]redlimit.Input{
				{{Rule: "ip", Material: "a"}, {Rule: "User", Material: "b"}},
				{{Rule: "", Material: "a"}},
				{{Rule: "user", Material: "b"}, {Rule: "user", Material: "c"}},
				{{Rule: "ip", Material: "a"}, {Rule: "user", Material: "b"}, {Rule: "ip", Material: "a"}},
			} {
				var d redlimit.Decision
				e.Decide(ctx, in, &d)
				if d.Allowed || !d.Failed || !errors.Is(d.Err, algorithms.ErrInvalidConfig) || d.Source != redlimit.SourceNone {
					t.Errorf("%v shadow=%v: Decide(%+v) = %+v, want refused, a programmer error", policy, shadow, in, d)
				}
			}
			// nothing was consumed: each key still has its one unit
			var d redlimit.Decision
			e.Decide(ctx, []redlimit.Input{{Rule: "user", Material: "b"}, {Rule: "ip", Material: "a"}}, &d)
			if !d.Allowed || d.WouldDeny {
				t.Errorf("%v shadow=%v: after the refused calls: %+v, want allowed", policy, shadow, d)
			}
		}
	}
}
