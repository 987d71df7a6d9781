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

// TestSliceOrders: over the slices of a default -same run (3 rounds of 6
// scenarios of 15 slices, 5 contenders), each contender runs right after
// each other one, and no ordered pair half as often as the mean; a cyclic
// order gives each contender a single predecessor.
func TestSliceOrders(t *testing.T) {
	t.Parallel()
	const contenders, slices = 5, 3 * 6 * 15
	rng := sliceOrders()
	follows := map[[2]int]int{}
	n := 0
	for range slices {
		prev := -1
		for _, j := range rng.Perm(contenders) {
			if prev >= 0 {
				follows[[2]int{prev, j}]++
				n++
			}
			prev = j
		}
	}
	pairs := contenders * (contenders - 1)
	if len(follows) != pairs {
		t.Fatalf("%d of the %d ordered pairs in %d slices: %v", len(follows), pairs, slices, follows)
	}
	for p, c := range follows {
		if mean := n / pairs; c < mean/2 {
			t.Errorf("%d ran right after %d in %d slices, the mean is %d", p[1], p[0], c, mean)
		}
	}
}

// TestStored: a limiter's memory is used_memory less the connections'
// buffers, which Redis grows and shrinks on its own schedule; a field
// missing is an error, not a zero.
func TestStored(t *testing.T) {
	t.Parallel()
	if got, err := stored(map[string]string{"used_memory": "2000000", "mem_clients_normal": "163840"}); err != nil || got != 1836160 {
		t.Errorf("stored = %v, %v, want 1836160", got, err)
	}
	if _, err := stored(map[string]string{"used_memory": "2000000"}); err == nil {
		t.Error("stored without mem_clients_normal: no error")
	}
}
