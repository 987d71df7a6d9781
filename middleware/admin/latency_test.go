package admin

import "testing"

func TestLatencyBuckets(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 100, 1000, 12345, 1 << 30, 1<<40 - 1} {
		b := latBucket(v)
		if b < prev {
			t.Fatalf("latBucket(%d) = %d < latBucket of a smaller value %d", v, b, prev)
		}
		prev = b
		if up := latUpper(b); up < v || (b > 0 && latUpper(b-1) >= v) {
			t.Errorf("latBucket(%d) = %d: bucket holds (%d, %d]", v, b, latUpper(b-1), up)
		}
		if v >= 8 && float64(latUpper(b)) > 1.25*float64(v)+1 {
			t.Errorf("latBucket(%d): upper %d more than 25%% above", v, latUpper(b))
		}
	}
}
