package algorithms_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// leaseOp is one step of a concurrency workload: an acquisition (a
// concurrency check, alone or layered with a rate check), a release or a
// renewal of an earlier acquisition's lease.
type leaseOp struct {
	at     time.Time
	op     string // "allow", "release", "renew"
	checks []algorithms.Check
	lease  algorithms.Lease
}

// leaseWorkload returns random acquisitions, releases (sometimes twice,
// sometimes of a lease that was never held) and renewals on two keys of a
// concurrency limit, time moving forward by up to a lease and sometimes
// back.
func leaseWorkload(seed uint64, steps int) []leaseOp {
	rng := rand.New(rand.NewPCG(seed, 99))
	lease := []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute}[rng.IntN(4)]
	limit := algorithms.InFlight(1+rng.Int64N(6), lease)
	rate := algorithms.Limit{Rate: 1 + rng.Int64N(20), Period: time.Second}
	now := backendtest.T0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
	var taken []algorithms.Lease
	var out []leaseOp
	for i := range steps {
		switch d := rng.IntN(10); {
		case d == 0:
			now = now.Add(-time.Duration(rng.Int64N(int64(lease))))
		case d < 4:
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(lease/time.Microsecond))) * time.Microsecond / 3)
		}
		key := fmt.Sprintf("cc:{%c}", 'a'+rng.IntN(2))
		switch r := rng.IntN(10); {
		case r < 3 && len(taken) > 0:
			out = append(out, leaseOp{at: now, op: "release", lease: taken[rng.IntN(len(taken))]})
		case r < 5 && len(taken) > 0:
			out = append(out, leaseOp{at: now, op: "renew", lease: taken[rng.IntN(len(taken))]})
		default:
			c := algorithms.Check{Key: key, Algorithm: algorithms.Concurrency, Limit: limit, Cost: rng.Int64N(limit.Rate + 2), Lease: uint64(i + 1)}
			op := leaseOp{at: now, op: "allow", checks: []algorithms.Check{c}}
			if rng.IntN(3) == 0 {
				op.checks = append(op.checks, algorithms.Check{Key: "rate:" + key, Algorithm: algorithms.GCRA, Limit: rate})
			}
			out = append(out, op)
			taken = append(taken, algorithms.Lease{Key: key, ID: c.Lease, Cost: c.Cost, Period: lease})
		}
	}
	return out
}

// playLease plays op on b at its time (on clock c), keys prefixed with
// prefix, and returns what it answered: the Results of an acquisition,
// whether a renewed lease was held.
func playLease(t *testing.T, b algorithms.Backend, c *backendtest.Clock, prefix string, op leaseOp) ([]algorithms.Result, bool) {
	t.Helper()
	c.T = op.at
	ctx := context.Background()
	l := op.lease
	l.Key = prefix + l.Key
	switch op.op {
	case "release":
		if err := b.(algorithms.Leaser).Release(ctx, []algorithms.Lease{l}); err != nil {
			t.Fatalf("Release at %v: %v", op.at, err)
		}
		return nil, false
	case "renew":
		held := make([]bool, 1)
		if err := b.(algorithms.Leaser).Renew(ctx, []algorithms.Lease{l}, held); err != nil {
			t.Fatalf("Renew at %v: %v", op.at, err)
		}
		return nil, held[0]
	}
	return backendtest.Run(t, b, c, prefix, backendtest.Call{At: op.at, Checks: op.checks}), false
}

// TestConcurrencyDifferential plays random acquisitions, releases and
// renewals against memstore and miniredis (whose clock follows the
// workload's, expiring keys by their TTL) and, time scaled by 1000, a
// real redis-server against a frozen miniredis: every Result, every
// renewal's answer and every TTL agree, and no key ever holds more
// members than its limit (Redis memory stays bounded).
func TestConcurrencyDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			work := leaseWorkload(seed, 150)
			mem, mc := newMemory(t)
			mr := miniredis.RunT(t)
			mr.SetTime(work[0].at)
			mini, rc := newMiniBackend(t, mr)
			var onReal, frozen algorithms.Backend
			var realClock, frozenClock *backendtest.Clock
			if redistest.Shared != nil {
				realClock = &backendtest.Clock{}
				onReal, _ = redisstore.New(backendtest.Persisting{Client: redistest.Shared.Client(t)}, redisstore.Config{Now: realClock.Now})
				frozen, frozenClock = newMiniBackend(t, miniredis.RunT(t))
			}
			prefix := redistest.Prefix(t)
			storeTime := work[0].at
			denied := 0
			var capacity int64
			for _, op := range work {
				if op.op == "allow" {
					capacity = op.checks[0].Limit.Rate
				}
			}
			for i, op := range work {
				if op.at.After(storeTime) {
					mr.FastForward(op.at.Sub(storeTime))
					storeTime = op.at
				}
				want, wantHeld := playLease(t, mem, mc, "", op)
				got, gotHeld := playLease(t, mini, rc, "", op)
				if gotHeld != wantHeld {
					t.Fatalf("step %d %s %+v: miniredis held %v, memory %v", i, op.op, op.lease, gotHeld, wantHeld)
				}
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("step %d check %d (%+v at t0+%v): miniredis %+v, memory %+v", i, j, op.checks[j], op.at.Sub(backendtest.T0), got[j], want[j])
					}
					if !got[j].Allowed {
						denied++
					}
				}
				for _, k := range []string{"cc:{a}", "cc:{b}"} {
					if !mr.Exists(k) {
						continue
					}
					set, err := mr.SortedSet(k)
					if err != nil {
						t.Fatal(err)
					}
					if int64(len(set)) > capacity {
						t.Fatalf("step %d: %s holds %d members, limit %d", i, k, len(set), capacity)
					}
					last := 0.0
					for _, score := range set {
						last = max(last, score)
					}
					// the TTL set by the last script that touched the key
					// lasts until its last lease expires, at least, on the
					// store's clock (which never goes back; µs, as the
					// scripts see it)
					if ttl, least := mr.TTL(k), time.Duration(int64(last)-storeTime.UnixMicro())*time.Microsecond; ttl+time.Microsecond < least || ttl <= 0 {
						t.Fatalf("step %d: TTL(%s) = %v, its last lease expires in %v", i, k, ttl, least)
					}
				}
				if onReal == nil {
					continue
				}
				slow := op
				slow.at = backendtest.T0.Add(op.at.Sub(backendtest.T0) * 1000)
				slow.lease.Period *= 1000
				slow.checks = nil
				for _, c := range op.checks {
					c.Limit.Period *= 1000
					slow.checks = append(slow.checks, c)
				}
				gotReal, heldReal := playLease(t, onReal, realClock, prefix, slow)
				wantFrozen, heldFrozen := playLease(t, frozen, frozenClock, "", slow)
				if heldReal != heldFrozen {
					t.Fatalf("step %d: redis-server held %v, miniredis %v", i, heldReal, heldFrozen)
				}
				for j := range gotReal {
					if gotReal[j] != wantFrozen[j] {
						t.Fatalf("step %d check %d: redis-server %+v, miniredis %+v", i, j, gotReal[j], wantFrozen[j])
					}
				}
			}
			if denied == 0 {
				t.Fatalf("seed %d: no denial in the workload", seed)
			}
		})
	}
}
