package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// onceLimit is the limit of the calls of TestScriptsSentOnce: never
// reached, so that a key's count is the number of times its script ran.
var onceLimit = algorithms.PerHour(1000)

// TestScriptsSentOnce: a client with go-redis's default options (3
// retries) in front of a network that loses one script reply in five,
// after the server ran the script: every key is charged exactly once per
// script run, never twice for one call. A call reported allowed charged
// each of its keys once; a call that failed charged them once or not at
// all (its reply was lost: the script ran, or it never reached the
// server), all of its keys alike. go-redis sending a lost script again
// would charge twice for one allowed call. Lone calls (each its own round
// trip, as the lean or the one-check script), and calls that queue and go
// in pipelines and batch scripts, from several callers at once, with one
// check or two. TestCluster/ScriptsSentOnce does the same on a cluster.
func TestScriptsSentOnce(t *testing.T) {
	srv := redistest.Require(t)
	reader, _ := redisstore.New(srv.Client(t), redisstore.Config{})
	lean := redis.NewScript(luaScript("lean_" + algorithms.FixedWindow.String())).Hash()
	multi := redis.NewScript(luaScript("multi")).Hash()
	batch := redis.NewScript(luaScript("batch_" + algorithms.FixedWindow.String())).Hash()
	for _, tc := range []struct {
		name      string
		pipelines int
		callers   int
		lost      []string // scripts some of whose replies must be lost
	}{
		{"lone calls", 0, 1, []string{lean, multi}},
		{"pipelines", 1, 16, []string{batch}},
		{"unpipelined", -1, 8, []string{lean, multi}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLossyProxy(t, srv.Addr, 5)
			client := redis.NewClient(&redis.Options{Addr: p.addr}) // go-redis's defaults: MaxRetries 3
			t.Cleanup(func() { client.Close() })
			store, err := redisstore.New(client, redisstore.Config{Pipelines: tc.pipelines})
			if err != nil {
				t.Fatal(err)
			}
			prefix := redistest.Prefix(t)
			sentOnce(t, store, reader, tc.callers, 60, func(i int) string { return fmt.Sprintf("%s{c%d}", prefix, i) })
			for _, sha := range tc.lost {
				if sent, lost := counts(sha, p); lost == 0 {
					t.Errorf("script %s: none of %d replies lost, the test does not cover it", sha, sent)
				}
			}
		})
	}
}

// sentOnce makes callers × perCaller calls on store, call i with one
// check (i even) or two (i odd) on keys of its own, key(i) and
// key(i)+":b" (so in the hash slot key(i) says), and checks with reader,
// a store that reaches the same Redis directly, that each call's keys
// were charged once if it was allowed, once or not at all, all alike, if
// it failed.
func sentOnce(t *testing.T, store, reader algorithms.Backend, callers, perCaller int, key func(i int) string) {
	t.Helper()
	calls := callers * perCaller
	errs := make([]error, calls)
	allowed := make([]bool, calls)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for j := range perCaller {
				i := g*perCaller + j
				checks := []algorithms.Check{{Key: key(i), Algorithm: algorithms.FixedWindow, Limit: onceLimit}}
				if i%2 == 1 {
					checks = append(checks, algorithms.Check{Key: key(i) + ":b", Algorithm: algorithms.FixedWindow, Limit: onceLimit})
				}
				res := make([]algorithms.Result, len(checks))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				errs[i] = store.Allow(ctx, checks, res)
				cancel()
				allowed[i] = errs[i] == nil && res[0].Allowed
				if errs[i] == nil && !res[0].Allowed {
					t.Errorf("call %d denied under a limit it cannot reach: %+v", i, res)
				}
			}
		})
	}
	wg.Wait()
	var nAllowed, nFailed, charged, checksAllowed, checksFailed, twice int64
	report := func(format string, args ...any) {
		if twice++; twice <= 5 {
			t.Errorf(format, args...)
		}
	}
	for i := range calls {
		keys := []string{key(i)}
		if i%2 == 1 {
			keys = append(keys, key(i)+":b")
		}
		used := make([]int64, len(keys))
		for k, key := range keys {
			used[k] = unitsUsed(t, reader, key)
			charged += used[k]
		}
		switch {
		case allowed[i]:
			nAllowed++
			checksAllowed += int64(len(keys))
			for k := range keys {
				if used[k] != 1 {
					report("call %d allowed once, %q charged %d times: its script was sent again", i, keys[k], used[k])
				}
			}
		case errs[i] != nil:
			nFailed++
			checksFailed += int64(len(keys))
			for k := range keys {
				if used[k] > 1 || used[k] != used[0] {
					report("call %d failed (%v), its keys charged %v times: want 0 or 1, all alike", i, errs[i], used)
					break
				}
			}
		}
	}
	t.Logf("%d calls: %d allowed, %d failed; %d units charged, for %d checks allowed and %d checks of calls that failed", calls, nAllowed, nFailed, charged, checksAllowed, checksFailed)
	if twice > 5 {
		t.Errorf("... and %d more calls charged more than once", twice-5)
	}
	if nFailed == 0 {
		t.Errorf("no call failed: the lost replies did not reach the callers")
	}
}

