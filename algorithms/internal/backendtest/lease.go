package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// playLeases plays a release or renew step whose checks are checks.
func playLeases(t *testing.T, h *Harness, st Step, checks []algorithms.Check, print bool, printed *strings.Builder) {
	t.Helper()
	l, ok := h.Backend.(algorithms.Leaser)
	if !ok {
		t.Fatalf("line %d: %s: the backend (%T) is no algorithms.Leaser", st.Line, st.Text, h.Backend)
	}
	leases := LeasesOf(checks)
	ctx := context.Background()
	if st.Op == "release" {
		if err := l.Release(ctx, leases); err != nil {
			t.Fatalf("line %d: %s: Release: %v", st.Line, st.Text, err)
		}
		if print {
			fmt.Fprintf(printed, "%s\n", st.Text)
		}
		return
	}
	held := make([]bool, len(leases))
	if err := l.Renew(ctx, leases, held); err != nil {
		t.Fatalf("line %d: %s: Renew: %v", st.Line, st.Text, err)
	}
	if print {
		fmt.Fprintf(printed, "%s -> %v\n", st.Text, held)
		return
	}
	for i := range held {
		if held[i] != st.Held[i] {
			t.Errorf("line %d: %s\n  lease %d: Renew(%s, T0+%v) held %v, want %v", st.Line, st.Text, i, leases[i].Key, st.At, held[i], st.Held[i])
		}
	}
}

// LeasesOf returns the leases of concurrency checks, as an allowed call
// of them took them.
func LeasesOf(checks []algorithms.Check) []algorithms.Lease {
	leases := make([]algorithms.Lease, len(checks))
	for i, c := range checks {
		leases[i] = algorithms.Lease{Key: c.Key, ID: c.Lease, Cost: c.Cost, Period: c.Limit.Period}
	}
	return leases
}
