package algorithms_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A concurrency check takes a slot under a lease id; a Leaser frees it
// (Release) or extends it (Renew). The engine and the middleware do this
// for you; this is the Backend contract underneath.
func ExampleInFlight() {
	now := time.Unix(1_700_000_000, 0)
	backend, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	limit := algorithms.InFlight(1, 10*time.Second) // one at a time, leases of 10s
	take := func(lease uint64) algorithms.Result {
		res := make([]algorithms.Result, 1)
		check := []algorithms.Check{{Key: "jobs:{acme}", Algorithm: algorithms.Concurrency, Limit: limit, Lease: lease}}
		if err := backend.Allow(ctx, check, res); err != nil {
			panic(err)
		}
		return res[0]
	}
	// Lease ids are unique per acquisition: draw them at random in real code.
	first := uint64(1)
	for _, r := range []algorithms.Result{take(first), take(2)} {
		fmt.Printf("allowed=%v remaining=%d retry=%v reset=%v\n", r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
	}

	now = now.Add(8 * time.Second)
	lease := []algorithms.Lease{{Key: "jobs:{acme}", ID: first, Period: limit.Period}}
	held := make([]bool, 1)
	_ = backend.Renew(ctx, lease, held) // now expires at +18s
	now = now.Add(5 * time.Second)
	fmt.Println("held:", held[0], "allowed at +13s:", take(3).Allowed)

	_ = backend.Release(ctx, lease)
	fmt.Println("allowed once released:", take(4).Allowed)
	// Output:
	// allowed=true remaining=0 retry=0s reset=10s
	// allowed=false remaining=0 retry=10s reset=10s
	// held: true allowed at +13s: false
	// allowed once released: true
}
