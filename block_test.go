package redlimit_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua"
)

// stepClock is a clock the test moves: every instance, the store, the
// deny cache and the blocks read it.
type stepClock struct{ us atomic.Int64 }

func (c *stepClock) Now() time.Time       { return time.UnixMicro(c.us.Load()) }
func (c *stepClock) Set(t time.Time)      { c.us.Store(t.UnixMicro()) }
func newStepClock(t time.Time) *stepClock { c := new(stepClock); c.Set(t); return c }

// calls counts the commands a go-redis client sends (a pipeline's each).
type calls struct{ n atomic.Int64 }

func (c *calls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(rerouted{}) == nil { // counted as the command it was
			c.n.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// rerouted marks the context of a pipeline persist made of one command.
type rerouted struct{}

// persist makes every key a script touches persistent, in the pipeline
// of the script: Redis expires keys on its own clock, and the tests play
// windows on a clock of their own. A script sent alone goes in a pipeline
// of its own with its PERSISTs: sent after it, on a loaded machine a
// PERSIST came later than a key's TTL of a few ms (a bucket's), and the
// key's state was lost (a bucket full again: over the limit in
// TestBlocksBuckets).
type persist struct{ c redis.UniversalClient }

func persistCmds(ctx context.Context, cmds []redis.Cmder) []redis.Cmder {
	out := cmds
	for _, c := range cmds {
		a := c.Args()
		if len(a) < 3 {
			continue
		}
		if name, _ := a[0].(string); !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
			continue
		}
		n, _ := a[2].(int)
		for _, k := range a[3 : 3+n] {
			out = append(out, redis.NewIntCmd(ctx, "persist", k))
		}
	}
	return out
}

func (persist) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p persist) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if len(persistCmds(ctx, []redis.Cmder{cmd})) == 1 {
			return next(ctx, cmd) // no script
		}
		// the pipeline hook below adds the PERSISTs
		ctx = context.WithValue(ctx, rerouted{}, true)
		_, _ = p.c.Pipelined(ctx, func(pipe redis.Pipeliner) error { return pipe.Process(ctx, cmd) })
		return cmd.Err()
	}
}
func (persist) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return next(ctx, persistCmds(ctx, cmds))
	}
}

// resendRefunds runs every refund script twice, as a client that lost the
// first reply and sent the command again would.
type resendRefunds struct{ sha string }

func newResendRefunds() *resendRefunds {
	src, _ := lua.Script("refund")
	h := sha1.Sum([]byte(src))
	return &resendRefunds{sha: hex.EncodeToString(h[:])}
}

func (r *resendRefunds) refund(cmd redis.Cmder) bool {
	a := cmd.Args()
	return len(a) > 1 && strings.EqualFold(a[0].(string), "evalsha") && a[1] == r.sha
}

