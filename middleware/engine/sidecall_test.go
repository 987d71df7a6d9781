package engine_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/engine"
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

// TestSideCallsBounded: Settle and Release return by Config.Timeout even
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
	e, err := engine.New(b, engine.Config{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Rules: []engine.Rule{
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
	err = e.Settle(ctx, d, []int64{0, 1})
	// generous bounds: a loaded machine is late, never 3s late
	if took := time.Since(start); took > time.Second || err == nil {
		t.Errorf("Settle on a backend that ignores its context: %v after %v, want an error within about the 50ms Timeout", err, took)
	}
	start = time.Now()
	err = d.Release(ctx)
	if took := time.Since(start); took > time.Second || err == nil {
		t.Errorf("Release on a backend that ignores its context: %v after %v, want an error within about the 50ms Timeout", err, took)
	}
	if e.Stalled() == 0 {
		t.Error("the abandoned refund and release are not counted as stalled")
	}
}
