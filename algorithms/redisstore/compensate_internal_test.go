package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestCompensationAtNow: the refund of a part of a call spanning slots
// (dispatch.lua's refund mode: another slot denied, or failed and the
// refund runs in the background after the caller's deadline) gives back
// what the part took as it stands when the refund runs, as a late refund
// does. A bucket of 4 at 10/h: part A takes all 4 at t0; 3 units of time
// later B takes 1 (debt 2); 0.1 unit later A is refunded. Had A never
// happened, the bucket would hold 3 then: exactly 3 more pass. Run at the
// commit's own now, as it did before (cluster seeds 967 and 972 of the
// chaos harness), the refund gave A's 4 units back whole, the 0.9 that
// the refill had already returned included, and 4 passed.
func TestCompensationAtNow(t *testing.T) {
	run := func(t *testing.T, client *redis.Client, prefix string) {
		now := backendtest.T0
		b, err := New(client, Config{Now: func() time.Time { return now }, Pipelines: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 4}
		unit := time.Hour / 10
		for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.GCRA} {
			t.Run(alg.String(), func(t *testing.T) {
				now = backendtest.T0
				key := prefix + alg.String() + ":{c}"
				one := func(cost int64) []algorithms.Check {
					return []algorithms.Check{{Key: key, Algorithm: alg, Limit: limit, Cost: cost}}
				}
				a := one(4)
				ps := []calc.Params{calc.Prepare(uint8(alg), limit.Rate, limit.Period, limit.Burst, 4)}
				res := make([]algorithms.Result, 1)
				marker := commitKey(key, newCommitID())
				at, err := b.decide(ctx, nil, a, ps, res, now.UnixMicro(), markers{sharded: true, commit: marker, window: 10 * time.Hour.Milliseconds()})
				if err != nil || !res[0].Allowed {
					t.Fatalf("part A: allowed %v, err %v; want allowed", res[0].Allowed, err)
				}
				resA := []algorithms.Result{res[0]}
				now = now.Add(3 * unit)
				if err := b.Allow(ctx, one(1), res); err != nil || !res[0].Allowed {
					t.Fatalf("B: allowed %v, err %v; want allowed", res[0].Allowed, err)
				}
				now = now.Add(unit / 10)
				if err := b.refund(ctx, nil, a, ps, resA, at, marker); err != nil {
					t.Fatal(err)
				}
				passed := 0
				for range 5 {
					if err := b.Allow(ctx, one(1), res); err != nil {
						t.Fatal(err)
					}
					if res[0].Allowed {
						passed++
					}
				}
				if passed != 3 {
					t.Errorf("after the refund of A: %d of 5 passed, want 3 (as if A had never been)", passed)
				}
			})
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		run(t, client, "")
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := redistest.Require(t)
		run(t, srv.Client(t), redistest.Prefix(t))
	})
}