// unitsUsed reads the units used of key, a fixed window of onceLimit,
// without consuming any, by a check whose cost can never fit.
func unitsUsed(t *testing.T, b algorithms.Backend, key string) int64 {
	t.Helper()
	res := make([]algorithms.Result, 1)
	c := onceLimit.Capacity(algorithms.FixedWindow)
	if err := b.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: onceLimit, Cost: c + 1}}, res); err != nil {
		t.Fatal(err)
	}
	return c - res[0].Remaining
}

// retryWatch is a go-redis hook that records every script command a
// client is given, alone or in a pipeline, and which of them go-redis
// would send again after an error (NoRetry false).
type retryWatch struct {
	mu        sync.Mutex
	scripts   map[string]int // scripts seen, by SHA1 (EVAL: its source's)
	retryable []string       // the scripts go-redis may send again
	evals     int            // EVAL commands seen
}

func (w *retryWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *retryWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.see(cmd)
		return next(ctx, cmd)
	}
}

func (w *retryWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			w.see(cmd)
		}
		return next(ctx, cmds)
	}
}

func (w *retryWatch) see(cmd redis.Cmder) {
	name := cmd.Name()
	if name != "evalsha" && name != "eval" {
		return
	}
	sha := fmt.Sprint(cmd.Args()[1])
	w.mu.Lock()
	defer w.mu.Unlock()
	if name == "eval" {
		sha = redis.NewScript(sha).Hash()
		w.evals++
	}
	if w.scripts == nil {
		w.scripts = map[string]int{}
	}
	w.scripts[sha]++
	if !cmd.NoRetry() {
		w.retryable = append(w.retryable, fmt.Sprintf("%s %s (%T)", name, sha, cmd))
	}
}

