package algorithms_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

type call struct {
	at     time.Time
	checks []algorithms.Check
}

// randomWorkload returns a random sequence of calls: one to three rules with
// random algorithms and limits, costs from 0 to capacity+1, time moving
// forward by up to two periods and sometimes backwards.
func randomWorkload(seed uint64, steps int) []call {
	rng := rand.New(rand.NewPCG(seed, 42))
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 3 * time.Second, time.Minute}
	type rule struct {
		alg   algorithms.Algorithm
		limit algorithms.Limit
	}
	rules := make([]rule, 1+rng.IntN(3))
	for i := range rules {
		r := rule{alg: algorithms.Algorithms[rng.IntN(len(algorithms.Algorithms))]}
		r.limit = algorithms.Limit{Rate: 1 + rng.Int64N(20), Period: periods[rng.IntN(len(periods))]}
		if (r.alg == algorithms.TokenBucket || r.alg == algorithms.GCRA) && rng.IntN(2) == 0 {
			r.limit.Burst = 1 + rng.Int64N(25)
		}
		rules[i] = r
	}
	now := t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
	var out []call
	for range steps {
		p := rules[0].limit.Period
		switch d := rng.IntN(10); {
		case d == 0:
			now = now.Add(-time.Duration(rng.Int64N(int64(p))))
		case d < 4:
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(2*p/time.Microsecond))) * time.Microsecond / 5)
		}
		c := call{at: now}
		for i, r := range rules {
			if i > 0 && rng.IntN(3) == 0 {
				continue
			}
			c.checks = append(c.checks, algorithms.Check{
				Key:       fmt.Sprintf("r%d:{%c}", i, 'a'+rng.IntN(2)),
				Algorithm: r.alg,
				Limit:     r.limit,
				Cost:      rng.Int64N(r.limit.Capacity(r.alg) + 2),
			})
		}
		out = append(out, c)
	}
	return out
}

func play(t *testing.T, b algorithms.Backend, c *clock, prefix string, cl call) []algorithms.Result {
	t.Helper()
	c.now = cl.at
	checks := make([]algorithms.Check, len(cl.checks))
	for i, ch := range cl.checks {
		ch.Key = prefix + ch.Key
		checks[i] = ch
	}
	res := make([]algorithms.Result, len(checks))
	if err := b.Allow(context.Background(), checks, res); err != nil {
		t.Fatalf("Allow at %v: %v", cl.at, err)
	}
	return res
}

func newMemory(t *testing.T) (*algorithms.Memory, *clock) {
	t.Helper()
	c := &clock{now: t0}
	m, err := algorithms.NewMemory(algorithms.MemoryConfig{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// TestDifferential plays random workloads against the memory backend and
// miniredis (whose clock follows the workload's, so keys expire by their
// TTL): every Result must be identical, and every key written must carry a
// TTL of exactly its ResetAfter rounded up to a millisecond. The same
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
			work := randomWorkload(seed, 120)
			mem, mc := newMemory(t)
			mr := miniredis.RunT(t)
			mr.SetTime(work[0].at)
			mini, rc := newMiniBackend(t, mr)
			var onReal, miniFrozen algorithms.Backend
			var realClock, frozenClock *clock
			if real != nil {
				realClock = &clock{}
				onReal, _ = algorithms.NewRedis(persisting{real}, algorithms.RedisConfig{Now: realClock.Now})
				miniFrozen, frozenClock = newMiniBackend(t, miniredis.RunT(t))
			}
			prefix := redistest.Prefix(t)
			storeTime := work[0].at
			for i, cl := range work {
				if cl.at.After(storeTime) {
					mr.FastForward(cl.at.Sub(storeTime))
					storeTime = cl.at
				}
				want := play(t, mem, mc, "", cl)
				got := play(t, mini, rc, "", cl)
				allowed := true
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("step %d check %d (%v %v cost %d at t0+%v): miniredis %+v, memory %+v", i, j, cl.checks[j].Algorithm, cl.checks[j].Limit, cl.checks[j].Cost, cl.at.Sub(t0), got[j], want[j])
					}
					allowed = allowed && got[j].Allowed
				}
				if allowed {
					for j, ch := range cl.checks {
						wantTTL := (want[j].ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond)
						if ttl := mr.TTL(ch.Key); ttl != wantTTL {
							t.Fatalf("step %d: TTL(%s) = %v after ResetAfter %v, want %v", i, ch.Key, ttl, want[j].ResetAfter, wantTTL)
						}
					}
				}
				if real == nil {
					continue
				}
				slow := scaled(cl, 1000)
				gotReal := play(t, onReal, realClock, prefix, slow)
				wantFrozen := play(t, miniFrozen, frozenClock, "", slow)
				for j := range gotReal {
					if gotReal[j] != wantFrozen[j] {
						t.Fatalf("step %d check %d (%v %v cost %d): redis-server %+v, miniredis %+v", i, j, cl.checks[j].Algorithm, cl.checks[j].Limit, cl.checks[j].Cost, gotReal[j], wantFrozen[j])
					}
				}
			}
		})
	}
}

