package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// Layered checks are all-or-nothing: the payments rule denies, so the
// per-IP rule is not charged.
func ExampleStore_Allow_layered() {
	now := time.Unix(1_700_000_000, 0)
	backend, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	checks := []algorithms.Check{
		{Key: "rate:ip:{203.0.113.7}", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(100)},
		{Key: "rate:payments:{alice}", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerMinute(1)},
	}
	res := make([]algorithms.Result, 2)
	for range 2 {
		backend.Allow(context.Background(), checks, res)
		fmt.Printf("ip: allowed=%v remaining=%d | payments: allowed=%v remaining=%d retry=%v\n",
			res[0].Allowed, res[0].Remaining, res[1].Allowed, res[1].Remaining, res[1].RetryAfter)
	}
	// Output:
	// ip: allowed=true remaining=99 | payments: allowed=true remaining=0 retry=0s
	// ip: allowed=true remaining=99 | payments: allowed=false remaining=0 retry=1m0s
}

// Reset forgets keys: a blocked client starts afresh.
func ExampleStore_Reset() {
	now := time.Unix(1_700_000_000, 0)
	backend, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	checks := []algorithms.Check{{Key: "rate:login:{alice}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}}
	res := make([]algorithms.Result, 1)
	for _, reset := range []bool{false, false, true} {
		if reset {
			if err := backend.Reset(context.Background(), []string{"rate:login:{alice}"}); err != nil {
				panic(err)
			}
		}
		backend.Allow(context.Background(), checks, res)
		fmt.Printf("reset=%v allowed=%v retry=%v\n", reset, res[0].Allowed, res[0].RetryAfter)
	}
	// Output:
	// reset=false allowed=true retry=0s
	// reset=false allowed=false retry=1h0m0s
	// reset=true allowed=true retry=0s
}
