package redlimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// skewClock is the instances' clock: the store's clock (base) plus an
// offset the test steps, as an injected Config.Now that steps back would.
type skewClock struct {
	base *stepClock
	off  atomic.Int64 // ns
}

func (c *skewClock) Now() time.Time { return c.base.Now().Add(time.Duration(c.off.Load())) }

// hotKey is the storage key of the material "hot" under the rule "hot"
// of a fixed window.
func hotKey(prefix string) string { return prefix + ":hot:fw:{hot}" }

// saturateAll checks on every engine at once until a round admits
// nothing and no block is being taken, and returns how many they
// admitted.
func saturateAll(engines []*redlimit.Limiter, callers int) int64 {
	var n int64
	for {
		got := load(engines, callers, 1, true)
		waitIdle(engines)
		n += got
		if got == 0 {
			return n
		}
	}
}

// TestBlocksClockBack: the instances' injected clock (Config.Now) steps
// back 5s while they hold blocks taken 1s before a window's end; the
// store's clock does not. No block is used past its window: the next
// window (by the store's clock) admits exactly the limit. Before, the
// blocks were used until the instances' clock reached their window's
// end, 5s into the next window, on top of its limit.
func TestBlocksClockBack(t *testing.T) {
	const instances, callers, limit = 4, 8, 20_000
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart.Add(59 * time.Second))
			var n calls
			backends := setup.backends(t, clk, instances, &n)
			skew := &skewClock{base: clk}
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{}}
			engines := make([]*redlimit.Limiter, instances)
			for i := range engines {
				engines[i] = newEngine(t, backends[i], redlimit.Config{Prefix: prefix, Timeout: 10 * time.Second, Now: skew.Now, Rules: []redlimit.Rule{rule}})
			}
			before := load(engines, callers, 100, false)
			waitIdle(engines)
			before += load(engines, callers, 10, false)
			waitIdle(engines)
			var held int64
			for _, e := range engines {
				held += redlimit.BlockUnits(e, hotKey(prefix))
			}
			if held == 0 {
				t.Fatalf("no instance held a block before the step")
			}
			skew.off.Store(int64(-5 * time.Second))
			clk.Set(windowStart.Add(time.Minute + 500*time.Millisecond))
			got := saturateAll(engines, callers)
			// and again 4.5s later, by both clocks still in the next
			// window (the instances' local denials are over)
			clk.Set(windowStart.Add(time.Minute + 5*time.Second))
			got += saturateAll(engines, callers)
			t.Logf("admitted %d before the window's end (%d held in blocks); %d in the next window, limit %d", before, held, got, limit)
			if got != limit {
				t.Errorf("the window after the clock stepped back 5s admitted %d, want exactly the limit %d (the instances held %d in blocks of the window before)", got, limit, held)
			}
		})
	}
}

// TestBlocksResetAbandonedRefund: b holds a block when a resets the key;
// c has exhausted the key and takes no blocks, so it has not seen the
// reset. b closes and gives its block's rest back, to the abandoned key.
// No instance admits those units again: c is denied on the old key, learns
// of the reset and shares the new epoch with a, which together admit
// exactly the limit (a unit admitted on the old key would be one more).
// Before, c admitted units given back on the old key: 1,001 and 1,004.
func TestBlocksResetAbandonedRefund(t *testing.T) {
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 3, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			c := blockEngine(t, backends[2], clk, prefix, rule)
			load([]*redlimit.Limiter{b}, 4, 30, false)
			waitIdle([]*redlimit.Limiter{b})
			var d redlimit.Decision
			b.Decide(context.Background(), inOrder(b, []redlimit.Input{{Material: "hot"}}), &d)
			waitIdle([]*redlimit.Limiter{b})
			held := redlimit.BlockUnits(b, hotKey(prefix))
			if held == 0 {
				t.Fatalf("b held no block")
			}
			saturate(c)
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			b.Close() // gives its block's rest back to the abandoned key
			// c's local denial (a quarter Hold) is over
			clk.Set(windowStart.Add(3 * time.Second))
			gotC := saturate(c) // denied on the old key, it asks the epoch
			clk.Set(windowStart.Add(6 * time.Second))
			gotC2 := saturate(c) // on the new epoch, if it learnt it only after
			gotA := saturate(a)
			t.Logf("b gave back %d to the abandoned key; after the reset c admitted %d, then %d, a %d", held, gotC, gotC2, gotA)
			if gotC+gotC2 == 0 {
				t.Errorf("c admitted nothing after the reset: it did not learn of the new epoch")
			}
			if gotA+gotC+gotC2 != 1000 {
				t.Errorf("after the reset a admitted %d and c %d + %d: %d, want exactly the limit 1000 (b gave back %d to the abandoned key)", gotA, gotC, gotC2, gotA+gotC+gotC2, held)
			}
		})
	}
}

