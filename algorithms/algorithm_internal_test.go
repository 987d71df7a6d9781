package algorithms

import (
	"testing"

	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// TestCalcNumbersAlgorithms: the backends hand uint8(Algorithm) to calc,
// whose constants must number the algorithms alike.
func TestCalcNumbersAlgorithms(t *testing.T) {
	for a, c := range map[Algorithm]uint8{
		FixedWindow:   calc.FixedWindow,
		SlidingLog:    calc.SlidingLog,
		SlidingWindow: calc.SlidingWindow,
		TokenBucket:   calc.TokenBucket,
		GCRA:          calc.GCRA,
		Concurrency:   calc.Concurrency,
	} {
		if uint8(a) != c {
			t.Errorf("%v is %d, calc numbers it %d", a, uint8(a), c)
		}
		if calc.Bucket(c) != (a == TokenBucket || a == GCRA) {
			t.Errorf("calc.Bucket(%v) = %v", a, calc.Bucket(c))
		}
	}
}