func (r *resendRefunds) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *resendRefunds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.refund(cmd) {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}
func (r *resendRefunds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if r.refund(c) {
				_ = next(ctx, cmds)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// windowStart is a minute boundary: windows of 1s and 1m start on it.
// The tests' windows are minutes of the test's clock, so that Redis, whose
// own clock expires keys, keeps a window's state while the test plays it.
var windowStart = time.Unix(1_700_000_040, 0)

// blockEngine returns an Limiter with the rules on b, every clock clk.
func blockEngine(t testing.TB, b algorithms.Backend, clk *stepClock, prefix string, rules ...redlimit.Rule) *redlimit.Limiter {
	t.Helper()
	return newEngine(t, b, redlimit.Config{
		Prefix: prefix, Timeout: 10 * time.Second, Now: clk.Now,
		DenyCache: denycache.Config{Now: clk.Now}, Rules: rules,
		Logger: slog.New(slog.DiscardHandler),
	})
}

// waitIdle waits until no instance is taking a block.
func waitIdle(engines []*redlimit.Limiter) {
	for {
		busy := 0
		for _, e := range engines {
			busy += redlimit.BlocksInFlight(e)
		}
		if busy == 0 {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// load is the traffic of one instant: callers goroutines per instance,
// each making attempts checks of material on the single rule of its
// instance, or, when untilDenied, checking until one is denied (at least
// attempts). It returns how many were admitted.
func load(engines []*redlimit.Limiter, callers, attempts int, untilDenied bool) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, e := range engines {
		for range callers {
			wg.Go(func() {
				var d redlimit.Decision
				in := []redlimit.Input{{Material: "hot"}}
				for i := 0; ; i++ {
					if i >= attempts && !untilDenied {
						return
					}
					e.Decide(context.Background(), inOrder(e, in), &d)
					if d.Allowed {
						admitted.Add(1)
					} else if untilDenied && i >= attempts {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return admitted.Load()
}

// phases are the instants of a window (from its start) at which light
// load arrives, a tenth of a second apart as a steady stream would: at
// each, about a twentieth of the limit.
var phases = []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond,
	500 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond, 800 * time.Millisecond, 900 * time.Millisecond}

// playWindows offers each of windows windows of period the light load of
// phases, then, at final periods from its start, checks until every
// instance is denied and no block is being taken. It
// returns the checks admitted per window, per instant (the last one the
// saturating one).
func playWindows(t *testing.T, engines []*redlimit.Limiter, clk *stepClock, period time.Duration, final float64, windows, callers int, limit int64, after func(w int)) [][]int64 {
	t.Helper()
	out := make([][]int64, windows)
	light := max(int(limit)/20/(callers*len(engines)), 1)
	for w := range windows {
		start := windowStart.Add(time.Duration(w) * period)
		for _, at := range phases {
			clk.Set(start.Add(at))
			for _, e := range engines {
				redlimit.SweepBlocks(e)
			}
			out[w] = append(out[w], load(engines, callers, light, false))
			waitIdle(engines)
		}
		// the sweeper's turn, once the blocks' time is up (2 Holds)
		clk.Set(start.Add(phases[len(phases)-1] + 300*time.Millisecond))
		for _, e := range engines {
			redlimit.SweepBlocks(e)
		}
		clk.Set(start.Add(finalAt(period, final)))
		for _, e := range engines {
			redlimit.SweepBlocks(e)
		}
		var n int64
		for first := true; ; first = false {
			attempts := 1
			if first {
				attempts = int(limit) / (callers * len(engines))
			}
			got := load(engines, callers, attempts, true)
			waitIdle(engines)
			n += got
			if got == 0 && !first {
				break
			}
		}
		out[w] = append(out[w], n)
		if after != nil {
			after(w)
		}
	}
	return out
}

// finalAt is the saturating instant of a window of period: f periods
// from its start, in whole µs.
func finalAt(period time.Duration, f float64) time.Duration {
	return time.Duration(f * float64(period)).Truncate(time.Microsecond)
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// blockBackends returns, per instance, the backend of a test: memstore
// shared by all, or a redisstore on a client of its own (counting its
// commands in calls).
type blockSetup struct {
	name     string
	final    float64       // the saturating instant, in periods from the window's start
	margin   time.Duration // the last instant before a window's end a test plays
	backends func(t *testing.T, clk *stepClock, n int, calls *calls, hooks ...redis.Hook) []algorithms.Backend
}

var blockSetups = []blockSetup{
	{"memstore", 1 - 1e-9, time.Microsecond, func(t *testing.T, clk *stepClock, n int, _ *calls, _ ...redis.Hook) []algorithms.Backend {
		m, err := memstore.New(memstore.Config{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]algorithms.Backend, n)
		for i := range out {
			out[i] = m
		}
		return out
	}},
	// Redis expires a key on its clock at the window's end of the test's
	// clock: the keys are persisted after the scripts, and the saturating
	// instant leaves them time for it.
	{"redis", 0.9, time.Second, func(t *testing.T, clk *stepClock, n int, calls *calls, hooks ...redis.Hook) []algorithms.Backend {
		srv := redistest.Require(t)
		out := make([]algorithms.Backend, n)
		for i := range out {
			c := srv.Client(t)
			c.AddHook(calls)
			c.AddHook(persist{c})
			for _, h := range hooks {
				c.AddHook(h)
			}
			b, err := redisstore.New(c, redisstore.Config{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			out[i] = b
		}
		return out
	}},
}

// TestBlocksExactFixedWindow: 4 instances × 8 callers on one hot key of a
// fixed window rule with quota blocks, on memstore and on a real
// redis-server (each instance its own client), offered more than twice
// the limit in every window: no window admits more than the limit, every
// window admits at least 99% of it, and at steady state (from the second
// window on) the instances send at most 0.05 Redis commands per admitted
// request.
func TestBlocksExactFixedWindow(t *testing.T) {
	const instances, callers, windows, limit = 4, 8, 12, 8000
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, instances, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{}}
			engines := make([]*redlimit.Limiter, instances)
			for i := range engines {
				engines[i] = blockEngine(t, backends[i], clk, prefix, rule)
			}
			var steady, before int64
			got := playWindows(t, engines, clk, time.Minute, setup.final, windows, callers, limit, func(w int) {
				if w == 0 {
					before = n.n.Load()
				}
			})
			for w, ns := range got {
				admitted := sum(ns)
				if admitted > limit {
					t.Errorf("window %d admitted %d (per instant %v), over the limit %d", w, admitted, ns, limit)
				}
				if admitted*100 < limit*99 {
					t.Errorf("window %d admitted %d (per instant %v), under 99%% of the limit %d", w, admitted, ns, limit)
				}
				if w > 0 {
					steady += admitted
				}
			}
			if setup.name == "redis" {
				per := float64(n.n.Load()-before) / float64(steady)
				t.Logf("%d Redis commands for %d admitted from window 1 on: %.4f per admitted request", n.n.Load()-before, steady, per)
				if per > 0.05 {
					t.Errorf("%.4f Redis commands per admitted request, want <= 0.05", per)
				}
			}
		})
	}
}

// TestBlocksExactSlidingWindow: the same load on a sliding window counter
// rule: at every instant the estimate (the previous window's count
// weighted by its part still in the sliding interval, plus the current
// window's count) never exceeds the limit, and the saturating instant one
// µs before a window's end fills it to at least 99% of what the estimate
// leaves.
func TestBlocksExactSlidingWindow(t *testing.T) {
	const instances, callers, windows, limit = 4, 8, 8, 4000
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, instances, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{}}
			engines := make([]*redlimit.Limiter, instances)
			for i := range engines {
				engines[i] = blockEngine(t, backends[i], clk, prefix, rule)
			}
			got := playWindows(t, engines, clk, time.Minute, setup.final, windows, callers, limit, nil)
			period := float64(time.Minute / time.Microsecond)
			var prev int64
			for w, ns := range got {
				var cur int64
				for p, at := range append(phases, finalAt(time.Minute, setup.final)) {
					cur += ns[p]
					elapsed := float64(at / time.Microsecond)
					est := float64(prev) * (period - elapsed) / period
					if est+float64(cur) > limit {
						t.Errorf("window %d at %v: previous %d weighs %.3f, current %d: over the limit %d", w, at, prev, est, cur, limit)
					}
					if p == len(phases) && float64(cur)*100 < (limit-est-1)*99 {
						t.Errorf("window %d: current %d under 99%% of the %.3f the estimate leaves", w, cur, limit-est)
					}
				}
				prev = cur
			}
		})
	}
}

// TestBlocksLayeredDenialGivesBack: a request that another rule denies
// gives the unit it took from a block back: the hot key still admits
// exactly its limit in all.
func TestBlocksLayeredDenialGivesBack(t *testing.T) {
	clk := newStepClock(windowStart)
	m, err := memstore.New(memstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := blockEngine(t, m, clk, "layered",
		redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{}},
		redlimit.Rule{Name: "user", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(10)})
	var d redlimit.Decision
	var admitted, fromBlock, deniedByUser int
	decide := func(user string) {
		e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: "hot"}, {Material: user}}), &d)
		if d.Allowed {
			admitted++
		} else if d.Rules[1].Evaluated && !d.Rules[1].Result.Allowed {
			deniedByUser++
		}
		if d.Rules[0].FromBlock {
			fromBlock++
		}
	}
	for range 500 {
		decide("alice")
		waitIdle([]*redlimit.Limiter{e})
	}
	if admitted != 10 || deniedByUser != 490 {
		t.Fatalf("alice: admitted %d, denied by her rule %d; want 10, 490", admitted, deniedByUser)
	}
	if fromBlock == 0 {
		t.Fatalf("no check of the hot key was answered from a block")
	}
	for i := 0; ; i++ {
		before := admitted
		decide("user" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)))
		waitIdle([]*redlimit.Limiter{e})
		if admitted == before && i > 2000 {
			break
		}
	}
	if admitted != 1000 {
		t.Errorf("the hot key admitted %d in all, want exactly its limit 1000", admitted)
	}
}

