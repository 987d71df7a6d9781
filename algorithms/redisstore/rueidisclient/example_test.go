package rueidisclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient"
)

// The Redis store on a rueidis client, here of an embedded miniredis; in
// production give rueidis your server's address, and leave Now nil so the
// Redis server's clock decides.
func ExampleNew() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:           []string{mr.Addr()},
		DisableAutoPipelining: true, // the store pipelines itself
		DisableCache:          true,
		ForceSingleClient:     true, // miniredis answers CLUSTER SLOTS
	})
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	client, err := rueidisclient.New(rc)
	if err != nil {
		panic(err)
	}

	now := time.Unix(1_700_000_000, 0)
	backend, err := redisstore.New(client, redisstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	check := []algorithms.Check{{
		Key:       "rate:login:{203.0.113.7}",
		Algorithm: algorithms.GCRA,
		Limit:     algorithms.PerMinute(3),
	}}
	res := make([]algorithms.Result, 1)
	for range 4 {
		if err := backend.Allow(context.Background(), check, res); err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry=%v reset=%v\n", res[0].Allowed, res[0].Remaining, res[0].RetryAfter, res[0].ResetAfter)
	}
	// Output:
	// allowed=true remaining=2 retry=0s reset=20s
	// allowed=true remaining=1 retry=0s reset=40s
	// allowed=true remaining=0 retry=0s reset=1m0s
	// allowed=false remaining=0 retry=20s reset=1m0s
}
