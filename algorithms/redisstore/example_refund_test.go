package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// A refundable check on Redis: the reservation sets a commit marker (for
// the RefundWindow) that the refund deletes, so a refund sent twice, or
// retried after a lost reply, gives back once.
func ExampleStore_Refund() {
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
	check := algorithms.Check{Key: "rate:login:fw:{alice}", Algorithm: algorithms.FixedWindow,
		Limit: algorithms.PerHour(3), RefundWindow: time.Minute}
	res := make([]algorithms.Result, 1)
	if err := backend.Allow(ctx, []algorithms.Check{check}, res); err != nil {
		panic(err)
	}
	fmt.Printf("reserved: remaining=%d\n", res[0].Remaining)

	// The login succeeded: it costs nothing.
	refund := []algorithms.Refund{{Check: check, Result: res[0], Units: 1}}
	fmt.Println("refund:", backend.Refund(ctx, refund))
	fmt.Println("again:", errors.Is(backend.Refund(ctx, refund), algorithms.ErrNotRefunded))
	fmt.Println("count left in Redis:", mr.Exists("rate:login:fw:{alice}"))
	// Output:
	// reserved: remaining=2
	// refund: <nil>
	// again: true
	// count left in Redis: false
}
