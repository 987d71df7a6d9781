package main

import "testing"

func TestStatField(t *testing.T) {
	t.Parallel()
	const v = "calls=1000,usec=23632,usec_per_call=23.63,rejected_calls=0,failed_calls=0"
	for _, tc := range []struct {
		field string
		want  float64
	}{
		{"calls", 1000},
		{"usec", 23632},
		{"usec_per_call", 23.63},
		{"missing", 0},
	} {
		if got := statField(v, tc.field); got != tc.want {
			t.Errorf("statField(%q, %q) = %v, want %v", v, tc.field, got, tc.want)
		}
	}
}
