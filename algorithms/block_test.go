package algorithms_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/internal/redistest"
)

// blockLimits are the bucket limits the block tests draw from: whole and
// fractional emission intervals, a burst above and below the rate.
var blockLimits = []algorithms.Limit{
	{Rate: 10, Period: time.Second, Burst: 20},
	{Rate: 7, Period: 3 * time.Second},
	{Rate: 1000, Period: time.Second, Burst: 50},
	{Rate: 3, Period: time.Second, Burst: 6},
	{Rate: 5, Period: time.Second, Burst: 2},
}

// blockStep plays one step on b: a block when hold > 0, else a check.
func blockStep(t *testing.T, b algorithms.Backend, c algorithms.Check, hold time.Duration) algorithms.Result {
	t.Helper()
	if hold > 0 {
		r, err := b.(algorithms.Blocker).TakeBlock(context.Background(), c, hold)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var r [1]algorithms.Result
	if err := b.Allow(context.Background(), []algorithms.Check{c}, r[:]); err != nil {
		t.Fatal(err)
	}
	return r[0]
}

// TestBlockDifferential plays random blocks and checks of token bucket
// and GCRA keys (time now and then going back) on the memory backend and
// miniredis, whose clock follows, and on a real redis-server and a frozen
// miniredis: every Result must be identical.
func TestBlockDifferential(t *testing.T) {
	var real *redis.Client
	if redistest.Shared != nil {
		real = redistest.Shared.Client(t)
	}
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 24))
			d := newDifferential(t, backendtest.T0, real)
			at := backendtest.T0
			allowed := 0
			for i := range 200 {
				step := time.Duration(rng.IntN(200_000)) * time.Microsecond
				if rng.IntN(10) == 0 {
					step = -step // the clock goes back
				}
				at = at.Add(step)
				d.advance(at)
				d.mc.T, d.rc.T = at, at
				alg := algorithms.GCRA
				if rng.IntN(2) == 0 {
					alg = algorithms.TokenBucket
				}
				lim := blockLimits[rng.IntN(len(blockLimits))]
				c := algorithms.Check{Key: fmt.Sprintf("block:%v:%d", alg, rng.IntN(2)), Algorithm: alg, Limit: lim,
					Cost: 1 + rng.Int64N(lim.Capacity(alg))}
				var hold time.Duration
				if rng.IntN(3) > 0 {
					hold = time.Duration(1+rng.IntN(400_000)) * time.Microsecond
				}
				want := blockStep(t, d.mem, c, hold)
				got := blockStep(t, d.mini, c, hold)
				if got != want {
					t.Fatalf("step %d (%v %v cost %d hold %v at t0+%v): miniredis %+v, memory %+v", i, alg, lim, c.Cost, hold, at.Sub(backendtest.T0), got, want)
				}
				if want.Allowed && hold > 0 {
					allowed++
				}
				if real == nil {
					continue
				}
				d.realClock.T, d.frozenClock.T = at, at
				want = blockStep(t, d.miniFrozen, c, hold)
				rc := c
				rc.Key = d.prefix + c.Key
				if got := blockStep(t, d.onReal, rc, hold); got != want {
					t.Fatalf("step %d (%v %v cost %d hold %v): redis-server %+v, miniredis %+v", i, alg, lim, c.Cost, hold, got, want)
				}
			}
			if allowed < 20 {
				t.Errorf("%d blocks allowed in 200 steps: the workload no longer takes blocks", allowed)
			}
		})
	}
}

// TestBlockBound: instances taking blocks of one bucket key and using
// their units at random instants within each block's hold, beside checks
// sent one by one, never admit more than burst + rate × interval over any
// interval between two admissions; and a block stored at its now (a
// hold of 1µs) while its units are used over 100ms is caught by the same
// replay.
func TestBlockBound(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.GCRA, algorithms.TokenBucket} {
		for _, lim := range blockLimits {
			if lim.Capacity(alg) < 4 {
				continue // no block of 2 units or more
			}
			t.Run(fmt.Sprintf("%v/%v", alg, lim), func(t *testing.T) {
				t.Parallel()
				for seed := uint64(1); seed <= 10; seed++ {
					if over := playBlocks(t, alg, lim, seed, false); over != "" {
						t.Fatalf("seed %d: %s", seed, over)
					}
				}
				caught := 0
				for seed := uint64(1); seed <= 10; seed++ {
					if playBlocks(t, alg, lim, seed, true) != "" {
						caught++
					}
				}
				if caught == 0 {
					t.Error("blocks stored at their now were never caught over the bound: the replay cannot fail")
				}
			})
		}
	}
}