// TestBlocksCloseGivesBack: Close gives back what a block has left, at
// most once even when every refund script is sent twice, so another
// instance gets exactly the rest of the window; a crashed instance's
// units count until the window ends, and the next window is whole.
func TestBlocksCloseGivesBack(t *testing.T) {
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 3, &n, newResendRefunds())
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(1000), Blocks: &redlimit.BlockConfig{}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			c := blockEngine(t, backends[2], clk, prefix, rule)
			took := load([]*redlimit.Limiter{a}, 4, 50, false)
			waitIdle([]*redlimit.Limiter{a})
			if took != 200 {
				t.Fatalf("a admitted %d of 200, want all", took)
			}
			a.Close()
			got := saturate(b)
			if got != 1000-took {
				t.Errorf("after a closed, b admitted %d, want the %d a had not used", got, 1000-took)
			}
			// crash: c takes blocks, then dies without giving back
			clk.Set(windowStart.Add(time.Second))
			tookC := load([]*redlimit.Limiter{c}, 4, 50, false)
			waitIdle([]*redlimit.Limiter{c})
			redlimit.CrashBlocks(c)
			if got := saturate(b); got+tookC > 1000 {
				t.Errorf("window 1: c admitted %d and crashed, b %d: over the limit 1000", tookC, got)
			}
			clk.Set(windowStart.Add(2 * time.Second))
			if got := saturate(b); got != 1000 {
				t.Errorf("window 2, after c crashed: b admitted %d, want the whole 1000", got)
			}
		})
	}
}