// TestBlocksResetSameEpochNextWindow: an instance reset a key in one
// window (epoch 1 until that window ends), then, in the next window, took
// a block of the key (epoch 0 again) and reset it again: epoch 1 once more,
// of the new window. The block of epoch 0, charged before the reset, is
// dropped: after the reset the key admits exactly its limit. Before, the
// instance took the new epoch for the one it knew and kept the block,
// answering its rest as if charged to the new epoch: the chaos harness saw
// 31 units admitted in a window of 30/1s (single node, seed 1201).
func TestBlocksResetSameEpochNextWindow(t *testing.T) {
	const limit = 1000
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 1, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			var d redlimit.Decision
			a.Decide(context.Background(), inOrder(a, []redlimit.Input{{Material: "hot"}}), &d)
			if want := hotKey(prefix) + ":e1"; !d.Allowed || d.Rules[0].Key != want {
				t.Fatalf("after the first reset: allowed %v on %q, want allowed on %q", d.Allowed, d.Rules[0].Key, want)
			}
			// the next window: epoch 0 again, hot enough for a block
			clk.Set(windowStart.Add(time.Minute + time.Second))
			load([]*redlimit.Limiter{a}, 4, 30, false)
			waitIdle([]*redlimit.Limiter{a})
			a.Decide(context.Background(), inOrder(a, []redlimit.Input{{Material: "hot"}}), &d)
			waitIdle([]*redlimit.Limiter{a})
			if d.Rules[0].Key != hotKey(prefix) {
				t.Fatalf("in the next window the key is %q, want epoch 0, %q", d.Rules[0].Key, hotKey(prefix))
			}
			held := redlimit.BlockUnits(a, hotKey(prefix))
			if held == 0 {
				t.Fatalf("no block held before the second reset")
			}
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			got := saturate(a)
			t.Logf("a held %d units of epoch 0 at the second reset; after it admitted %d, limit %d", held, got, limit)
			if got != limit {
				t.Errorf("after the reset in the next window the key admitted %d, want exactly the limit %d (the instance held %d in a block of epoch 0)", got, limit, held)
			}
		})
	}
}

// TestBlocksManyResets: a key reset 200 times in one window (63 was the
// most before, the 64th a ConfigError) starts afresh after each reset:
// the resetting instance admits exactly the limit after every tenth, and
// another instance, which saw none of them, shares the last epoch with
// it: together exactly the limit.
func TestBlocksManyResets(t *testing.T) {
	const resets, limit = 200, 100
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 2, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			if got := saturate(b); got != limit {
				t.Fatalf("b admitted %d before the resets, want %d", got, limit)
			}
			for i := 1; i <= resets; i++ {
				if err := a.Reset(context.Background(), "hot"); err != nil {
					t.Fatalf("reset %d: %v", i, err)
				}
				if i%10 == 0 || i >= 62 && i <= 66 {
					if got := saturate(a); got != limit {
						t.Fatalf("after reset %d a admitted %d, want the limit %d", i, got, limit)
					}
				}
			}
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			clk.Set(windowStart.Add(time.Second)) // b's local denial is over
			if got := saturate(b) + saturate(a); got != limit {
				t.Errorf("after %d resets a and b admitted %d, want the limit %d", resets+1, got, limit)
			}
		})
	}
}

// counterCount reads the count of the epoch counter key (of a minute's
// windows) on b without consuming anything, as the release before read
// it: the count of "<key>:epoch" divided by 2^34 is the epoch.
func counterCount(t *testing.T, b algorithms.Backend, key string) int64 {
	t.Helper()
	checks := []algorithms.Check{
		{Key: key, Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 1 << 40, Period: time.Minute}, Cost: 1},
		{Key: key + ":never", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1), Cost: 2},
	}
	res := make([]algorithms.Result, 2)
	if err := b.Allow(context.Background(), checks, res); err != nil {
		t.Fatal(err)
	}
	return 1<<40 - res[0].Remaining
}

