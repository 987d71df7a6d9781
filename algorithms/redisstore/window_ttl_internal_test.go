package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
)

// TestWindowTTL: a fixed window's key expires when its window ends (on
// the server's clock, a string that lives through the window's last ms), a
// sliding window counter's one period later (it still weighs the window
// then), whether their checks are decided alone, in batches or in calls of
// several checks. On the server's clock a check in the window the key
// holds leaves the key's TTL as an earlier check of the window set it (the
// TTL and now share that clock); on a client's clock every check sets it
// again from its own now, so that a clock that went back (or runs behind
// the clock of an earlier writer) still finds its window to the end.
func TestWindowTTL(t *testing.T) {
	t.Parallel()
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			testWindowTTL(t, alg)
		})
	}
}

func testWindowTTL(t *testing.T, alg algorithms.Algorithm) {
	limit := algorithms.Limit{Rate: 10, Period: time.Second}
	check := func(key string) []algorithms.Check {
		return []algorithms.Check{{Key: key, Algorithm: alg, Limit: limit}}
	}
	ctx := context.Background()
	start := backendtest.T0 // a window starts here
	// after: how much longer than the window the key lives
	var after time.Duration
	if alg == algorithms.SlidingWindow {
		after = limit.Period
	}

	t.Run("server clock", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		b, err := New(client, Config{}) // TIME: miniredis's time
		if err != nil {
			t.Fatal(err)
		}
		now := start.Add(100 * time.Millisecond)
		mr.SetTime(now)
		advance := func(d time.Duration) { // TIME and TTLs
			now = now.Add(d)
			mr.SetTime(now)
			mr.FastForward(d)
		}
		res := make([]algorithms.Result, 1)
		allow := func(want int64) {
			t.Helper()
			if err := b.Allow(ctx, check("{a}"), res); err != nil || !res[0].Allowed || res[0].Remaining != want {
				t.Fatalf("Allow = %+v, %v; want allowed, %d remaining", res[0], err, want)
			}
		}
		ttl := func(key string, want time.Duration) {
			t.Helper()
			if alg == algorithms.FixedWindow && key != "{b}" {
				// a string whose expiry is the window's last ms (PXAT):
				// Redis keeps it until its clock has passed that ms
				want -= time.Millisecond
			}
			if got := mr.TTL(key); got != want+after {
				t.Fatalf("TTL of %s %v, want %v\n%s", key, got, want+after, dumpState(mr))
			}
		}
		allow(9)
		ttl("{a}", 900*time.Millisecond) // the window's end (+ after)
		advance(300 * time.Millisecond)
		allow(8)
		ttl("{a}", 600*time.Millisecond)

		// FastForward alone ages TTLs and leaves TIME: a TTL set again
		// would read 600ms, the window's end from TIME.
		mr.FastForward(100 * time.Millisecond)
		allow(7)
		ttl("{a}", 500*time.Millisecond)
		// A call of two checks (dispatch.lua).
		two := []algorithms.Check{check("{a}")[0], {Key: "{b}", Algorithm: algorithms.GCRA, Limit: limit}}
		res2 := make([]algorithms.Result, 2)
		if err := b.Allow(ctx, two, res2); err != nil || !res2[0].Allowed || res2[0].Remaining != 6 {
			t.Fatalf("Allow(two checks) = %+v, %v; want the window's check allowed, 6 remaining", res2, err)
		}
		ttl("{a}", 500*time.Millisecond)
		// In batches: the flat loop of the fixed window's batch script,
		// then, in a queue of mixed calls, batch.lua's loop (its fast
		// path for one check, its general code for two).
		results, errs := allowQueued(t, b, nil, []queued{{checks: check("{a}")}, {checks: check("{a}")}})
		ttl("{a}", 500*time.Millisecond)
		more, moreErrs := allowQueued(t, b, nil, []queued{
			{checks: check("{a}")}, {checks: two}, {checks: check("{c}")}, {checks: check("{a}")},
		})
		results, errs = append(results, more...), append(errs, moreErrs...)
		for i, want := range []int64{5, 4, 3, 2, 9, 1} {
			if errs[i] != nil || !results[i][0].Allowed || results[i][0].Remaining != want {
				t.Fatalf("queued call %d: %+v, %v; want allowed, %d remaining", i, results[i], errs[i], want)
			}
		}
		ttl("{a}", 500*time.Millisecond)
		ttl("{c}", 600*time.Millisecond) // a window the batch started

		advance(600 * time.Millisecond) // the next window
		if alg == algorithms.SlidingWindow {
			if got := mr.TTL("{a}"); got != 900*time.Millisecond {
				t.Fatalf("TTL %v in the next window, want 900ms: the window weighs a period longer", got)
			}
			return
		}
		if mr.Exists("{a}") {
			t.Fatalf("the key outlived its window:\n%s", dumpState(mr))
		}
		allow(9)
		ttl("{a}", time.Second)
	})

	t.Run("client clock", func(t *testing.T) {
		t.Parallel()
		b, clock, mr := miniStore(t, 0)
		mr.SetTime(start.Add(500 * time.Millisecond))
		clock.T = start.Add(500 * time.Millisecond)
		res := make([]algorithms.Result, 1)
		allow := func(want int64) {
			t.Helper()
			if err := b.Allow(ctx, check("{a}"), res); err != nil || !res[0].Allowed || res[0].Remaining != want {
				t.Fatalf("Allow at %v = %+v, %v; want allowed, %d remaining", clock.T.Sub(start), res[0], err, want)
			}
		}
		allow(9)                                    // TTL 500ms: ends at start+1s on both clocks
		clock.T = start.Add(300 * time.Millisecond) // the client's clock goes back
		allow(8)                                    // TTL 700ms from miniredis's now
		if got := mr.TTL("{a}"); got != 700*time.Millisecond+after {
			t.Fatalf("TTL %v, want 700ms: the window's end from the client's now", got)
		}
		mr.FastForward(500 * time.Millisecond)
		clock.T = clock.T.Add(500 * time.Millisecond) // start+800ms: the same window
		allow(7)
		mr.FastForward(50 * time.Millisecond) // ages the TTL, not the client's clock
		two := []algorithms.Check{check("{a}")[0], {Key: "{b}", Algorithm: algorithms.GCRA, Limit: limit}}
		res2 := make([]algorithms.Result, 2)
		if err := b.Allow(ctx, two, res2); err != nil || !res2[0].Allowed || res2[0].Remaining != 6 {
			t.Fatalf("Allow(two checks) = %+v, %v; want the window's check allowed, 6 remaining", res2, err)
		}
		if got := mr.TTL("{a}"); got != 200*time.Millisecond+after {
			t.Fatalf("TTL %v after a call of two checks, want 200ms: set again from the client's now", got)
		}
		mr.FastForward(50 * time.Millisecond)
		results, errs := allowQueued(t, b, nil, []queued{{checks: check("{a}")}, {checks: check("{a}")}})
		for i, want := range []int64{5, 4} {
			if errs[i] != nil || !results[i][0].Allowed || results[i][0].Remaining != want {
				t.Fatalf("queued call %d: %+v, %v; want allowed, %d remaining", i, results[i], errs[i], want)
			}
		}
		if got := mr.TTL("{a}"); got != 200*time.Millisecond+after {
			t.Fatalf("TTL %v after the batch, want 200ms", got)
		}
	})
}
