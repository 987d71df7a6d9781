package algorithms_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// A Redis backend on an embedded miniredis; in production pass your
// *redis.Client, *redis.ClusterClient or failover client, and leave Now nil
// so the Redis server's clock decides.
func ExampleNewRedis() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	now := time.Unix(1_700_000_000, 0)
	backend, err := algorithms.NewRedis(client, algorithms.RedisConfig{Now: func() time.Time { return now }})
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

// Layered checks are all-or-nothing: the payments rule denies, so the
// per-IP rule is not charged.
func ExampleMemory_Allow_layered() {
	now := time.Unix(1_700_000_000, 0)
	backend, _ := algorithms.NewMemory(algorithms.MemoryConfig{Now: func() time.Time { return now }})
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

// Invalid limits are rejected with an error naming the field.
func ExampleLimit_Validate() {
	fmt.Println(algorithms.PerSecond(10).WithBurst(-1).Validate(algorithms.TokenBucket))
	fmt.Println(algorithms.Limit{Rate: 5}.Validate(algorithms.FixedWindow))
	fmt.Println(algorithms.PerMinute(100).WithBurst(20).Validate(algorithms.GCRA))
	// Output:
	// redlimit: Limit.Burst must be >= 0, got -1
	// redlimit: Limit.Period must be >= 1µs, got 0s
	// <nil>
}
