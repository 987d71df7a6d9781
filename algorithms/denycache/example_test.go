package denycache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A Cache in front of a backend answers a denied key itself until the
// denial's RetryAfter has passed. In production the backend is a
// redisstore.Store, and Now is left nil.
func ExampleNew() {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	store, _ := memstore.New(memstore.Config{Now: clock})
	cache, err := denycache.New(store, denycache.Config{Now: clock})
	if err != nil {
		panic(err)
	}
	check := []algorithms.Check{{Key: "rate:login:{203.0.113.7}", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}}
	res := make([]algorithms.Result, 1)
	for _, at := range []time.Duration{0, 0, 10 * time.Second, time.Minute} {
		now = time.Unix(1_700_000_000, 0).Add(at)
		if err := cache.Allow(context.Background(), check, res); err != nil {
			panic(err)
		}
		fmt.Printf("t+%v: allowed=%v retry=%v local denials=%d\n", at, res[0].Allowed, res[0].RetryAfter, cache.LocalDenials())
	}
	// Output:
	// t+0s: allowed=true retry=0s local denials=0
	// t+0s: allowed=false retry=1m0s local denials=0
	// t+10s: allowed=false retry=50s local denials=1
	// t+1m0s: allowed=true retry=0s local denials=1
}

// Reset resets the keys in the store behind the cache and forgets the
// cache's denials of them: the next call is decided by the store at once.
func ExampleCache_Reset() {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	store, _ := memstore.New(memstore.Config{Now: clock})
	cache, _ := denycache.New(store, denycache.Config{Now: clock})
	check := []algorithms.Check{{Key: "rate:api:{acme}", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}}
	res := make([]algorithms.Result, 1)
	call := func(what string) {
		cache.Allow(context.Background(), check, res)
		fmt.Printf("%s: allowed=%v local denials=%d\n", what, res[0].Allowed, cache.LocalDenials())
	}
	call("first")
	call("second")
	call("third")
	if err := cache.Reset(context.Background(), []string{"rate:api:{acme}"}); err != nil {
		panic(err)
	}
	call("after reset")
	// Output:
	// first: allowed=true local denials=0
	// second: allowed=false local denials=0
	// third: allowed=false local denials=1
	// after reset: allowed=true local denials=1
}