// saturate checks on e until it is denied with no block being taken, and
// returns how many it admitted.
func saturate(e *redlimit.Limiter) int64 {
	var n int64
	for {
		got := load([]*redlimit.Limiter{e}, 4, 1, true)
		waitIdle([]*redlimit.Limiter{e})
		n += got
		if got == 0 {
			return n
		}
	}
}

// TestBlocksConfig: a rule whose blocks cannot be exact, or a backend
// that cannot give units back, is refused when the Limiter is built.
func TestBlocksConfig(t *testing.T) {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    algorithms.Backend
		rule redlimit.Rule
		want string
	}{
		{"gcra, no blocker", contract.AllowAll{}, redlimit.Rule{Name: "r", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{}},
			`redlimit: rule "r": Blocks needs a backend that takes blocks of gcra keys`},
		{"concurrency", m, redlimit.Rule{Name: "r", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(2, time.Minute), Blocks: &redlimit.BlockConfig{}},
			`redlimit: rule "r": Blocks is not exact for concurrency`},
		{"sliding log", m, redlimit.Rule{Name: "r", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{}},
			`redlimit: rule "r": Blocks is not exact for sliding_log`},
		{"hold", m, redlimit.Rule{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{Hold: time.Microsecond}},
			`redlimit: rule "r": Blocks.Hold must be 0 (100ms) or between 1ms and 10s, got 1µs`},
		{"share", m, redlimit.Rule{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{Share: 2}},
			`redlimit: rule "r": Blocks.Share must be 0 (0.25) or in (0, 1], got 2`},
		{"min rate", m, redlimit.Rule{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{MinRate: -1}},
			`redlimit: rule "r": Blocks.MinRate must be >= 0 checks per second, got -1`},
		{"shadow", m, redlimit.Rule{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10), Shadow: true, Blocks: &redlimit.BlockConfig{}},
			`redlimit: rule "r": Blocks must be nil for a shadow rule`},
		{"no refunder", contract.AllowAll{}, redlimit.Rule{Name: "r", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(10), Blocks: &redlimit.BlockConfig{}},
			`redlimit: rule "r": Blocks needs a backend that can give units back`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := redlimit.New(tc.b, redlimit.Config{Rules: []redlimit.Rule{tc.rule}})
			if err == nil {
				e.Close()
				t.Fatalf("New = nil error, want %q", tc.want)
			}
			if !errors.Is(err, algorithms.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q...", err, tc.want)
			}
		})
	}
}