// playBlocks plays 4 instances on one key for 20 periods of the limit
// (memstore, an injected clock): each, at random instants, either takes
// a block of up to half of what the key has left and uses its units
// at random instants within its hold (100ms, or a quarter of the full
// window when less), or sends a check of one unit. With early, a block is
// stored at its now instead (the units still used over the hold). It
// returns a description of the first interval over the bound, or "".
func playBlocks(t *testing.T, alg algorithms.Algorithm, lim algorithms.Limit, seed uint64, early bool) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 25))
	m, clk := newMemory(t)
	capacity := lim.Capacity(alg)
	full := time.Duration(float64(lim.Period) * float64(capacity) / float64(lim.Rate))
	hold := min(100*time.Millisecond, full/4).Truncate(time.Microsecond)
	end := backendtest.T0.Add(20 * lim.Period)
	type use struct {
		at time.Time
		n  int64
	}
	var pending, admitted []use // block units not yet used; admissions
	at := backendtest.T0
	left := capacity
	for at.Before(end) {
		// arrivals about twice the rate: the key runs empty
		at = at.Add(time.Duration(1+rng.Int64N(int64(lim.Period/time.Microsecond)/lim.Rate+1)) * time.Microsecond)
		// units of blocks whose instant has come
		slices.SortFunc(pending, func(a, b use) int { return a.at.Compare(b.at) })
		for len(pending) > 0 && !pending[0].at.After(at) {
			admitted = append(admitted, pending[0])
			pending = pending[1:]
		}
		clk.T = at
		c := algorithms.Check{Key: "hot", Algorithm: alg, Limit: lim, Cost: 1}
		if k := left / 2; k >= 2 && rng.IntN(2) == 0 {
			c.Cost = 1 + rng.Int64N(k)
			h := hold
			if early {
				h = time.Microsecond
			}
			r, err := m.TakeBlock(context.Background(), c, h)
			if err != nil {
				t.Fatal(err)
			}
			left = r.Remaining
			if r.Allowed {
				// at random instants within the hold, or all at its end
				last := rng.IntN(2) == 0
				for range c.Cost {
					d := hold
					if !last {
						d = time.Duration(rng.Int64N(int64(hold/time.Microsecond)+1)) * time.Microsecond
					}
					pending = append(pending, use{at.Add(d), 1})
				}
			}
			continue
		}
		var r [1]algorithms.Result
		if err := m.Allow(context.Background(), []algorithms.Check{c}, r[:]); err != nil {
			t.Fatal(err)
		}
		left = r[0].Remaining
		if r[0].Allowed {
			admitted = append(admitted, use{at, 1})
		}
	}
	admitted = append(admitted, pending...)
	slices.SortFunc(admitted, func(a, b use) int { return a.at.Compare(b.at) })
	if len(admitted) < int(capacity) {
		t.Fatalf("%d admitted over 20 periods: the workload no longer loads the key", len(admitted))
	}
	// over [a_i, a_j]: j-i+1 units, at most capacity + rate × interval,
	// that is (j+1-capacity)·period - a_j·rate <= i·period - a_i·rate for
	// every i <= j: one pass, keeping the least right-hand side
	p, r := int64(lim.Period), lim.Rate
	least, first := int64(math.MaxInt64), 0
	for j, u := range admitted {
		a := int64(u.at.Sub(backendtest.T0))
		if w := int64(j)*p - a*r; w < least {
			least, first = w, j
		}
		if (int64(j)+1-capacity)*p-a*r > least {
			return fmt.Sprintf("%d units admitted over %v (t0+%v..t0+%v), more than %d + %v × interval", j-first+1,
				u.at.Sub(admitted[first].at), admitted[first].at.Sub(backendtest.T0), u.at.Sub(backendtest.T0), capacity, lim)
		}
	}
	return ""
}

// TestBlockValidate: what a Blocker refuses, naming the field.
func TestBlockValidate(t *testing.T) {
	m, _ := newMemory(t)
	ok := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10), Cost: 2}
	for _, tc := range []struct {
		name string
		c    algorithms.Check
		hold time.Duration
		want string
	}{
		{"fixed window", algorithms.Check{Key: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10)}, time.Second, "Check.Algorithm must be token_bucket or gcra"},
		{"refundable", func() algorithms.Check { c := ok; c.RefundWindow = time.Second; return c }(), time.Second, "Check.RefundWindow must be 0 for a block"},
		{"hold 0", ok, 0, "hold must be between 1µs and 10s, got 0s"},
		{"hold 11s", ok, 11 * time.Second, "hold must be between 1µs and 10s, got 11s"},
		{"no key", algorithms.Check{Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10)}, time.Second, "Check.Key must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.TakeBlock(context.Background(), tc.c, tc.hold)
			if !errors.Is(err, algorithms.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("TakeBlock = %v, want %q", err, tc.want)
			}
		})
	}
}