// scaled returns c with its time offset from t0 and its periods multiplied
// by f: the same workload, slower.
func scaled(c call, f int64) call {
	out := call{at: t0.Add(c.at.Sub(t0) * time.Duration(f)), checks: append([]algorithms.Check(nil), c.checks...)}
	for j := range out.checks {
		out.checks[j].Limit.Period *= time.Duration(f)
	}
	return out
}

func newMiniBackend(t *testing.T, mr *miniredis.Miniredis) (algorithms.Backend, *clock) {
	t.Helper()
	// No retries: a script retried after a timeout on a loaded machine
	// would run twice.
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { client.Close() })
	c := &clock{}
	b, err := algorithms.NewRedis(client, algorithms.RedisConfig{Now: c.Now})
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
		work := randomWorkload(seed, 80)
		b, c := newMemory(t)
		for i, cl := range work {
			res := play(t, b, c, "", cl)
			for j, r := range res {
				if r.Allowed || r.Never() || probes > 3000 {
					continue
				}
				probes++
				// Replay the history into a fresh backend, the denied call
				// included (it consumed nothing, but may have cut a bucket's
				// debt that the clock going back grew: see bucketDebt), then
				// probe.
				fresh, fc := newMemory(t)
				for _, h := range work[:i+1] {
					play(t, fresh, fc, "", h)
				}
				probe := call{at: cl.at.Add(r.RetryAfter - time.Microsecond), checks: cl.checks[j : j+1]}
				if got := play(t, fresh, fc, "", probe)[0]; got.Allowed {
					t.Fatalf("seed %d step %d: %v %v cost %d denied with RetryAfter %v but allowed %v earlier",
						seed, i, cl.checks[j].Algorithm, cl.checks[j].Limit, cl.checks[j].Cost, r.RetryAfter, time.Microsecond)
				}
				probe.at = cl.at.Add(r.RetryAfter)
				if got := play(t, fresh, fc, "", probe)[0]; !got.Allowed {
					t.Fatalf("seed %d step %d: %v %v cost %d denied with RetryAfter %v, still denied then: %+v",
						seed, i, cl.checks[j].Algorithm, cl.checks[j].Limit, cl.checks[j].Cost, r.RetryAfter, got)
				}
			}
		}
	}
	if probes < 200 {
		t.Fatalf("only %d denials probed; the workload no longer exercises RetryAfter", probes)
	}
}

// persisting runs every script in MULTI/EXEC followed by PERSIST of its
// keys, so a real server's clock cannot expire keys between steps of a
// workload that runs on a clock of its own.
type persisting struct{ *redis.Client }

func (p persisting) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.Client, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.EvalSha(ctx, sha, keys, args...) })
}

func (p persisting) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.Client, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.Eval(ctx, src, keys, args...) })
}

// persistInTx runs one script command in MULTI/EXEC, followed by PERSIST of
// its keys.
func persistInTx(ctx context.Context, c interface {
	TxPipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
}, keys []string, script func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	var cmd *redis.Cmd
	c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		cmd = script(pipe)
		for _, k := range keys {
			pipe.Persist(ctx, k)
		}
		return nil
	})
	return cmd
}