// TestBlocksHeaders: a check answered from a block reports Remaining as
// what the store reported after this instance's last call plus what its
// blocks have left, and ResetAfter as the time until the window ends:
// exact with one instance; with two, never below what the instance
// admits afterwards.
func TestBlocksHeaders(t *testing.T) {
	clk := newStepClock(windowStart.Add(10 * time.Second))
	m, err := memstore.New(memstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	// a Hold of 10s: the sweeper gives back no block of a key idle for a
	// moment of a busy machine while the test runs
	rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
	a := blockEngine(t, m, clk, "headers", rule)
	in := []redlimit.Input{{Material: "hot"}}
	var d redlimit.Decision
	used, local := 0, 0
	for range 300 {
		a.Decide(context.Background(), inOrder(a, in), &d)
		waitIdle([]*redlimit.Limiter{a})
		if !d.Allowed {
			t.Fatalf("check %d denied", used+1)
		}
		used++
		r := d.Rules[0].Result
		if d.Rules[0].FromBlock {
			local++
			if r.Remaining != int64(1000-used) || r.ResetAfter != 50*time.Second || r.Limit != 1000 {
				t.Fatalf("check %d from a block: Result %+v, want Limit 1000, Remaining %d, ResetAfter 50s", used, r, 1000-used)
			}
		}
	}
	if local < 250 {
		t.Fatalf("%d of 300 checks answered from blocks", local)
	}
	// a second instance takes units too: a's Remaining is then an upper
	// bound of what a can still admit
	b := blockEngine(t, m, clk, "headers", rule)
	load([]*redlimit.Limiter{b}, 1, 200, false)
	waitIdle([]*redlimit.Limiter{b})
	a.Decide(context.Background(), inOrder(a, in), &d)
	waitIdle([]*redlimit.Limiter{a})
	claimed := d.Rules[0].Result.Remaining
	if got := saturate(a); got > claimed {
		t.Errorf("a reported Remaining %d, then admitted %d", claimed, got)
	}
}

// TestBlocksReset: ResetInputs drops this instance's blocks of the key
// without giving them back, and the key starts afresh: the instance
// admits exactly the limit again.
func TestBlocksReset(t *testing.T) {
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backend := setup.backends(t, clk, 1, &n)[0]
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{}}
			e := blockEngine(t, backend, clk, enginePrefix(t), rule)
			if got := load([]*redlimit.Limiter{e}, 4, 100, false); got != 400 {
				t.Fatalf("admitted %d of 400", got)
			}
			waitIdle([]*redlimit.Limiter{e})
			if err := e.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			if got := saturate(e); got != 1000 {
				t.Errorf("after Reset, admitted %d, want the whole limit 1000", got)
			}
		})
	}
}

// TestBlocksCalendar: quota blocks of a calendar quota (a day in a zone)
// count in the day they were taken: 4 instances × 8 callers get exactly
// the day's quota just before midnight, and again from midnight, none
// of the day before's blocks answering after it.
func TestBlocksCalendar(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			day := time.Date(2026, 3, 28, 0, 0, 0, 0, berlin) // the day before the clocks go forward
			clk := newStepClock(day.Add(12 * time.Hour))
			var n calls
			backends := setup.backends(t, clk, 4, &n)
			rule := redlimit.Rule{Name: "quota", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(5000, berlin), Blocks: &redlimit.BlockConfig{}}
			prefix := enginePrefix(t)
			var engines []*redlimit.Limiter
			for _, b := range backends {
				engines = append(engines, blockEngine(t, b, clk, prefix, rule))
			}
			noon := load(engines, 8, 40, false)
			waitIdle(engines)
			// The noon blocks' time is up 2 Holds later: their rest goes
			// back within the refund window (the store's 2s from the
			// block); after the evening's jump of hours it would be lost,
			// and the day would admit less than its quota.
			clk.Set(day.Add(12*time.Hour + 300*time.Millisecond))
			for _, e := range engines {
				redlimit.SweepBlocks(e)
			}
			// drain checks on every instance until a round admits nothing.
			// The clock stands still: an instance the store denied while
			// the others held the key's last units in blocks stays denied
			// locally (a quarter Hold that never passes), and the blocks
			// the sweeper gives back then leave units in the store. So the
			// instances' blocks are given back (two sweeps: idle), and a
			// fresh instance takes what is left.
			drain := func() int64 {
				var n int64
				for {
					got := load(engines, 8, 1, true)
					waitIdle(engines)
					if n += got; got == 0 {
						break
					}
				}
				for range 2 {
					for _, e := range engines {
						redlimit.SweepBlocks(e)
					}
				}
				fresh := blockEngine(t, backends[0], clk, prefix, rule)
				n += saturate(fresh)
				fresh.Close()
				return n
			}
			clk.Set(day.AddDate(0, 0, 1).Add(-setup.margin))
			if evening := drain(); noon+evening != 5000 {
				t.Errorf("day 1: admitted %d at noon and %d before midnight, want 5000 in all", noon, evening)
			}
			clk.Set(day.AddDate(0, 0, 1))
			if next := drain(); next != 5000 {
				t.Errorf("day 2: admitted %d from midnight, want 5000", next)
			}
		})
	}
}

