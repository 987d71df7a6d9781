package redistest

import (
	"math"
	"runtime/metrics"
	"slices"
	"time"
)

// SchedHist is the runtime's histogram of scheduling latencies (how long
// a runnable goroutine waited to run): what a test that bounds a latency
// reads to tell the code's delay from the machine's.
type SchedHist struct {
	counts  []uint64
	buckets []float64
}

// SchedLatencies reads the process's histogram so far.
func SchedLatencies() SchedHist {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return SchedHist{}
	}
	h := s[0].Value.Float64Histogram()
	return SchedHist{counts: slices.Clone(h.Counts), buckets: h.Buckets}
}

// Since returns the latencies of h not in h0, an earlier reading.
func (h SchedHist) Since(h0 SchedHist) SchedHist {
	d := SchedHist{counts: slices.Clone(h.counts), buckets: h.buckets}
	for i := range min(len(d.counts), len(h0.counts)) {
		d.counts[i] -= h0.counts[i]
	}
	return d
}

// Quantile returns the upper bound of the bucket holding quantile q (1:
// the largest latency's; the lower bound for the last, unbounded bucket),
// 0 when h holds none.
func (h SchedHist) Quantile(q float64) time.Duration {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if c > 0 && float64(seen) >= q*float64(n) {
			hi := h.buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h.buckets[i]
			}
			return time.Duration(hi * float64(time.Second))
		}
	}
	return 0
}
