package algorithms_test

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
)

// playLeaseStep plays a vector's release step through the engine: the
// Decisions that took the step's leases are released. A renew step ends
// the scenario (renewal is the engine's own business, on a timer: see the
// engine's tests), reported by false.
func playLeaseStep(t *testing.T, e *redlimit.Limiter, st backendtest.Step, held map[backendtest.CheckSpec]*redlimit.Decision) bool {
	t.Helper()
	if st.Op != "release" {
		t.Logf("line %d: %s: renewals are not played through the engine; the rest of the scenario is skipped", st.Line, st.Text)
		return false
	}
	for _, c := range st.Checks {
		if d := held[backendtest.CheckSpec{Key: c.Key, Lease: c.Lease}]; d != nil {
			if err := e.Settle(context.Background(), d); err != nil {
				t.Fatalf("line %d: %s: Settle: %v", st.Line, st.Text, err)
			}
		}
	}
	return true
}