// TestBlocksReturnedUnitsFound: units one instance gives back are found
// by another that the store denied meanwhile, a quarter Hold later: its
// deny cache does not hold the denial to the window's end.
func TestBlocksReturnedUnitsFound(t *testing.T) {
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 2, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			tookA := load([]*redlimit.Limiter{a}, 4, 100, false)
			waitIdle([]*redlimit.Limiter{a})
			tookB := saturate(b)
			a.Close() // gives back what its blocks hold
			var d redlimit.Decision
			b.Decide(context.Background(), inOrder(b, []redlimit.Input{{Material: "hot"}}), &d)
			if d.Allowed {
				t.Fatalf("b allowed at once after a denial: its local denial lasts a quarter Hold")
			}
			clk.Set(windowStart.Add(25 * time.Millisecond))
			got := saturate(b)
			if tookA+tookB+got != 1000 {
				t.Errorf("a admitted %d, b %d, then %d after a gave back: %d in all, want 1000", tookA, tookB, got, tookA+tookB+got)
			}
		})
	}
}

// TestBlocksResetOtherInstance: a reset on one instance moves the key to
// its next epoch. What another instance gives back afterwards of a block
// taken before the reset (a closes) goes to the abandoned epoch's key and
// creates no capacity: the resetting instance gets exactly the limit. A
// third instance learns of the reset with its next block call and drops
// its blocks: it admits at most what it held at the reset. The next window
// admits exactly the limit.
func TestBlocksResetOtherInstance(t *testing.T) {
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
			held := map[*redlimit.Limiter]int64{}
			for _, e := range []*redlimit.Limiter{a, c} {
				load([]*redlimit.Limiter{e}, 4, 30, false)
				waitIdle([]*redlimit.Limiter{e})
				var d redlimit.Decision
				e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: "hot"}}), &d)
				waitIdle([]*redlimit.Limiter{e})
				if held[e] = redlimit.BlockUnits(e, d.Rules[0].Key); held[e] == 0 {
					t.Fatalf("an instance held no block at the reset")
				}
			}
			if err := b.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			first := load([]*redlimit.Limiter{b}, 1, 10, false) // the key lives again
			a.Close()                                           // gives back a block taken before the reset
			if got := first + saturate(b); got != 1000 {
				t.Errorf("after the reset and a's refund of %d, b admitted %d, want exactly the limit 1000", held[a], got)
			}
			if got := saturate(c); got > held[c] {
				t.Errorf("after the reset c admitted %d, more than the %d it held at the reset", got, held[c])
			}
			clk.Set(windowStart.Add(time.Minute))
			if got := saturate(b) + saturate(c); got != 1000 {
				t.Errorf("the next window admitted %d, want 1000", got)
			}
		})
	}
}

