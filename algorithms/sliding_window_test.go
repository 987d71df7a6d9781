package algorithms_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
)

// TestSlidingWindowError measures how far the sliding window counter is from
// an exact sliding window, on random (Poisson) traffic at several loads, and
// checks the bound that holds for any traffic: at most 2×Rate in any
// interval of length Period (a window's full count, then the next window's
// allowance as the previous count's weight fades). The numbers quoted in the
// docs/algorithms.md come from this test's log.
func TestSlidingWindowError(t *testing.T) {
	t.Parallel()
	const rate, windows = 100, 300
	period := time.Second
	for _, load := range []float64{0.8, 1.0, 1.5, 3.0, 10.0} {
		b, c := newMemory(t)
		rng := rand.New(rand.NewPCG(uint64(load*1000), 7))
		var allowed []time.Duration
		at := time.Duration(0)
		end := windows * period
		mean := float64(period) / (load * rate)
		check := []algorithms.Check{{Key: "k", Algorithm: algorithms.SlidingWindow, Limit: algorithms.Limit{Rate: rate, Period: period}}}
		res := make([]algorithms.Result, 1)
		requests := 0
		for at < end {
			at += time.Duration(rng.ExpFloat64() * mean)
			c.T = backendtest.T0.Add(at)
			requests++
			if err := b.Allow(context.Background(), check, res); err != nil {
				t.Fatal(err)
			}
			if res[0].Allowed {
				allowed = append(allowed, at)
			}
		}
		// Exact count in the sliding interval (at-period, at] ending at
		// each allowed request.
		maxIn, overSum, over := 0, 0.0, 0
		for i, a := range allowed {
			j := sort.Search(len(allowed), func(k int) bool { return allowed[k] > a-period })
			n := i - j + 1
			maxIn = max(maxIn, n)
			if n > rate {
				over++
				overSum += float64(n-rate) / rate
			}
		}
		if maxIn > 2*rate {
			t.Fatalf("load %.1f: %d allowed within one period, above the 2×Rate bound", load, maxIn)
		}
		admitted := float64(len(allowed)) / float64(windows) / rate
		meanOver := 0.0
		if over > 0 {
			meanOver = overSum / float64(over)
		}
		t.Logf("load %4.1fx: %6d requests, admitted %.3f×Rate per period, max in any period %d (%.0f%% over Rate), %.2f%% of allowed requests end an over-limit interval (by %.1f%% on average)",
			load, requests, admitted, maxIn, 100*float64(maxIn-rate)/rate, 100*float64(over)/float64(len(allowed)), 100*meanOver)
	}
}
