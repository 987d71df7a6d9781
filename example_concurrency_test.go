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
// allowed Decision holds its slot until Settle; KeepAlive renews the
// slot (held 1m at a time) while a long job runs, and a process that dies
// gives its slots back when their minute is up.
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
	first.KeepAlive(ctx) // renews every 20s until settled
	second := reports.Allow(ctx, "tenant:acme")
	fmt.Println("first:", first.Allowed, "second:", second.Allowed, "free:", second.Rules[0].Result.Remaining)

	third := reports.Allow(ctx, "tenant:acme")
	fmt.Println("third:", third.Allowed, "retry after at most", third.Rules[0].Result.RetryAfter)

	fmt.Println(reports.Settle(ctx, first)) // the first job is done
	third = reports.Allow(ctx, "tenant:acme")
	fmt.Println("third:", third.Allowed)
	reports.Settle(ctx, third)
	reports.Settle(ctx, second)
	fmt.Println("free:", reports.Peek(ctx, "tenant:acme").Rules[0].Result.Remaining)
	// Output:
	// first: true second: true free: 0
	// third: false retry after at most 1m0s
	// <nil>
	// third: true
	// free: 2
}
