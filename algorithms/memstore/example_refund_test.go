package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A refundable check reserves its cost; its Result carries the Receipt
// that a later Refund needs to give back units where the reservation took
// them, once.
func ExampleStore_Refund() {
	now := time.Unix(1_700_000_000, 0)
	backend, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	check := algorithms.Check{Key: "rate:uploads:{alice}", Algorithm: algorithms.TokenBucket,
		Limit: algorithms.PerMinute(10), Cost: 5, RefundWindow: time.Minute}
	res := make([]algorithms.Result, 1)
	backend.Allow(ctx, []algorithms.Check{check}, res)
	fmt.Printf("reserved 5: remaining=%d\n", res[0].Remaining)

	// The upload turned out to cost 2: give 3 back.
	refund := []algorithms.Refund{{Check: check, Result: res[0], Units: 3}}
	fmt.Println("refund:", backend.Refund(ctx, refund))
	fmt.Println("again:", errors.Is(backend.Refund(ctx, refund), algorithms.ErrNotRefunded))

	check.Cost, check.RefundWindow = 1, 0
	backend.Allow(ctx, []algorithms.Check{check}, res)
	fmt.Printf("one more: remaining=%d\n", res[0].Remaining)
	// Output:
	// reserved 5: remaining=5
	// refund: <nil>
	// again: true
	// one more: remaining=7
}
