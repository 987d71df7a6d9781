package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// Charge after the work, key-first: each export reserves a unit before it
// runs, so a tenant at its limit is refused up front and exports in
// flight count; an export that fails on our side settles at a cost of 0,
// giving its unit back. A decision is settled once, within
// Config.RefundWindow (1 minute by default).
func ExampleLimiter_Settle_refund() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	exports, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "exports", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerHour(2), Refundable: true},
	}})
	if err != nil {
		panic(err)
	}
	defer exports.Close()

	ctx := context.Background()
	export := func(fails bool) error {
		d := exports.Allow(ctx, "tenant:acme")
		if !d.Allowed {
			return fmt.Errorf("refused, retry after %v", d.Rules[0].Result.RetryAfter)
		}
		if fails { // the export failed on our side: not the tenant's fault
			return exports.Settle(ctx, d, redlimit.Cost{Rule: "exports", Units: 0})
		}
		return nil
	}
	for i, fails := range []bool{true, false, true, false, false} {
		fmt.Printf("export %d (fails %v): %v\n", i, fails, export(fails))
	}

	// A decision is settled once.
	d := exports.Allow(ctx, "tenant:globex")
	unused := redlimit.Cost{Rule: "exports", Units: 0}
	fmt.Println(exports.Settle(ctx, d, unused), errors.Is(exports.Settle(ctx, d, unused), algorithms.ErrNotRefunded))
	// Output:
	// export 0 (fails true): <nil>
	// export 1 (fails false): <nil>
	// export 2 (fails true): <nil>
	// export 3 (fails false): <nil>
	// export 4 (fails false): refused, retry after 1h0m0s
	// <nil> true
}

// Settle takes the actual cost of each refundable rule, keyed by rule
// name: here a per-tenant budget of
// rows exported, reserved at the request's maximum and settled at what the
// export returned, next to a per-user rule that is not refundable.
func ExampleLimiter_Settle() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "rows", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(1000), Refundable: true},
		{Name: "calls", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(60)},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	ctx := context.Background()
	var d redlimit.Decision
	e.Decide(ctx, []redlimit.Input{{Rule: "rows", Material: "acme", Cost: 500}, {Rule: "calls", Material: "alice"}}, &d)
	fmt.Printf("reserved: rows left=%d\n", d.Rules[0].Result.Remaining)
	returned := int64(120) // the export found 120 rows
	if err := e.Settle(ctx, &d, redlimit.Cost{Rule: "rows", Units: returned}); err != nil {
		panic(err)
	}
	fmt.Printf("settled: rows left=%d\n", e.Peek(ctx, "acme").Rules[0].Result.Remaining)
	// Output:
	// reserved: rows left=500
	// settled: rows left=880
}
