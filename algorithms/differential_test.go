package algorithms_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

func newMemory(t *testing.T) (*memstore.Store, *backendtest.Clock) {
	t.Helper()
	c := &backendtest.Clock{T: backendtest.T0}
	m, err := memstore.New(memstore.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// TestDifferential plays random workloads against the memory backend and
// miniredis (whose clock follows the workload's, so keys expire by their
// TTL): every Result must be identical, and every key written must carry a
// TTL of exactly its ResetAfter rounded up to a millisecond (a token
// bucket's or GCRA's a second more: a clock not the server's). The same
// workload also runs on a real redis-server, compared with a second
// miniredis whose clock stands still, scaled to milliseconds (time × 1000);
// there each script runs in a transaction with PERSIST of its keys, since a
// real server expires keys by its own clock, not the workload's (and a 1ms
// TTL can run out within a transaction on a loaded machine).
func TestDifferential(t *testing.T) {
	var real *redis.Client
	if redistest.Shared != nil {
		real = redistest.Shared.Client(t)
	}
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			work := backendtest.RandomWorkload(seed, 120)
			d := newDifferential(t, work[0].At, real)
			mem, mc, mr, mini, rc := d.mem, d.mc, d.mr, d.mini, d.rc
			onReal, realClock, miniFrozen, frozenClock, prefix := d.onReal, d.realClock, d.miniFrozen, d.frozenClock, d.prefix
			for i, cl := range work {
				d.advance(cl.At)
				want := backendtest.Run(t, mem, mc, "", cl)
				got := backendtest.Run(t, mini, rc, "", cl)
				allowed := true
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("step %d check %d (%v %v cost %d at t0+%v): miniredis %+v, memory %+v", i, j, cl.Checks[j].Algorithm, cl.Checks[j].Limit, cl.Checks[j].Cost, cl.At.Sub(backendtest.T0), got[j], want[j])
					}
					allowed = allowed && got[j].Allowed
				}
				if allowed {
					for j, ch := range cl.Checks {
						wantTTL := (want[j].ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond)
						if ch.Algorithm == algorithms.TokenBucket || ch.Algorithm == algorithms.GCRA {
							// on a clock not the server's, a bucket key
							// outlives its state by a second (see
							// bucket_ttl in lua/prelude.lua)
							wantTTL += time.Second
						}
						if ttl := mr.TTL(ch.Key); ttl != wantTTL {
							t.Fatalf("step %d: TTL(%s) = %v after ResetAfter %v, want %v", i, ch.Key, ttl, want[j].ResetAfter, wantTTL)
						}
					}
				}
				if real == nil {
					continue
				}
				slow := backendtest.Scaled(cl, 1000)
				gotReal := backendtest.Run(t, onReal, realClock, prefix, slow)
				wantFrozen := backendtest.Run(t, miniFrozen, frozenClock, "", slow)
				for j := range gotReal {
					if gotReal[j] != wantFrozen[j] {
						t.Fatalf("step %d check %d (%v %v cost %d): redis-server %+v, miniredis %+v", i, j, cl.Checks[j].Algorithm, cl.Checks[j].Limit, cl.Checks[j].Cost, gotReal[j], wantFrozen[j])
					}
				}
			}
		})
	}
}

// differential is what one seed of a differential test plays on: the
// memory backend and a Redis backend on miniredis, whose clock follows the
// workload's (advance), and, when a redis-server runs, a Redis backend on
// it and one on a miniredis whose clock stands still, for the workload
// scaled to milliseconds.
type differential struct {
	mem                    *memstore.Store
	mini                   algorithms.Backend
	mr                     *miniredis.Miniredis
	onReal, miniFrozen     algorithms.Backend // nil without a redis-server
	mc, rc                 *backendtest.Clock
	realClock, frozenClock *backendtest.Clock
	prefix                 string
	storeTime              time.Time // miniredis's time
}

func newDifferential(t *testing.T, start time.Time, real *redis.Client) *differential {
	t.Helper()
	d := &differential{mr: miniredis.RunT(t), prefix: redistest.Prefix(t), storeTime: start}
	d.mem, d.mc = newMemory(t)
	d.mr.SetTime(start)
	d.mini, d.rc = newMiniBackend(t, d.mr)
	if real != nil {
		d.realClock = &backendtest.Clock{}
		d.onReal, _ = redisstore.New(backendtest.Persisting{Client: real}, redisstore.Config{Now: d.realClock.Now})
		d.miniFrozen, d.frozenClock = newMiniBackend(t, miniredis.RunT(t))
	}
	return d
}

// advance moves miniredis's time to at, never back.
func (d *differential) advance(at time.Time) {
	if at.After(d.storeTime) {
		d.mr.FastForward(at.Sub(d.storeTime))
		d.storeTime = at
	}
}

func newMiniBackend(t *testing.T, mr *miniredis.Miniredis) (algorithms.Backend, *backendtest.Clock) {
	t.Helper()
	// No retries: a script retried after a timeout on a loaded machine
	// would run twice.
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { client.Close() })
	c := &backendtest.Clock{}
	b, err := redisstore.New(client, redisstore.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// TestRetryAfterIsExact: whenever a check is denied with RetryAfter d, the
// same check alone is still denied at now+d-1µs and allowed at now+d.
func TestRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	probes := 0
	for seed := uint64(100); seed < 160; seed++ {
		work := backendtest.RandomWorkload(seed, 80)
		b, c := newMemory(t)
		for i, cl := range work {
			res := backendtest.Run(t, b, c, "", cl)
			for j, r := range res {
				if r.Allowed || r.RetryAfter == 0 || probes > 3000 {
					continue
				}
				probes++
				// Replay the history into a fresh backend, the denied call
				// included (it consumed nothing, but may have cut a bucket's
				// debt under a limit that changed: see bucketDebt), then
				// probe.
				fresh, fc := newMemory(t)
				for _, h := range work[:i+1] {
					backendtest.Run(t, fresh, fc, "", h)
				}
				probe := backendtest.Call{At: cl.At.Add(r.RetryAfter - time.Microsecond), Checks: cl.Checks[j : j+1]}
				if got := backendtest.Run(t, fresh, fc, "", probe)[0]; got.Allowed {
					t.Fatalf("seed %d step %d: %v %v cost %d denied with RetryAfter %v but allowed %v earlier",
						seed, i, cl.Checks[j].Algorithm, cl.Checks[j].Limit, cl.Checks[j].Cost, r.RetryAfter, time.Microsecond)
				}
				probe.At = cl.At.Add(r.RetryAfter)
				if got := backendtest.Run(t, fresh, fc, "", probe)[0]; !got.Allowed {
					t.Fatalf("seed %d step %d: %v %v cost %d denied with RetryAfter %v, still denied then: %+v",
						seed, i, cl.Checks[j].Algorithm, cl.Checks[j].Limit, cl.Checks[j].Cost, r.RetryAfter, got)
				}
			}
		}
	}
	if probes < 200 {
		t.Fatalf("only %d denials probed; the workload no longer exercises RetryAfter", probes)
	}
}
