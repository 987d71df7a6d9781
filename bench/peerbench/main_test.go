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

// TestSelected: -only keeps the reference row and the matching ones,
// -scenarios the matching columns, and a bad expression is an error.
func TestSelected(t *testing.T) {
	saved := scenarios
	defer func() { scenarios = saved }()
	scenarios = append([]scenario(nil), saved...)
	lms, err := selected(limiters(), "redis_rate", "c=64")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lm := range lms {
		names = append(names, lm.name)
	}
	want := []string{"redlimit gcra", "go-redis/redis_rate v10", "go-redis/redis_rate v10, autopipelined client"}
	if len(names) != len(want) {
		t.Fatalf("-only redis_rate: %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("-only redis_rate: %q, want %q", names, want)
		}
	}
	for _, sc := range scenarios {
		if sc.conc != 64 {
			t.Errorf("-scenarios c=64 kept %q", sc.name)
		}
	}
	if len(scenarios) != 3 {
		t.Errorf("-scenarios c=64 kept %d scenarios, want 3", len(scenarios))
	}
	if _, err := selected(limiters(), "(", ""); err == nil {
		t.Error("-only '(' accepted")
	}
}
