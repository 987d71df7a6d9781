// The Redis store on a rueidis client, here of an embedded miniredis.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient"
)

func main() {
	mr, err := miniredis.Run()
	if err != nil {
		fail(err)
	}
	defer mr.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:           []string{mr.Addr()},
		DisableAutoPipelining: true,
		DisableCache:          true,
		ForceSingleClient:     true,
	})
	if err != nil {
		fail(err)
	}
	defer rc.Close()
	client, err := rueidisclient.New(rc)
	if err != nil {
		fail(err)
	}
	store, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		fail(err)
	}
	check := []algorithms.Check{{Key: "rate:consumer:{k}", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}}
	res := make([]algorithms.Result, 1)
	allowed := 0
	for range 4 {
		if err := store.Allow(context.Background(), check, res); err != nil {
			fail(err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		fail(fmt.Errorf("allowed %d of 4 at 3 a minute, want 3", allowed))
	}
	fmt.Println("ok: redisstore on rueidis: 3 of 4 allowed")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
