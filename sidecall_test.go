package redlimit_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// deaf is a backend whose refunds and releases ignore their context and
// take hold to answer, as a go-redis client without ContextTimeoutEnabled
// does during a pause: it waits for its ReadTimeout.
type deaf struct {
	leasing
	hold time.Duration
}

func (d *deaf) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	time.Sleep(d.hold)
	return d.next.Refund(context.Background(), refunds)
}

func (d *deaf) Release(ctx context.Context, leases []algorithms.Lease) error {
	time.Sleep(d.hold)
	return d.next.Release(context.Background(), leases)
}

// TestSideCallsBounded: Settle (its release and its refund) returns by Config.Timeout even
// when the backend ignores their context (the chaos harness found them
// waiting 100-228ms against a Timeout of 50ms during pauses and
// failovers); the abandoned call goes on in the background and counts as
// stalled until it returns.
func TestSideCallsBounded(t *testing.T) {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &deaf{leasing: leasing{remote: remote{next: m}}, hold: 3 * time.Second}
	e, err := redlimit.New(b, redlimit.Config{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Rules: []redlimit.Rule{
		{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(10), Refundable: true},
		{Name: "c", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(2, time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	d := e.Allow(ctx, "k")
	if !d.Allowed {
		t.Fatalf("first decision: %+v", d)
	}
	start := time.Now()
	err = e.Settle(ctx, d, redlimit.Cost{Rule: "r", Units: 0})
	// generous bounds: a loaded machine is late, never 3s late
	if took := time.Since(start); took > 2*time.Second || err == nil {
		t.Errorf("Settle (release and refund) on a backend that ignores its context: %v after %v, want an error within about two 50ms Timeouts", err, took)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 2 {
		t.Errorf("Settle's error %q joins %d errors, want 2: the release's and the refund's", err, n)
	}
	if e.Status().Stalled == 0 {
		t.Error("the abandoned refund and release are not counted as stalled")
	}
}

// slowBlocks is a memstore whose every call takes hold first, once slow
// is set (a Redis that has become slow), ignoring its context.
type slowBlocks struct {
	contract.Carrier // none: it stands for a remote store, not in process
	*memstore.Store
	hold time.Duration
	slow *atomic.Bool
}

func (s slowBlocks) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if s.slow.Load() {
		time.Sleep(s.hold)
	}
	return s.Store.Allow(context.Background(), checks, results)
}

func (s slowBlocks) TakeBlock(ctx context.Context, c algorithms.Check, hold time.Duration) (algorithms.Result, error) {
	if s.slow.Load() {
		time.Sleep(s.hold)
	}
	return s.Store.TakeBlock(context.Background(), c, hold)
}

// TestBlockWaitBounded: a request that waits for a quota block being
// taken and then calls the backend answers within one Timeout, not two
// (the chaos harness found decisions of 90–111ms against a Timeout of
// 50ms: the wait and the call each had a Timeout of their own), refused
// undecided under the Fallback policy: a call cut short by the wait says
// nothing of the store, and the fallback does not decide it.
func TestBlockWaitBounded(t *testing.T) {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			var slow atomic.Bool
			e, err := redlimit.New(slowBlocks{Store: m, hold: 5 * timeout, slow: &slow}, redlimit.Config{Timeout: timeout, OnError: redlimit.Fallback, Prefix: alg.String(),
				Logger: slog.New(slog.DiscardHandler), Rules: []redlimit.Rule{
					{Name: "r", Algorithm: alg, Limit: algorithms.PerMinute(1_000_000), Blocks: &redlimit.BlockConfig{Max: 4}},
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for range 20 { // the key is hot: blocks of 4
				e.Allow(ctx, "k")
			}
			slow.Store(true)
			// the block in use runs out, the next one takes a while, and a
			// check finds none: it waits for it, then calls the store
			var longest time.Duration
			var waited bool
			sched0 := redistest.SchedLatencies()
			for range 6 {
				start := time.Now()
				d := e.Allow(ctx, "k")
				took := time.Since(start)
				longest = max(longest, took)
				if took >= timeout/2 && !d.Rules[0].FromBlock {
					waited = true
					if d.Allowed || !d.Failed || d.Source != redlimit.SourceNone || !errors.Is(d.Err, context.DeadlineExceeded) || e.Status().OnFallback {
						t.Errorf("the check that waited: allowed %v failed %v by %v (%v), on fallback %v; want refused undecided at the deadline, not on the fallback",
							d.Allowed, d.Failed, d.Source, d.Err, e.Status().OnFallback)
					}
				}
			}
			// before: a Timeout waiting, then a Timeout calling (>= 400ms);
			// the bound leaves 150ms to a loaded machine, and three times
			// the longest a goroutine of the test waited, runnable, for a
			// CPU (a check's goroutines may each have waited that long, for
			// reasons that are not the limiter's)
			sched := redistest.SchedLatencies().Since(sched0).Quantile(1)
			if bound := 2*timeout - 50*time.Millisecond + 3*sched; longest >= bound {
				t.Errorf("a check answered after %v, want about the %v Timeout at most (bound %v with the machine's scheduling waits of up to %v)", longest, timeout, bound, sched)
			}
			if !waited {
				t.Errorf("no check waited for a block (longest %v): the test no longer plays the case", longest)
			}
		})
	}
}