// TestEpochFormat: the epoch counter "<key>:epoch" keeps the format of
// the release before (2^34 per reset, plus 1 per block call of that
// release's instances): a count written so is read as its epoch, and a
// reset here writes it so, readable by that release. Past epoch 63 the
// counters "<key>:epoch<j>" take over (each 3 resets here, 2^40 in the
// stored format), and an instance that saw none of the resets reads the
// epoch through all of them. The key of every epoch a reset leaves is
// closed: 2^39 units or more.
func TestEpochFormat(t *testing.T) {
	defer redlimit.SetEpochChunk(3)()
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 2, &n)
			prefix := enginePrefix(t)
			key := hotKey(prefix)
			// 3 resets and 17 block calls by the release before
			old := []algorithms.Check{{Key: key + ":epoch", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 1 << 40, Period: time.Minute}, Cost: 3<<34 + 17}}
			if err := backends[0].Allow(context.Background(), old, make([]algorithms.Result, 1)); err != nil {
				t.Fatal(err)
			}
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(100), Blocks: &redlimit.BlockConfig{}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			if got := a.Peek(context.Background(), "hot").Rules[0].Key; got != key+":e3" {
				t.Fatalf("a peek of a key the release before reset 3 times reads %s, want %s:e3", got, key)
			}
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			if got := counterCount(t, backends[0], key+":epoch"); got != 4<<34+17 {
				t.Errorf("after a reset the counter holds %d, want 4·2^34 + 17 (epoch 4 to the release before)", got)
			}
			if got := counterCount(t, backends[0], key+":e3"); got < 1<<39 {
				t.Errorf("the key of epoch 3 holds %d after the reset that left it, want at least 2^39", got)
			}
			for range 80 - 4 {
				if err := a.Reset(context.Background(), "hot"); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range []*redlimit.Limiter{a, blockEngine(t, backends[1], clk, prefix, rule)} {
				if got := e.Peek(context.Background(), "hot").Rules[0].Key; got != key+":e80" {
					t.Errorf("after 80 epochs a peek reads %s, want %s:e80", got, key)
				}
			}
			// 63 on the first counter, then 17 = 5 full counters of 3 and 2
			if got := counterCount(t, backends[0], key+":epoch"); got != 63<<34+17 {
				t.Errorf("the first counter holds %d, want 63·2^34 + 17", got)
			}
			for j, want := range []int64{3, 3, 3, 3, 3, 2, 0} {
				if got := counterCount(t, backends[0], key+":epoch"+strconv.Itoa(j+1)); got != want {
					t.Errorf("counter %d holds %d, want %d", j+1, got, want)
				}
			}
			if got := saturate(a); got != 100 {
				t.Errorf("at epoch 80 a admitted %d, want the limit 100", got)
			}
		})
	}
}

// TestBlocksWaitNamesBlockKey: a check that finds no block and waits for
// the one being taken is answered from it, and names the key that block
// charged. Here b resets the key after a's first check, so a's first
// block call is denied on the closed key of epoch 0, reads the epoch and
// takes its block on epoch 1: the check that waited for it used to name
// the key of epoch 0 (in the chaos harness, 31 admissions counted on a
// key of 30 per second, one of them charged to the next epoch's key).
func TestBlocksWaitNamesBlockKey(t *testing.T) {
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 2, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: 100 * time.Millisecond}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			in := []redlimit.Input{{Material: "hot"}}
			var d redlimit.Decision
			// one check, by the store: the next is the key's second
			// arrival, enough for a block
			a.Decide(context.Background(), inOrder(a, in), &d)
			waitIdle([]*redlimit.Limiter{a})
			key0 := d.Rules[0].Key
			if !d.Allowed || d.Rules[0].FromBlock || redlimit.BlockUnits(a, key0) != 0 {
				t.Fatalf("the first check: allowed %v, from a block %v, %d units in blocks; want allowed by the store, no block", d.Allowed, d.Rules[0].FromBlock, redlimit.BlockUnits(a, key0))
			}
			key1 := key0 + ":e1"
			if err := b.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			a.Decide(context.Background(), inOrder(a, in), &d)
			waitIdle([]*redlimit.Limiter{a})
			rd := d.Rules[0]
			if !d.Allowed || !rd.FromBlock {
				t.Fatalf("the check after the reset: allowed %v, from a block %v; want allowed from the block it waited for", d.Allowed, rd.FromBlock)
			}
			// the block was taken on epoch 1: its units count there, and
			// epoch 0's key is closed
			if got := windowCount(t, backends[0], key1); got < 2 {
				t.Fatalf("%s counts %d units, want the block's (at least 2)", key1, got)
			}
			if got := windowCount(t, backends[0], key0); got < 1<<39 {
				t.Fatalf("%s counts %d units, want it closed (2^39 and more)", key0, got)
			}
			if rd.Key != key1 {
				t.Fatalf("the check answered from a block of %s names %s", key1, rd.Key)
			}
		})
	}
}

// windowCount reads the count of the fixed window key key (of a minute's
// windows) on b without charging it.
func windowCount(t *testing.T, b algorithms.Backend, key string) int64 {
	t.Helper()
	const huge = int64(1) << 40
	checks := []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: huge, Period: time.Minute}}}
	res := make([]algorithms.Result, 1)
	if err := b.Allow(context.Background(), checks, res); err != nil {
		t.Fatal(err)
	}
	if !res[0].Allowed {
		t.Fatalf("reading %s: denied", key)
	}
	return huge - res[0].Remaining
}
