package main

import "testing"

func TestNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    float64
		prec int
		want string
	}{
		{0, 0, "0"},
		{999, 0, "999"},
		{1000, 0, "1,000"},
		{1234567.891, 2, "1,234,567.89"},
		{-45210, 0, "-45,210"},
	} {
		if got := number(tc.v, tc.prec); got != tc.want {
			t.Errorf("number(%v, %d) = %q, want %q", tc.v, tc.prec, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
