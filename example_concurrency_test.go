package redlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// At most 2 report jobs per tenant running at once, key-first. An
// allowed Decision holds its slot until Release; KeepAlive renews the
// lease (here 1m) while a long job runs, and a process that dies gives
// its slots back when their leases expire. Acquire waits for a slot.
func ExampleLimiter_Allow_concurrency() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	reports, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "reports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(2, time.Minute)},
	}})
	if err != nil {
		panic(err)
	}
	defer reports.Close()
	ctx := context.Background()

	first := reports.Allow(ctx, "tenant:acme")
	first.KeepAlive(ctx) // renews every 20s until released
	second := reports.Allow(ctx, "tenant:acme")
	fmt.Println("first:", first.Allowed, "second:", second.Allowed, "free:", second.Rules[0].Result.Remaining)

	third := reports.Allow(ctx, "tenant:acme")
	fmt.Println("third:", third.Allowed, "retry after at most", third.Rules[0].Result.RetryAfter)

	first.Release(ctx) // the first job is done
	third, err = reports.Acquire(ctx, "tenant:acme", 1)
	fmt.Println("third:", third.Allowed, err)
	third.Release(ctx)
	second.Release(ctx)
	fmt.Println("free:", reports.Peek(ctx, "tenant:acme").Rules[0].Result.Remaining)
	// Output:
	// first: true second: true free: 0
	// third: false retry after at most 1m0s
	// third: true <nil>
	// free: 2
}
