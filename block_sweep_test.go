package redlimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestBlocksSweepWork: with 10,000 keys seen once and 2 keys holding
// blocks, a sweep visits the 2 keys, and a request for a new key does not
// wait for it. Before, the sweeper visited all 10,002 keys every Hold/2
// under the lock every request of the rule takes: the request waited for
// the whole sweep (detected here with a generous 10s; it is no timing
// assertion).
func TestBlocksSweepWork(t *testing.T) {
	clk := newStepClock(windowStart)
	m, err := memstore.New(memstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	// Hold 10s: the sweeper's own ticks (every 5s) stay out of the test
	rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1_000_000), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
	e := blockEngine(t, m, clk, "sweep", rule)
	var d redlimit.Decision
	decide := func(material string) {
		e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: material}}), &d)
		if !d.Allowed {
			t.Fatalf("%s denied", material)
		}
	}
	const cold = 10_000
	for i := range cold {
		decide("cold-" + strconv.Itoa(i))
	}
	for _, hot := range []string{"hot1", "hot2"} {
		for range 50 {
			decide(hot)
			waitIdle([]*redlimit.Limiter{e})
		}
		if redlimit.BlockUnits(e, "sweep:hot:fw:{"+hot+"}") == 0 {
			t.Fatalf("%s holds no block", hot)
		}
	}
	visits, waited := 0, false
	done := make(chan struct{})
	redlimit.SetSweepHook(func() {
		visits++
		if visits != 1 {
			return
		}
		go func() {
			var d redlimit.Decision
			e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: "new"}}), &d)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			waited = true
		}
	})
	redlimit.SweepBlocks(e)
	redlimit.SetSweepHook(nil)
	<-done
	if waited {
		t.Errorf("a request for a new key waited for the sweeper (10s, then gave up waiting for it)")
	}
	if visits > 2 {
		t.Errorf("a sweep visited %d keys, want the 2 holding blocks (of %d keys seen)", visits, cold+2)
	}
}

// TestBlocksKeySweepRace: a deterministic interleaving (run it with
// -race). A lookup of the key x finds it; before it caches what it found,
// the sweeper forgets x, idle. Then x gets hot and takes blocks, and the
// Limiter closes: every unit its blocks did not use goes back to the
// store. Before, the lookup cached the forgotten key, every later check
// used it, and its blocks, unknown to the sweeper, were never given back.
func TestBlocksKeySweepRace(t *testing.T) {
	clk := newStepClock(windowStart)
	m, err := memstore.New(memstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
	e, err := redlimit.New(m, redlimit.Config{Prefix: "race", Timeout: 10 * time.Second, Now: clk.Now, Rules: []redlimit.Rule{rule}})
	if err != nil {
		t.Fatal(err)
	}
	var d redlimit.Decision
	admitted := 0
	decide := func(material string) {
		e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: material}}), &d)
		waitIdle([]*redlimit.Limiter{e})
		if d.Allowed && material == "x" {
			admitted++
		}
	}
	decide("x")
	decide("y") // the last key looked up: x's next lookup reads the map
	fired := false
	redlimit.SetKeyHook(func() {
		if fired {
			return
		}
		fired = true
		for range 8 { // x idle all along: forgotten
			redlimit.SweepBlocks(e)
		}
	})
	decide("x")
	redlimit.SetKeyHook(nil)
	if !fired {
		t.Fatal("the lookup of x did not read the map")
	}
	for range 200 {
		decide("x")
	}
	e.Close() // gives back what the blocks of x hold
	peek, err := redlimit.New(m, redlimit.Config{Prefix: "race", Rules: []redlimit.Rule{{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer peek.Close()
	if got := peek.Peek(context.Background(), "x").Rules[0].Result.Remaining; got != int64(1000-admitted) {
		t.Errorf("x admitted %d, and the store has %d left after Close, want %d: %d units of its blocks were never given back", admitted, got, 1000-admitted, int64(1000-admitted)-got)
	}
}

// BenchmarkSweep is one pass of the blocks' sweeper over a rule with
// keys keys seen once and 2 keys holding blocks: it visits what holds
// blocks, not every key.
func BenchmarkSweep(b *testing.B) {
	for _, keys := range []int{1_000, 100_000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			clk := newStepClock(windowStart)
			m, err := memstore.New(memstore.Config{Now: clk.Now, MaxKeys: 4 * keys})
			if err != nil {
				b.Fatal(err)
			}
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1 << 30), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
			e := blockEngine(b, m, clk, "sweep", rule)
			var d redlimit.Decision
			for i := range keys {
				e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: strconv.Itoa(i)}}), &d)
			}
			for _, hot := range []string{"hot1", "hot2"} {
				for range 50 {
					e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: hot}}), &d)
					waitIdle([]*redlimit.Limiter{e})
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				redlimit.SweepBlocks(e)
			}
		})
	}
}
