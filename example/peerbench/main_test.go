package main

import "testing"

func TestMemKeys(t *testing.T) {
	t.Parallel()
	for _, lm := range limiters() {
		for _, k := range memKeys(lm, 1+10_000) {
			if n := len(lm.prefix + k); n != 32 {
				t.Fatalf("memKeys(%s): stored key %q is %d bytes, want 32", lm.id, lm.prefix+k, n)
			}
		}
	}
}