// TestBlocksResetExhausted: a key the instances exhausted, reset by one
// of them. The other takes no more blocks (the key's last units go
// request by request), so no block call tells it of the new epoch: before
// askEpoch it went on checking the old key, denied until the window ended
// (80 checks over 1s, all denied). Now a denial of the store makes it ask
// the epoch counter, and it is allowed again within half a Hold of the
// reset (a quarter Hold of local denial, then one denied check), also
// after an idle spell long enough for its sweeper to forget an idle key;
// the instances together then admit exactly the limit again.
func TestBlocksResetExhausted(t *testing.T) {
	const hold = 100 * time.Millisecond
	for _, setup := range blockSetups {
		t.Run(setup.name, func(t *testing.T) {
			clk := newStepClock(windowStart)
			var n calls
			backends := setup.backends(t, clk, 2, &n)
			prefix := enginePrefix(t)
			rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: hold}}
			a := blockEngine(t, backends[0], clk, prefix, rule)
			b := blockEngine(t, backends[1], clk, prefix, rule)
			if got := saturate(a) + saturate(b); got != 1000 {
				t.Fatalf("before the reset: %d admitted, want 1000", got)
			}
			if err := a.Reset(context.Background(), "hot"); err != nil {
				t.Fatal(err)
			}
			var d redlimit.Decision
			var admitted int64
			first := time.Duration(-1)
			for at := time.Duration(0); at < time.Second; at += hold / 8 {
				clk.Set(windowStart.Add(at))
				b.Decide(context.Background(), inOrder(b, []redlimit.Input{{Material: "hot"}}), &d)
				waitIdle([]*redlimit.Limiter{b})
				if d.Allowed {
					admitted++
					if first < 0 {
						first = at
					}
				}
			}
			if first < 0 {
				t.Fatalf("b was denied for the 1s after the reset, want allowed within %v (half a Hold)", hold/2)
			}
			if first > hold/2 {
				t.Fatalf("b first allowed %v after the reset, want within %v (half a Hold)", first, hold/2)
			}
			// b idle for 8 of its sweeps (Hold/2 each, real time): it keeps
			// the key's epoch until the window ends (forgotten, it started
			// at epoch 0 again and denied on the old key after every idle
			// spell; a slower machine sweeps less, and forgets less).
			time.Sleep(4 * hold)
			b.Decide(context.Background(), inOrder(b, []redlimit.Input{{Material: "hot"}}), &d)
			waitIdle([]*redlimit.Limiter{b})
			if !d.Allowed {
				t.Fatalf("b denied after an idle spell, on %s: it forgot the reset", d.Rules[0].Key)
			}
			admitted++
			if got := admitted + saturate(a) + saturate(b); got != 1000 {
				t.Errorf("after the reset: %d admitted, want exactly the limit 1000", got)
			}
		})
	}
}

// TestBlocksBuckets: 4 instances with quota blocks on one hot key of a
// token bucket and of a GCRA rule (10,000/s, burst 1,000: a block holds
// at most 25ms, a quarter of the full window), on memstore and on a real
// redis-server, the clock stepping 1ms at a time. Under the limit (4,000/s
// offered for 300ms) nothing is denied and from the first 50ms on the
// instances send at most 0.1 Redis commands per admitted request; over
// it (1,200,000/s for 100ms), what is admitted over any interval between two
// instants stays within burst + rate × interval, and at least 90% of
// rate × time once the burst is spent. The last 150ms play the case a
// block stored at its now instead of its hold's end fails: instance 0
// alone takes blocks and uses them one check a ms, the others then drain
// the key at once (1,200 checks a ms) while instance 0 still uses the
// block it holds.
func TestBlocksBuckets(t *testing.T) {
	const instances = 4
	limit := algorithms.Limit{Rate: 10_000, Period: time.Second, Burst: 1_000}
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.GCRA} {
		for _, setup := range blockSetups {
			t.Run(alg.String()+"/"+setup.name, func(t *testing.T) {
				clk := newStepClock(windowStart)
				var n calls
				backends := setup.backends(t, clk, instances, &n)
				prefix := enginePrefix(t)
				rule := redlimit.Rule{Name: "hot", Algorithm: alg, Limit: limit, Blocks: &redlimit.BlockConfig{}}
				engines := make([]*redlimit.Limiter, instances)
				for i := range engines {
					engines[i] = blockEngine(t, backends[i], clk, prefix, rule)
				}
				type instant struct {
					at       time.Duration
					admitted int64
				}
				var series []instant
				var fromBlock atomic.Int64
				// play plays ms instants, 1ms apart: at each, instance 0 makes
				// one check, and every other instance callers goroutines of
				// attempts checks each.
				play := func(ms, callers, attempts int) (admitted, denied int64) {
					if callers == 0 {
						attempts = 0
					}
					for range ms {
						at := time.Duration(len(series)) * time.Millisecond
						clk.Set(windowStart.Add(at))
						var ok, no atomic.Int64
						var wg sync.WaitGroup
						for i, e := range engines {
							c, a := callers, attempts
							if i == 0 {
								c, a = 1, 1
							}
							if a == 0 {
								continue
							}
							for range c {
								wg.Go(func() {
									var d redlimit.Decision
									in := []redlimit.Input{{Material: "hot"}}
									for range a {
										e.Decide(context.Background(), inOrder(e, in), &d)
										if !d.Allowed {
											no.Add(1)
											continue
										}
										ok.Add(1)
										if d.Rules[0].FromBlock {
											fromBlock.Add(1)
										}
									}
								})
							}
						}
						wg.Wait()
						waitIdle(engines)
						series = append(series, instant{at, ok.Load()})
						admitted += ok.Load()
						denied += no.Load()
					}
					return admitted, denied
				}
				// under the limit: 4 checks a ms, 40% of the rate
				play(50, 1, 1)
				before := n.n.Load()
				fromBlock.Store(0)
				admitted, denied := play(250, 1, 1)
				if denied != 0 {
					t.Errorf("under the limit: %d denied, %d admitted", denied, admitted)
				}
				per := float64(n.n.Load()-before) / float64(admitted)
				t.Logf("under the limit: %d admitted, %d from blocks, %d denied, %.4f store calls per admitted request", admitted, fromBlock.Load(), denied, per)
				if setup.name == "redis" && per > 0.1 {
					t.Errorf("%.4f Redis commands per admitted request under the limit, want <= 0.1", per)
				}
				if fromBlock.Load()*2 < admitted {
					t.Errorf("%d of %d admitted from blocks, want at least half", fromBlock.Load(), admitted)
				}
				// instance 0 alone, its blocks held for 25ms at one check a
				// ms: the key near full but for them
				play(50, 0, 0)
				// then the others, 1,200 checks a ms, drain the key at once
				// while instance 0 still uses its blocks one check a ms
				start := len(series)
				over, _ := play(100, 4, 100)
				// the bound, over every interval [i, j] of instants: one
				// pass keeping the least S(i-1)·period - rate·t(i)
				p, r := int64(limit.Period), limit.Rate
				var sum int64
				least := int64(math.MaxInt64)
				for _, in := range series {
					if in.admitted == 0 {
						continue
					}
					if w := sum*p - r*int64(in.at); w < least {
						least = w
					}
					sum += in.admitted
					if (sum-limit.Burst)*p-r*int64(in.at) > least {
						t.Fatalf("at %v: more than burst + rate × interval admitted over an interval ending there", in.at)
					}
				}
				// once the burst is spent, the rate
				spent := time.Duration(len(series)-start) * time.Millisecond
				floor := int64(float64(r) * 0.9 * spent.Seconds())
				t.Logf("over the limit: %d admitted in %v (the rate: %d)", over, spent, int64(float64(r)*spent.Seconds()))
				if over < floor {
					t.Errorf("over the limit: %d admitted in %v, want at least %d", over, spent, floor)
				}
			})
		}
	}
}

