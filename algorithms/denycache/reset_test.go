package denycache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// resettableGate is a gatedBackend that can reset keys (it keeps none).
type resettableGate struct {
	*gatedBackend
	resets [][]string
}

func (r *resettableGate) Reset(_ context.Context, keys []string) error {
	r.resets = append(r.resets, keys)
	return nil
}

// TestDenyCacheReset: Reset forwards to the wrapped Backend and forgets
// the denials of its keys, so their next call asks the wrapped Backend;
// a call that began before the Reset records no denial when it ends
// after it; other keys stay cached.
func TestDenyCacheReset(t *testing.T) {
	c := &backendtest.Clock{T: backendtest.T0}
	g := &resettableGate{gatedBackend: &gatedBackend{gate: make(chan struct{})}}
	cache, _ := denycache.New(g, denycache.Config{Now: c.Now})
	limit := algorithms.PerSecond(1)
	call := func(key string) (algorithms.Result, error) {
		res := make([]algorithms.Result, 1)
		err := cache.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: limit}}, res)
		return res[0], err
	}
	g.deny.Store(true)
	close(g.gate)
	call("a")
	call("b")
	if g.calls.Load() != 2 {
		t.Fatalf("%d calls to the backend, want 2", g.calls.Load())
	}
	call("a")
	call("b")
	if g.calls.Load() != 2 || cache.LocalDenials() != 2 {
		t.Fatalf("denials not cached: %d calls, %d local", g.calls.Load(), cache.LocalDenials())
	}
	if err := cache.Reset(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if len(g.resets) != 1 || g.resets[0][0] != "a" {
		t.Fatalf("Reset forwarded %v, want [[a]]", g.resets)
	}
	g.deny.Store(false)
	if r, err := call("a"); err != nil || !r.Allowed || g.calls.Load() != 3 {
		t.Fatalf("after Reset: %+v, %v, %d calls; want allowed by the backend", r, err, g.calls.Load())
	}
	if r, _ := call("b"); r.Allowed || cache.LocalDenials() != 3 {
		t.Fatalf("b, not reset: %+v, want denied locally", r)
	}

	// a denial that began before a Reset is not recorded
	g.deny.Store(true)
	g.gate = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r, err := call("c"); err != nil || r.Allowed {
			t.Errorf("c: %+v, %v", r, err)
		}
	}()
	for g.calls.Load() != 4 {
		time.Sleep(time.Millisecond)
	}
	if err := cache.Reset(context.Background(), []string{"c"}); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	<-done
	call("c")
	if g.calls.Load() != 5 {
		t.Fatalf("a denial decided before the Reset was recorded: %d calls, want 5", g.calls.Load())
	}
	call("c")
	if g.calls.Load() != 5 {
		t.Fatalf("a denial after the Reset was not recorded: %d calls, want 5", g.calls.Load())
	}
}

// TestDenyCacheResetUnsupported: in front of a Backend that cannot reset,
// Reset forgets its own denials and says the store could not.
func TestDenyCacheResetUnsupported(t *testing.T) {
	cache, _ := denycache.New(denyAll{}, denycache.Config{})
	err := cache.Reset(context.Background(), []string{"k"})
	if !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, algorithms.ErrBackend) {
		t.Fatalf("Reset = %v, want ErrUnsupported", err)
	}
	t.Log(err)
	m, _ := memstore.New(memstore.Config{})
	cache, _ = denycache.New(m, denycache.Config{})
	if err := cache.Reset(context.Background(), []string{"k", ""}); err != nil {
		t.Fatal(err)
	}
}
