package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// tripCounter is a go-redis hook counting round trips carrying scripts (a
// command alone or a pipeline), the scripts they carried and the keys those
// scripts were given (one per call of one check, on one server, whether the
// call's own script or a batch script carries it); the commands that set up
// new connections are not counted.
type tripCounter struct {
	trips, cmds, keys atomic.Int64
}

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

func (h *tripCounter) count(cmds []redis.Cmder) {
	var n, keys int64
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			n++
			if k, ok := c.Args()[2].(int); ok {
				keys += int64(k)
			}
		}
	}
	if n > 0 {
		h.trips.Add(1)
		h.cmds.Add(n)
		h.keys.Add(keys)
	}
}

// hammer makes calls calls of checks from conc goroutines and returns how
// many were allowed (by their first Result).
func hammer(tb testing.TB, b algorithms.Backend, conc, calls int, checks ...algorithms.Check) int64 {
	tb.Helper()
	var allowed, next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			res := make([]algorithms.Result, len(checks))
			for next.Add(1) <= int64(calls) {
				if err := b.Allow(context.Background(), checks, res); err != nil {
					tb.Error(err)
					return
				}
				if res[0].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
}

// gcraCheck is a GCRA check of l on key.
func gcraCheck(key string, l algorithms.Limit) algorithms.Check {
	return algorithms.Check{Key: key, Algorithm: algorithms.GCRA, Limit: l}
}

// TestPipelining: on one server, concurrent calls share round trips and
// scripts (batches) and stay exact, each call sent exactly once; a call
// alone, or pipelining turned off, is one round trip and one script per
// call; SCRIPT FLUSH under concurrency is transparent.
func TestPipelining(t *testing.T) {
	srv := redistest.Require(t)
	prefix := redistest.Prefix(t)
	// 1000 a day: the 2000 calls must end before GCRA refills a unit
	// (86.4 s), also on a slow machine (at 1000/h one goroutine's calls
	// took longer than 3.6 s under load and 1001 passed)
	limit := algorithms.Limit{Rate: 1000, Period: 24 * time.Hour}
	for _, tc := range []struct {
		name      string
		pipelines int
		conc      int
		shared    bool // round trips must be fewer than calls
	}{
		{"default, 64 goroutines", 0, 64, true},
		{"2 pipelines, 64 goroutines", 2, 64, true},
		{"default, 1 goroutine", 0, 1, false},
		{"off, 64 goroutines", -1, 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.Client(t)
			h := &tripCounter{}
			c.AddHook(h)
			b, err := redisstore.New(c, redisstore.Config{Pipelines: tc.pipelines})
			if err != nil {
				t.Fatal(err)
			}
			// Load the scripts first: counts below are of EVALSHAs only.
			for _, src := range redisstore.Scripts() {
				if err := c.ScriptLoad(context.Background(), src).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if got := hammer(t, b, 1, 1, gcraCheck(prefix+tc.name+"warm", limit)); got != 1 {
				t.Fatalf("warm-up allowed %d", got)
			}
			h.trips.Store(0)
			h.cmds.Store(0)
			h.keys.Store(0)
			const calls = 2000
			if got := hammer(t, b, tc.conc, calls, gcraCheck(prefix+"{"+tc.name+"}", limit)); got != 1000 {
				t.Fatalf("allowed %d of %d, want exactly 1000", got, calls)
			}
			trips, cmds, keys := h.trips.Load(), h.cmds.Load(), h.keys.Load()
			t.Logf("%d calls: %d round trips, %d commands (%.1f per round trip)", calls, trips, cmds, float64(cmds)/float64(trips))
			if keys != calls {
				t.Errorf("%d calls sent for %d calls", keys, calls)
			}
			if tc.shared && (trips >= calls/2 || cmds >= calls/2) {
				t.Errorf("%d round trips and %d scripts for %d concurrent calls: not pipelined and batched", trips, cmds, calls)
			}
			if !tc.shared && (trips != calls || cmds != calls) {
				t.Errorf("%d round trips and %d scripts for %d calls, want one each", trips, cmds, calls)
			}
		})
	}
	t.Run("SCRIPT FLUSH", func(t *testing.T) {
		c := srv.Client(t)
		b, _ := redisstore.New(c, redisstore.Config{})
		for i := range 3 {
			if err := c.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if got := hammer(t, b, 64, 640, gcraCheck(prefix+"{flush}"+string(rune('a'+i)), limit)); got != 640 {
				t.Fatalf("after SCRIPT FLUSH: allowed %d of 640", got)
			}
		}
	})
}

// TestPipelineDeadline: when the server stops answering, the calls queued
// behind the round trips in flight return by their deadline, whatever the
// client's options, and are never sent: once the server answers again, it
// has run only the scripts of those round trips, and the units consumed are
// exactly those. The calls that made the round trips return by their
// deadline only with ContextTimeoutEnabled.
func TestPipelineDeadline(t *testing.T) {
	redistest.Require(t)
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled %v", enabled), func(t *testing.T) {
			srv, err := redistest.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: enabled})
			defer c.Close()
			b, _ := redisstore.New(c, redisstore.Config{})
			ctx := context.Background()
			key := redistest.Prefix(t) + "{k}"
			limit := algorithms.PerHour(1000)
			if got := hammer(t, b, 1, 1, gcraCheck(key, limit)); got != 1 { // scripts loaded, 1 unit
				t.Fatalf("allowed %d", got)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			const calls, deadline = 64, 50 * time.Millisecond
			var late, expired atomic.Int64
			var wg sync.WaitGroup
			for range calls {
				wg.Go(func() {
					cctx, cancel := context.WithTimeout(ctx, deadline)
					defer cancel()
					start := time.Now()
					err := b.Allow(cctx, []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: limit}}, make([]algorithms.Result, 1))
					if time.Since(start) > deadline+200*time.Millisecond {
						late.Add(1)
					}
					var be *algorithms.BackendError
					switch {
					case errors.As(err, &be) && errors.Is(err, context.DeadlineExceeded):
						expired.Add(1)
					case err != nil && enabled && errors.As(err, &be):
						expired.Add(1) // go-redis's own timeout error
					case err != nil:
						t.Errorf("paused server: %v, want a BackendError for the deadline", err)
					}
				})
			}
			time.Sleep(300 * time.Millisecond)
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if got := hammer(t, b, 1, 1, gcraCheck(key, limit)); got != 1 {
				t.Fatalf("after the pause: allowed %d", got)
			}
			time.Sleep(50 * time.Millisecond)
			ranf, _ := backendtest.ScriptStats(ctx, c)
			ran := int64(ranf)
			used := 1000 - remaining(t, b, key, limit)
			t.Logf("%d calls: %d expired, %d returned late; the server ran %d scripts, %d units are used", calls, expired.Load(), late.Load(), ran, used)
			if most := int64(redisstore.DefaultPipelines); late.Load() > most || enabled && late.Load() != 0 {
				t.Errorf("%d calls returned late", late.Load())
			}
			if ran > redisstore.DefaultPipelines+1 {
				t.Errorf("the server ran %d scripts: calls that expired in the queue were sent", ran)
			}
			// One unit before the pause, then one per script the server ran
			// (reading remaining consumes nothing).
			if used != ran+1 {
				t.Errorf("%d units used, want %d (one before the pause, one per script run)", used, ran+1)
			}
		})
	}
}

// remaining reads key's remaining units without consuming any, by a check
// whose cost can never fit.
func remaining(t *testing.T, b algorithms.Backend, key string, l algorithms.Limit) int64 {
	t.Helper()
	res := make([]algorithms.Result, 1)
	if err := b.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: l, Cost: l.Capacity(algorithms.GCRA) + 1}}, res); err != nil {
		t.Fatal(err)
	}
	return res[0].Remaining
}
