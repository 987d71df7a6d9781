package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// Concurrency slots on Redis: a sorted set per key, one member per slot,
// scored with its lease's expiry. Release frees a lease's slots at once;
// Renew extends the leases still held and reports the others.
func ExampleStore_Release() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	now := time.Unix(1_700_000_000, 0)
	backend, err := redisstore.New(client, redisstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	id := uint64(1) // unique per acquisition: draw it at random in real code
	check := []algorithms.Check{{Key: "exports:{alice}", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), Cost: 2, Lease: id}}
	res := make([]algorithms.Result, 1)
	if err := backend.Allow(ctx, check, res); err != nil {
		panic(err)
	}
	fmt.Println("allowed:", res[0].Allowed, "free:", res[0].Remaining, "members:", len(mr.Keys()), mustCard(mr, "exports:{alice}"))

	leases := []algorithms.Lease{{Key: "exports:{alice}", ID: id, Cost: 2, Period: time.Minute}}
	if err := backend.Release(ctx, leases); err != nil {
		panic(err)
	}
	held := make([]bool, 1)
	if err := backend.Renew(ctx, leases, held); err != nil {
		panic(err)
	}
	fmt.Println("released; renew finds it held:", held[0], "keys:", len(mr.Keys()))
	// Output:
	// allowed: true free: 1 members: 1 2
	// released; renew finds it held: false keys: 0
}

func mustCard(mr *miniredis.Miniredis, key string) int {
	m, err := mr.ZMembers(key)
	if err != nil {
		panic(err)
	}
	return len(m)
}
