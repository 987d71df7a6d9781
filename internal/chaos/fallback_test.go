package chaos

import (
	"testing"
	"time"
)

// TestFallbackShare: the checker holds each instance's fallback to its
// share of a key's limit: with 3 instances, GCRA 30/s gives each a
// capacity of 10 and 10 more per second (one more within 1.2ms, rounded
// up); a fallback that admits more is a violation, and what they admit is
// summed.
func TestFallbackShare(t *testing.T) {
	g := rule{key: "g", alg: "gcra", rate: 30, period: time.Second, allowed: true, reset: time.Second}
	for _, tc := range []struct {
		name      string
		admits    int // 0.1ms apart, by instance 0's fallback
		instances int
		want      string
	}{
		{"within the share", 11, 3, ""},
		{"over the share", 12, 3, VFallbackShare},
		{"instances unknown: the whole limit", 31, 0, ""},
		{"over the whole limit", 32, 0, VFallbackShare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHist()
			for i := range tc.admits {
				b.dec(float64(i)*0.1, float64(i)*0.1+0.05, OutFallback, g)
			}
			s := Check(b.h, CheckOptions{Timeout: 50 * time.Millisecond, Slack: 20 * time.Millisecond, Instances: tc.instances})
			if got := kinds(s.Violations); got != tc.want {
				t.Fatalf("violations %q, want %q: %v", got, tc.want, s.Violations)
			}
			if s.FallbackUnits != int64(tc.admits) {
				t.Errorf("FallbackUnits = %d, want %d", s.FallbackUnits, tc.admits)
			}
		})
	}
}
