package redlimit_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestDecideManyKeysAllocs: Decide on memstore with 5,000 live keys, a
// second time each, allocates (almost) nothing: the storage keys come
// from the cache.
func TestDecideManyKeysAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := redlimit.New(m, redlimit.Config{Rules: []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 20)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 5000
	in := make([][]redlimit.Input, n)
	var d redlimit.Decision
	for i := range in {
		in[i] = []redlimit.Input{{Rule: "ip", Material: "198.51." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&0xFF)}}
		e.Decide(context.Background(), in[i], &d)
	}
	denied := 0
	allocs := testing.AllocsPerRun(1, func() {
		for i := range in {
			e.Decide(context.Background(), in[i], &d)
			if !d.Allowed {
				denied++
			}
		}
	})
	if denied > 0 {
		t.Fatalf("%d of %d checks denied", denied, 2*n)
	}
	if allocs > 50 {
		t.Errorf("a second pass of Decide over %d keys allocated %v times, want at most 50", n, allocs)
	}
}
