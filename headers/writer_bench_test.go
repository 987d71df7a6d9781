package headers

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// benchPolicies returns n policies with short names (the usual case); with
// n > 1 the last one denies, so Retry-After is written too.
func benchPolicies(n int) []Policy {
	ps := []Policy{
		{Name: "ip", Window: time.Second, Result: allow(50, 12, 800*time.Millisecond)},
		{Name: "user", Window: time.Minute, Result: allow(1000, 997, 3*time.Second)},
		{Name: "endpoint", Window: time.Hour, Result: deny(10_000, 0, 1500*time.Millisecond, 59*time.Minute)},
	}
	return ps[:n]
}

var allStyles = []Style{XRateLimit, IETF, Both, None}

// TestWriteAllocs enforces the allocation budget of Write.
//
// Budget: Write allocates at most 2 objects (the one string holding every
// value and the one []string backing every field) when the values fit in
// the 256-byte stack buffer, at most 3 when they do not (plus the buffer),
// and none when it writes nothing. The map's own allocations for new keys
// are not Write's: the header map is measured after it already holds the
// keys, both as left by a previous Write (the values are overwritten) and
// after clear (clear keeps the map's storage, so re-adding the keys is free).
// A fresh map per request, as net/http gives, adds the map's growth on top.
func TestWriteAllocs(t *testing.T) {
	long := strings.Repeat("n", 200)
	tests := []struct {
		name     string
		policies []Policy
		budget   map[Style]float64
	}{
		{"policies=1", benchPolicies(1), map[Style]float64{XRateLimit: 2, IETF: 2, Both: 2, None: 0}},
		{"policies=3", benchPolicies(3), map[Style]float64{XRateLimit: 2, IETF: 2, Both: 2, None: 0}},
		{"policies=0", nil, map[Style]float64{XRateLimit: 0, IETF: 0, Both: 0, None: 0}},
		{"long names", []Policy{{Name: long, Result: allow(1, 1, 0)}, {Name: long, Result: allow(1, 1, 0)}},
			map[Style]float64{XRateLimit: 2, IETF: 3, Both: 3, None: 0}},
		{"escaped names", []Policy{{Name: strings.Repeat(`"\\`, 100), Result: allow(1, 1, 0)}, {Name: strings.Repeat("é", 100), Result: allow(1, 1, 0)}},
			map[Style]float64{XRateLimit: 2, IETF: 3, Both: 3, None: 0}},
		{"largest values", []Policy{
			{Name: long, Window: 1<<63 - 1, Result: deny(1<<63-1, 1<<63-1, 1<<63-1, 1<<63-1)},
			{Name: long, Window: 1<<63 - 1, Result: deny(1<<63-1, 1<<63-1, 1<<63-1, 1<<63-1)},
		}, map[Style]float64{XRateLimit: 2, IETF: 3, Both: 3, None: 0}},
	}
	for _, tt := range tests {
		for _, style := range allStyles {
			w := Writer{Style: style}
			reused := http.Header{}
			w.Write(reused, t0, tt.policies)
			got := testing.AllocsPerRun(100, func() { w.Write(reused, t0, tt.policies) })
			if got > tt.budget[style] {
				t.Errorf("%s, %v: Write on a reused map allocates %v times, budget %v", tt.name, style, got, tt.budget[style])
			}

			cleared := http.Header{}
			w.Write(cleared, t0, tt.policies)
			got = testing.AllocsPerRun(100, func() {
				clear(cleared)
				w.Write(cleared, t0, tt.policies)
			})
			if got > tt.budget[style] {
				t.Errorf("%s, %v: Write on a cleared map allocates %v times, budget %v", tt.name, style, got, tt.budget[style])
			}
		}
	}
}

// BenchmarkWrite measures one Write into a header map that already holds the
// keys (see TestWriteAllocs). policies=1 is an allowed request; policies=3 is
// a layered request that the third rule denies.
func BenchmarkWrite(b *testing.B) {
	for _, style := range allStyles {
		for _, n := range []int{1, 3} {
			ps := benchPolicies(n)
			b.Run("style="+style.String()+"/policies="+string(rune('0'+n)), func(b *testing.B) {
				w := Writer{Style: style}
				h := http.Header{}
				w.Write(h, t0, ps)
				b.ReportAllocs()
				for b.Loop() {
					w.Write(h, t0, ps)
				}
			})
		}
	}
}
