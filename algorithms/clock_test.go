package algorithms_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// clockSchedule returns the instants at which a greedy client checks: every
// 10ms from 0 to 5s and, when back > 0, every 100ms up to 4s a detour to
// back earlier (a failover to a server whose clock is behind) for 3
// checks, then forward again (the failback) — the clock going back and
// forth. The last second has no detour, so that the client saturates it
// as on a clock that never goes back: the two runs then differ only by
// what the steps back handed out.
func clockSchedule(back time.Duration) []time.Duration {
	var at []time.Duration
	for t := time.Duration(0); t <= 5*time.Second; t += 10 * time.Millisecond {
		at = append(at, t)
		if back > 0 && t%(100*time.Millisecond) == 0 && t > 0 && t <= 4*time.Second {
			for i := range 3 {
				at = append(at, max(t-back, 0)+time.Duration(i)*10*time.Millisecond)
			}
		}
	}
	return at
}

// TestClockBackAndForth is the regression test of a clock that goes back
// and forth creating capacity: a greedy client (10/s) checking every 10ms
// for 5s on a clock that steps back every 100ms by 100ms to 10s, and
// forward again, is allowed no more than on a clock that never goes back,
// for every algorithm, on memory, miniredis and a real redis-server. (The
// token bucket and GCRA once cut the debt that the step back grew and
// stored the cut: 91 allowed for a 100ms step, 556 for 1s, where 60 is the
// most a 10/s limit admits in 5s.)
func TestClockBackAndForth(t *testing.T) {
	t.Parallel()
	type backend struct {
		name string
		make func(t *testing.T) (algorithms.Backend, *backendtest.Clock)
	}
	backends := []backend{
		{"memory", func(t *testing.T) (algorithms.Backend, *backendtest.Clock) {
			m, c := newMemory(t)
			return m, c
		}},
		// miniredis's time stands still: keys never expire, which reads
		// the same as a key that expired at full capacity.
		{"miniredis", func(t *testing.T) (algorithms.Backend, *backendtest.Clock) {
			return newMiniBackend(t, miniredis.RunT(t))
		}},
	}
	if redistest.Shared != nil {
		backends = append(backends, backend{"redis", func(t *testing.T) (algorithms.Backend, *backendtest.Clock) {
			c := &backendtest.Clock{}
			b, err := redisstore.New(backendtest.Persisting{Client: redistest.Shared.Client(t)}, redisstore.Config{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			return b, c
		}})
	}
	algs := []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingLog, algorithms.SlidingWindow, algorithms.TokenBucket, algorithms.GCRA}
	steps := []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second}
	for _, be := range backends {
		for _, alg := range algs {
			t.Run(be.name+"/"+alg.String(), func(t *testing.T) {
				prefix := redistest.Prefix(t)
				run := func(key string, back time.Duration) int {
					b, c := be.make(t)
					check := []algorithms.Check{{Key: prefix + key, Algorithm: alg, Limit: algorithms.PerSecond(10)}}
					res := make([]algorithms.Result, 1)
					allowed := 0
					for _, at := range clockSchedule(back) {
						c.T = backendtest.T0.Add(at)
						if err := b.Allow(context.Background(), check, res); err != nil {
							t.Fatal(err)
						}
						if res[0].Allowed {
							allowed++
						}
					}
					return allowed
				}
				mono := run("{mono}", 0)
				if mono < 47 || mono > 60 {
					t.Fatalf("monotonic clock: %d allowed, want 47 to 60 for 10/s over 5s", mono)
				}
				for _, back := range steps {
					if got := run(fmt.Sprintf("{back%v}", back), back); got > mono {
						t.Errorf("clock stepping back by %v and forth: %d allowed, more than the %d of a clock that never goes back", back, got, mono)
					}
				}
			})
		}
	}
}
