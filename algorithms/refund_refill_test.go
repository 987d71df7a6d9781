package algorithms_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestRefundAfterRefill: a token bucket or GCRA key (burst 4, 10/s) gives
// 2 units to a refundable check at 0; by 300ms the bucket is full again,
// and 4 checks take it all. A refund of the 2 units then must give back
// nothing: the refill returned them already. Before, a late refund took
// 2 units of debt off whatever the key held, and 2 more checks passed at
// 300ms (6 within an instant where the burst is 4); the chaos harness met
// it through the cancels of a cluster's abandoned parts. A refund before
// the refill (at 50ms) still gives back what is left of the units: the key
// is full again, 4 checks pass. On memory and on a real redis-server.
func TestRefundAfterRefill(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	type backend struct {
		name string
		new  func(now func() time.Time) algorithms.Backend
	}
	backends := []backend{{"memory", func(now func() time.Time) algorithms.Backend {
		m, err := memstore.New(memstore.Config{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}}}
	if redistest.Shared != nil {
		backends = append(backends, backend{"redis", func(now func() time.Time) algorithms.Backend {
			b, err := redisstore.New(redistest.Shared.Client(t), redisstore.Config{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}})
	}
	for _, bk := range backends {
		for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.GCRA} {
			for _, tc := range []struct {
				refundAt time.Duration
				want     int // cost-1 checks that pass after the refund
			}{{300 * time.Millisecond, 0}, {50 * time.Millisecond, 4}} {
				now := t0
				b := bk.new(func() time.Time { return now })
				key := redistest.Prefix(t) + bk.name + alg.String() + tc.refundAt.String() + ":{k}"
				limit := algorithms.PerSecond(10).WithBurst(4)
				res := make([]algorithms.Result, 1)
				reserve := algorithms.Check{Key: key, Algorithm: alg, Limit: limit, Cost: 2, RefundWindow: 10 * time.Second}
				if err := b.Allow(ctx, []algorithms.Check{reserve}, res); err != nil || !res[0].Allowed {
					t.Fatalf("%s %v: reserve = %+v, %v", bk.name, alg, res[0], err)
				}
				reserved := res[0]
				one := algorithms.Check{Key: key, Algorithm: alg, Limit: limit}
				passed := func() int {
					n := 0
					for range 10 {
						if err := b.Allow(ctx, []algorithms.Check{one}, res); err != nil {
							t.Fatal(err)
						}
						if !res[0].Allowed {
							break
						}
						n++
					}
					return n
				}
				now = t0.Add(tc.refundAt)
				before := 0
				if tc.refundAt == 300*time.Millisecond {
					if before = passed(); before != 4 {
						t.Fatalf("%s %v: %d passed at 300ms, want the full burst 4", bk.name, alg, before)
					}
				}
				if err := b.(algorithms.Refunder).Refund(ctx, []algorithms.Refund{{Check: reserve, Result: reserved, Units: 2}}); err != nil {
					t.Fatalf("%s %v: refund: %v", bk.name, alg, err)
				}
				if got := passed(); got != tc.want {
					t.Errorf("%s %v: refund at %v, then %d passed, want %d", bk.name, alg, tc.refundAt, got, tc.want)
				}
			}
		}
	}
}
