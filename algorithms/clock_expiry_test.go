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

// failover is the schedule of TestFailoverKeyExpiry: 3.5 s of true time,
// of which [1 s, 2.5 s) is served by a node whose clock is behind.
const (
	failoverAt = time.Second
	failbackAt = 2500 * time.Millisecond
	failoverTo = 3500 * time.Millisecond
)

// nodeClock is the clock of the node serving at true time t: behind by
// step between the failover and the failback.
func nodeClock(t, step time.Duration) time.Duration {
	if t >= failoverAt && t < failbackAt {
		return t - step
	}
	return t
}

// TestFailoverKeyExpiry is the regression test of a bucket key that
// expired before its state was full on a clock behind the one that wrote
// it. A greedy client checks every 10 ms for 3.5 s of true time; from
// 1 s to 2.5 s it is served by a node whose clock is step behind (a
// failover to a replica whose clock is behind, then the failback). Each
// check's clock, injected as Config.Now, is its node's; the keys expire
// on the server's own clock, which follows the true time (miniredis,
// moved on with it; a real redis-server, in real time). The node behind
// finds the debts written before the failover larger by step and waits
// for them (time going back never creates capacity), and the failback's
// step forward refills what it waited: the client gets no more than on a
// clock that never steps. Before, a bucket key's TTL was exactly its
// writer's time to full, so it expired on the clock of TTLs up to step
// before its state was full on the node behind, which took a full bucket
// at once; the failback's step then refilled again (token bucket and
// GCRA at 10/s, step 1 s: 48 admitted where a clock that never steps
// admits 40).
func TestFailoverKeyExpiry(t *testing.T) {
	t.Parallel()
	algs := []algorithms.Algorithm{algorithms.TokenBucket, algorithms.GCRA}
	steps := []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second}
	for _, alg := range algs {
		t.Run("miniredis/"+alg.String(), func(t *testing.T) {
			t.Parallel()
			run := func(step time.Duration) int {
				mr := miniredis.RunT(t)
				b, c := newMiniBackend(t, mr)
				check := []algorithms.Check{{Key: "{k}", Algorithm: alg, Limit: algorithms.PerSecond(10)}}
				res := make([]algorithms.Result, 1)
				allowed := 0
				var last time.Duration
				for at := time.Duration(0); at < failoverTo; at += 10 * time.Millisecond {
					mr.FastForward(at - last) // the clock of TTLs: the true time
					last = at
					c.T = backendtest.T0.Add(nodeClock(at, step))
					if err := b.Allow(context.Background(), check, res); err != nil {
						t.Fatal(err)
					}
					if res[0].Allowed {
						allowed++
					}
				}
				return allowed
			}
			mono := run(0)
			if mono < 43 || mono > 45 {
				t.Fatalf("a clock that never steps: %d allowed, want 43 to 45 for 10/s over 3.5 s", mono)
			}
			for _, step := range steps {
				if got := run(step); got > mono {
					t.Errorf("a failover to a node %v behind and back: %d allowed, more than the %d of a clock that never steps", step, got, mono)
				}
			}
		})
	}
	if redistest.Shared == nil {
		return
	}
	// On a real redis-server the true time is the real one: each run takes
	// 3.5 s, all side by side. A loaded machine checks less often, which
	// only lowers what a greedy client gets (a bucket refills while it
	// waits, up to its burst); the runs are compared with a margin of 3
	// units for checks that land on either side of a refill.
	for _, alg := range algs {
		for _, step := range append([]time.Duration{0}, steps...) {
			t.Run(fmt.Sprintf("redis/%v/step=%v", alg, step), func(t *testing.T) {
				t.Parallel()
				client := redistest.Shared.Client(t)
				prefix := redistest.Prefix(t)
				start := time.Now()
				var elapsed time.Duration
				b, err := redisstore.New(client, redisstore.Config{Now: func() time.Time { return start.Add(nodeClock(elapsed, step)) }, Pipelines: -1})
				if err != nil {
					t.Fatal(err)
				}
				check := []algorithms.Check{{Key: prefix + "{k}", Algorithm: alg, Limit: algorithms.PerSecond(10)}}
				res := make([]algorithms.Result, 1)
				allowed := 0
				for elapsed = time.Since(start); elapsed < failoverTo; elapsed = time.Since(start) {
					if err := b.Allow(context.Background(), check, res); err != nil {
						t.Fatal(err)
					}
					if res[0].Allowed {
						allowed++
					}
					time.Sleep(10 * time.Millisecond)
				}
				t.Logf("%d allowed in %v", allowed, failoverTo)
				// 10 at once, then one per 100 ms of the 3.5 s
				if most := 10 + 35 + 3; allowed > most {
					t.Errorf("a failover to a node %v behind and back: %d allowed, more than the %d a clock that never steps admits (and 3 for timing)", step, allowed, most-3)
				}
			})
		}
	}
}
