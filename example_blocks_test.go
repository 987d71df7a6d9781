package redlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A hot key with quota blocks: once the key has seen two checks, they are
// answered from units taken from the store in blocks, already counted
// there; Close gives back the rest.
func ExampleBlockConfig() {
	now := time.Unix(1_700_000_040, 0) // a minute's start
	clock := func() time.Time { return now }
	mem, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Now: clock, Rules: []redlimit.Rule{{
		Name: "route", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000),
		Blocks: &redlimit.BlockConfig{Hold: 100 * time.Millisecond},
	}}})
	if err != nil {
		panic(err)
	}
	var d redlimit.Decision
	for range 3 {
		e.Decide(context.Background(), []redlimit.Input{{Rule: "route", Material: "GET /search"}}, &d)
		r := d.Rules[0].Result
		fmt.Printf("allowed=%v from a block=%v remaining=%d reset after %v\n", d.Allowed, d.Rules[0].FromBlock, r.Remaining, r.ResetAfter)
	}
	e.Close() // gives back what the blocks hold

	peek, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{{Name: "route", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000)}}})
	if err != nil {
		panic(err)
	}
	defer peek.Close()
	fmt.Println("the store after Close:", peek.Peek(context.Background(), "GET /search").Rules[0].Result.Remaining)
	// Output:
	// allowed=true from a block=false remaining=999 reset after 1m0s
	// allowed=true from a block=true remaining=998 reset after 1m0s
	// allowed=true from a block=true remaining=997 reset after 1m0s
	// the store after Close: 997
}

// A GCRA rule with quota blocks: a block is checked now and charged as if
// its units arrived when its hold ends (25ms here: a quarter of the
// bucket's full window, 1,000 / 10,000/s), so the store's Remaining drops
// by the hold's worth of refill (250) besides the block (8 units: the
// key's rate times the hold); the block's units are used within the hold,
// and what it has left then is dropped, never given back.
func ExampleBlockConfig_gcra() {
	now := time.Unix(1_700_000_040, 0)
	clock := func() time.Time { return now }
	mem, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Now: clock, Rules: []redlimit.Rule{{
		Name: "route", Algorithm: algorithms.GCRA,
		Limit:  algorithms.Limit{Rate: 10_000, Period: time.Second, Burst: 1_000},
		Blocks: &redlimit.BlockConfig{},
	}}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	var d redlimit.Decision
	for range 4 {
		e.Decide(context.Background(), []redlimit.Input{{Rule: "route", Material: "GET /search"}}, &d)
		r := d.Rules[0].Result
		fmt.Printf("allowed=%v from a block=%v remaining=%d\n", d.Allowed, d.Rules[0].FromBlock, r.Remaining)
	}
	// Output:
	// allowed=true from a block=false remaining=999
	// allowed=true from a block=true remaining=749
	// allowed=true from a block=true remaining=748
	// allowed=true from a block=true remaining=747
}
