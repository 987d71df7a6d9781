package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestReset: Reset removes the keys it names, which start afresh, and
// leaves the others; unknown and empty keys are ignored.
func TestReset(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	m, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(key string) algorithms.Result {
		res := make([]algorithms.Result, 1)
		if err := m.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.SlidingLog, Limit: algorithms.PerHour(1)}}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	var keys []string
	for i := range 300 {
		keys = append(keys, "k"+strconv.Itoa(i))
		allow(keys[i])
	}
	if err := m.Reset(ctx, append(keys[:150:150], "unknown", "")); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 150 {
		t.Fatalf("Len after resetting 150 of 300 keys = %d", m.Len())
	}
	for i, k := range keys {
		if r := allow(k); r.Allowed != (i < 150) {
			t.Fatalf("%s after Reset of k0..k149: %+v", k, r)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Reset(cancelled, keys); err == nil {
		t.Fatal("Reset with a canceled context succeeded")
	}
}