// TestBlocksMinRate: blocks turn themselves on for a key whose local rate
// crosses MinRate and off again when it falls: at 20 checks/s (MinRate
// 100) every check goes to the store; at 1,000/s most are answered from
// blocks; back at 20/s, none once the last block's time is up (3 Holds).
func TestBlocksMinRate(t *testing.T) {
	clk := newStepClock(windowStart)
	m, err := memstore.New(memstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			e := blockEngine(t, m, clk, alg.String(), redlimit.Rule{Name: "hot", Algorithm: alg, Limit: algorithms.PerMinute(1_000_000),
				Blocks: &redlimit.BlockConfig{MinRate: 100}})
			var d redlimit.Decision
			in := []redlimit.Input{{Material: "k"}}
			// play makes checks every step for span, and returns how many
			// were answered from blocks after skip.
			play := func(span, step, skip time.Duration) (blocked, checks int) {
				start := clk.Now()
				for at := time.Duration(0); at < span; at += step {
					clk.Set(start.Add(at))
					redlimit.SweepBlocks(e)
					e.Decide(context.Background(), inOrder(e, in), &d)
					waitIdle([]*redlimit.Limiter{e})
					if !d.Allowed {
						t.Fatalf("denied at %v", at)
					}
					if at >= skip {
						checks++
						if d.Rules[0].FromBlock {
							blocked++
						}
					}
				}
				clk.Set(start.Add(span))
				return blocked, checks
			}
			if b, n := play(2*time.Second, 50*time.Millisecond, 0); b != 0 {
				t.Errorf("at 20/s: %d of %d checks from blocks, want none", b, n)
			}
			if b, n := play(500*time.Millisecond, time.Millisecond, 100*time.Millisecond); b*10 < n*9 {
				t.Errorf("at 1,000/s: %d of %d checks from blocks, want at least 90%%", b, n)
			}
			// the last block lasts until its time is up (2 Holds) at most
			if b, n := play(2*time.Second, 50*time.Millisecond, 300*time.Millisecond); b != 0 {
				t.Errorf("back at 20/s: %d of %d checks from blocks after 3 Holds, want none", b, n)
			}
		})
	}
}