// TestScriptsNeverRetried: every script the store gives a go-redis
// client, of every kind (decide calls alone, lean, batched and layered;
// refundable calls and their refunds; compensating refunds on a Ring;
// quota blocks; lease releases and renewals; calls in the exact mode,
// with WAIT; EVAL after SCRIPT FLUSH), is a command whose NoRetry is
// true, so that no client option makes go-redis send it twice. The
// lossy network of TestScriptsSentOnce shows what that buys; this test
// shows that no path of the store sends a script that go-redis may send
// again.
func TestScriptsNeverRetried(t *testing.T) {
	srv := redistest.Require(t)
	ctx := context.Background()
	limit := algorithms.PerHour(100)
	// run makes calls of every kind on b, keys under prefix.
	run := func(t *testing.T, b *redisstore.Store, prefix string, concurrent bool) {
		t.Helper()
		res := make([]algorithms.Result, 2)
		calls := [][]algorithms.Check{
			{{Key: prefix + "{a}", Algorithm: algorithms.FixedWindow, Limit: limit}},
			{{Key: prefix + "{a}:g", Algorithm: algorithms.GCRA, Limit: limit}},
			{{Key: prefix + "{a}:t", Algorithm: algorithms.TokenBucket, Limit: limit}},
			{{Key: prefix + "{a}:w", Algorithm: algorithms.FixedWindow, Limit: limit}, {Key: prefix + "{b}:w", Algorithm: algorithms.SlidingWindow, Limit: limit}},
			// denied on {b}: a Ring refunds what {a} committed
			{{Key: prefix + "{a}:d", Algorithm: algorithms.GCRA, Limit: limit}, {Key: prefix + "{b}:d", Algorithm: algorithms.GCRA, Limit: limit, Cost: 101}},
			{{Key: prefix + "{a}:cal", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 100, Calendar: algorithms.Day}}},
		}
		for _, checks := range calls {
			if err := b.Allow(ctx, checks, res[:len(checks)]); err != nil {
				t.Fatal(err)
			}
		}
		refundable := algorithms.Check{Key: prefix + "{a}:r", Algorithm: algorithms.TokenBucket, Limit: limit, RefundWindow: time.Minute}
		if err := b.Allow(ctx, []algorithms.Check{refundable}, res[:1]); err != nil {
			t.Fatal(err)
		}
		if err := b.Refund(ctx, []algorithms.Refund{{Check: refundable, Result: res[0], Units: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.TakeBlock(ctx, algorithms.Check{Key: prefix + "{a}:blk", Algorithm: algorithms.GCRA, Limit: limit}, time.Second); err != nil {
			t.Fatal(err)
		}
		lease := algorithms.Check{Key: prefix + "{a}:cc", Algorithm: algorithms.Concurrency, Limit: algorithms.Limit{Rate: 5, Period: time.Minute}, Lease: contract.NewLease()}
		if err := b.Allow(ctx, []algorithms.Check{lease}, res[:1]); err != nil {
			t.Fatal(err)
		}
		l := []algorithms.Lease{{Key: lease.Key, ID: lease.Lease, Period: time.Minute}}
		if err := b.Renew(ctx, l, make([]bool, 1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if concurrent {
			hammer(t, b, 32, 640, algorithms.Check{Key: prefix + "{a}:hot", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1000)})
		}
	}
	check := func(t *testing.T, w *retryWatch, want ...string) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.retryable) > 0 {
			t.Errorf("%d scripts go-redis may send again, the first: %s", len(w.retryable), w.retryable[0])
		}
		for _, sha := range want {
			if w.scripts[sha] == 0 {
				t.Errorf("script %s never sent: the test does not cover it", sha)
			}
		}
		t.Logf("%d kinds of script sent", len(w.scripts))
	}
	batch := redis.NewScript(luaScript("batch_" + algorithms.GCRA.String())).Hash()
	lean := redis.NewScript(luaScript("lean_" + algorithms.FixedWindow.String())).Hash()
	refund := redis.NewScript(luaScript("refund")).Hash()
	release := redis.NewScript(luaScript("release")).Hash()
	renew := redis.NewScript(luaScript("renew")).Hash()
	block := redis.NewScript(luaScript("block")).Hash()
	multi := redis.NewScript(luaScript("multi")).Hash()

	for _, pipelines := range []int{0, -1} {
		t.Run(fmt.Sprint("Pipelines ", pipelines), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { client.Close() })
			w := &retryWatch{}
			client.AddHook(w)
			b, _ := redisstore.New(client, redisstore.Config{Pipelines: pipelines})
			prefix := redistest.Prefix(t)
			run(t, b, prefix, true)
			// after SCRIPT FLUSH: EVAL, alone and in a pipeline
			if err := client.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			run(t, b, prefix+"flushed:", true)
			want := []string{lean, multi, refund, release, renew, block}
			if pipelines == 0 {
				want = append(want, batch)
			}
			check(t, w, want...)
			if w.evals == 0 {
				t.Errorf("no EVAL after SCRIPT FLUSH")
			}
		})
	}
	t.Run("Replicas", func(t *testing.T) {
		// no replica answers: every decision is ErrNotReplicated, sent all the same
		client := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		w := &retryWatch{}
		client.AddHook(w)
		b, _ := redisstore.New(client, redisstore.Config{Replicas: 1, ReplicaTimeout: time.Millisecond})
		err := b.Allow(ctx, []algorithms.Check{{Key: redistest.Prefix(t) + "{a}", Algorithm: algorithms.GCRA, Limit: limit}}, make([]algorithms.Result, 1))
		if !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Fatalf("Allow = %v, want ErrNotReplicated", err)
		}
		check(t, w, redis.NewScript(luaScript("one_"+algorithms.GCRA.String())).Hash())
	})
	t.Run("Ring", func(t *testing.T) {
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": miniredis.RunT(t).Addr(), "b": miniredis.RunT(t).Addr()}})
		t.Cleanup(func() { ring.Close() })
		w := &retryWatch{}
		if err := ring.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error { c.AddHook(w); return nil }); err != nil {
			t.Fatal(err)
		}
		for _, pipelines := range []int{0, -1} {
			b, _ := redisstore.New(ring, redisstore.Config{Pipelines: pipelines})
			run(t, b, fmt.Sprint("p", pipelines, ":"), false)
		}
		check(t, w, multi, refund, release, renew, block)
	})
}
