package redlimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// noBlockStore is a store that fails the test when it is asked for a quota
// block: a bucket's block (TakeBlock), or a window's, which is a check of
// more units than the request costs (the block's units, given back in part
// later).
type noBlockStore struct {
	*memstore.Store
	t      *testing.T
	checks atomic.Int64
}

func (s *noBlockStore) TakeBlock(ctx context.Context, c algorithms.Check, hold time.Duration) (algorithms.Result, error) {
	s.t.Errorf("asked for a block of %d units of %s, held %v, by a rule without blocks", c.Cost, c.Key, hold)
	return s.Store.TakeBlock(ctx, c, hold)
}

func (s *noBlockStore) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	for _, c := range checks {
		if c.Cost > 1 {
			s.t.Errorf("a check of %d units of %s where every request costs 1: a window's block, by a rule without blocks", c.Cost, c.Key)
		}
	}
	s.checks.Add(int64(len(checks)))
	return s.Store.Allow(ctx, checks, results)
}

// TestNoBlocksNoBlockCode: a rule without Blocks never asks its store for
// a block, on a hot key under concurrency, for every algorithm blocks
// exist for, and decides every request at the store, exactly: the quota
// block machinery is not on its path.
func TestNoBlocksNoBlockCode(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) // a fixed clock: no window ends during the test
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow, algorithms.TokenBucket, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			store := &noBlockStore{Store: mem, t: t}
			const limit, callers, calls = 100, 8, 50
			e, err := redlimit.New(store, redlimit.Config{
				Now:   func() time.Time { return now },
				Rules: []redlimit.Rule{{Name: "hot", Algorithm: alg, Limit: algorithms.PerHour(limit)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range calls {
						d := e.Allow(context.Background(), "203.0.113.7")
						if d.Err != nil {
							t.Errorf("Allow: %v", d.Err)
							return
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			capacity := algorithms.PerHour(limit).Capacity(alg)
			if got := allowed.Load(); got != capacity {
				t.Errorf("%d of %d calls allowed, want %d (the capacity, on a clock that does not move)", got, callers*calls, capacity)
			}
			if got := store.checks.Load(); got != callers*calls {
				t.Errorf("the store decided %d checks, want every one of the %d calls", got, callers*calls)
			}
		})
	}
}
