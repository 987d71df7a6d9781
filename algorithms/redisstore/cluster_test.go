package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/hashslot"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestMarkerKeys: the marker keys of a storage key (see Redis, "Redis
// Cluster") live in its hash slot, whatever its braces.
func TestMarkerKeys(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"", "foo", "rate:ip:{203.0.113.7}", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
		"{", "}", "{}", "a{b", "a}b{c}", "}{", "x}", "{}{}", "ключ", "{\x00\xff}",
	} {
		for _, m := range redisstore.MarkerKeys(key) {
			if got, want := hashslot.Of(m), hashslot.Of(key); got != want {
				t.Errorf("HashSlot(%q) = %d, want %d, the slot of its storage key %q", m, got, want, key)
			}
			if !strings.Contains(m, key) {
				t.Errorf("marker %q does not hold its storage key %q", m, key)
			}
		}
	}
}

// midHour is a clock fixed in the middle of the current hour: the window
// algorithms cannot straddle a boundary, and the TTLs it yields are about
// half an hour of the server's time.
func midHour() func() time.Time {
	mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	return func() time.Time { return mid }
}

// requireSlots fails t unless every key hashes to a different slot.
func requireSlots(t *testing.T, keys ...string) {
	t.Helper()
	seen := map[int]string{}
	for _, k := range keys {
		s := hashslot.Of(k)
		if other, ok := seen[s]; ok {
			t.Fatalf("%q and %q share slot %d; the test needs them apart", k, other, s)
		}
		seen[s] = k
	}
}

// scriptCalls sums the EVALSHA and EVAL calls of every master (INFO
// commandstats).
func scriptCalls(t *testing.T, cl *redistest.Cluster) (evalsha, eval int64) {
	t.Helper()
	err := cl.ForEachMaster(context.Background(), func(c *redis.Client) error {
		info, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			return err
		}
		evalsha += cmdCalls(info, "evalsha")
		eval += cmdCalls(info, "eval")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evalsha, eval
}

// loadScript loads the scripts on every master, so that counts of EVALSHA
// are not disturbed by a first NOSCRIPT.
func loadScript(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	if err := cl.ForEachMaster(context.Background(), func(c *redis.Client) error {
		for _, s := range redisstore.Scripts() {
			if err := c.ScriptLoad(context.Background(), s).Err(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func resetStats(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	if err := cl.ForEachMaster(context.Background(), func(c *redis.Client) error {
		return c.ConfigResetStat(context.Background()).Err()
	}); err != nil {
		t.Fatal(err)
	}
}

// cmdCalls reads calls=N from the line "cmdstat_<cmd>:calls=N,..." of INFO
// commandstats.
func cmdCalls(info, cmd string) int64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		return n
	}
	return 0
}

type barrierCluster struct {
	*redis.ClusterClient
	n       int32
	arrived atomic.Int32
	all     chan struct{}
}

func (b *barrierCluster) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if b.arrived.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
		return b.ClusterClient.EvalSha(ctx, sha, keys, args...)
	case <-time.After(time.Second):
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errors.New("barrier: the scripts of one call were not sent concurrently"))
		return cmd
	}
}

// TestCluster runs against one real Redis Cluster (3 masters, 3
// replicas) shared by its subtests, which run in order, the fault tests
// last.
func TestCluster(t *testing.T) {
	redistest.RequireCluster(t)
	t.Parallel()
	start := time.Now()
	cl, err := redistest.StartCluster(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	t.Logf("cluster of 6 nodes up in %v", time.Since(start).Round(time.Millisecond))
	client := cl.Client(t)
	ctx := context.Background()

	t.Run("HashSlot", func(t *testing.T) {
		for i := range 500 {
			key := fmt.Sprintf("rate:r%d:{k%d}", i%7, i)
			switch i % 4 {
			case 1:
				key = fmt.Sprintf("k%d", i*7919)
			case 2:
				key = fmt.Sprintf("x{%d}{y}", i)
			case 3:
				key = fmt.Sprintf("{}%d{", i)
			}
			want, err := client.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := hashslot.Of(key); int64(got) != want {
				t.Fatalf("HashSlot(%q) = %d, CLUSTER KEYSLOT %d", key, got, want)
			}
			for _, m := range redisstore.MarkerKeys(key) {
				if got, err := client.ClusterKeySlot(ctx, m).Result(); err != nil || got != want {
					t.Fatalf("CLUSTER KEYSLOT %q = %d, %v; its storage key %q is in slot %d", m, got, err, key, want)
				}
			}
		}
	})

	// Every vector, on the cluster: layered steps whose keys live in
	// different slots are compensated and must still answer exactly.
	t.Run("Conformance", func(t *testing.T) {
		for _, sc := range backendtest.LoadVectors(t) {
			t.Run(sc.File+"/"+sc.Name, func(t *testing.T) {
				t.Parallel()
				c := &backendtest.Clock{T: backendtest.T0}
				// persisting, as on one server: the vectors run on their
				// own clock, so the servers' clocks must not expire keys
				// between steps (a 1ms TTL near a window's end would).
				b, err := redisstore.New(backendtest.PersistingCluster{ClusterClient: client}, redisstore.Config{Now: c.Now})
				if err != nil {
					t.Fatal(err)
				}
				backendtest.Play(t, &backendtest.Harness{Backend: finalResults{b}, Clock: c, Prefix: redistest.Prefix(t)}, sc, false)
			})
		}
	})

	// Random workloads of one to three rules on keys in two slots: the
	// cluster (where a layered call spans slots and a denial is undone by
	// refunds) answers exactly like a single node (miniredis). Neither
	// expires keys, so the workload's clock may jump forward; it never goes
	// back here, since compensation is exact only then (see Redis). Time is
	// scaled by 1000 (the same workload in ms instead of µs), so that no TTL
	// is short enough to run out between a script and its PERSIST on a
	// loaded machine.
	var crossSlot atomic.Int64
	differential := false
	t.Run("Differential", func(t *testing.T) {
		differential = true
		for seed := uint64(1); seed <= 24; seed++ {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
				t.Parallel()
				onCluster, cc := clusterBackend(t, backendtest.PersistingCluster{ClusterClient: client})
				single, sc := miniBackend(t, miniredis.RunT(t))
				prefix := redistest.Prefix(t)
				var last time.Time
				for i, step := range backendtest.RandomWorkload(seed, 100) {
					step = backendtest.Scaled(step, 1000)
					if step.At.Before(last) {
						step.At = last
					}
					last = step.At
					if len(step.Checks) > 1 && hashslot.Of(step.Checks[0].Key) != hashslot.Of(step.Checks[len(step.Checks)-1].Key) {
						crossSlot.Add(1)
					}
					got := backendtest.Run(t, onCluster, cc, prefix, step)
					want := backendtest.Run(t, single, sc, "", step)
					for j := range got {
						if final(got[j]) != want[j] {
							t.Fatalf("step %d check %d (%s %v %v cost %d at t0+%v): cluster %+v, single node %+v",
								i, j, step.Checks[j].Key, step.Checks[j].Algorithm, step.Checks[j].Limit, step.Checks[j].Cost, step.At.Sub(backendtest.T0), got[j], want[j])
						}
					}
				}
			})
		}
	})
	// Blocks of token bucket and GCRA keys spread over every master, beside
	// single checks of them, decide on the cluster what they decide on
	// one node (lua/block.lua routed by its key's slot).
	t.Run("Blocks", func(t *testing.T) {
		onCluster, cc := clusterBackend(t, backendtest.PersistingCluster{ClusterClient: client})
		single, sc := miniBackend(t, miniredis.RunT(t))
		prefix := redistest.Prefix(t)
		rng := rand.New(rand.NewPCG(26, 4))
		at := backendtest.T0
		blocks, slots := 0, map[int]bool{}
		for i := range 300 {
			at = at.Add(time.Duration(rng.IntN(50_000)) * time.Microsecond)
			cc.T, sc.T = at, at
			alg := algorithms.GCRA
			if i%2 == 0 {
				alg = algorithms.TokenBucket
			}
			c := algorithms.Check{Key: fmt.Sprintf("blk:%v:{%d}", alg, rng.IntN(12)), Algorithm: alg,
				Limit: algorithms.Limit{Rate: 100, Period: time.Second, Burst: 40}, Cost: 1 + rng.Int64N(10)}
			hold := time.Duration(1+rng.IntN(100_000)) * time.Microsecond
			want, err := single.(algorithms.Blocker).TakeBlock(ctx, c, hold)
			if err != nil {
				t.Fatal(err)
			}
			c.Key = prefix + c.Key
			slots[int(hashslot.Of(c.Key))] = true
			got, err := onCluster.(algorithms.Blocker).TakeBlock(ctx, c, hold)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("block %d (%s %v cost %d hold %v): cluster %+v, single node %+v", i, c.Key, alg, c.Cost, hold, got, want)
			}
			if got.Allowed {
				blocks++
			}
		}
		if blocks < 50 || len(slots) < 10 {
			t.Errorf("%d blocks allowed over %d slots: the workload no longer exercises them", blocks, len(slots))
		}
	})
	if n := crossSlot.Load(); differential && n < 100 {
		t.Fatalf("only %d cross-slot calls in the differential workloads", n)
	}

	prefix := redistest.Prefix(t)
	ip := prefix + "ip:{203.0.113.7}"
	user := prefix + "user:{alice}"
	route := prefix + "route:{POST /pay}"
	requireSlots(t, ip, user, route)

	t.Run("OneEvalShaPerSlot", func(t *testing.T) {
		b, _ := redisstore.New(client, redisstore.Config{})
		limit := algorithms.PerHour(1000)
		threeSlots := []algorithms.Check{
			{Key: ip + ":a", Algorithm: algorithms.GCRA, Limit: limit},
			{Key: user + ":a", Algorithm: algorithms.TokenBucket, Limit: limit},
			{Key: route + ":a", Algorithm: algorithms.SlidingLog, Limit: limit},
		}
		oneSlot := []algorithms.Check{
			{Key: prefix + "ip:{1}", Algorithm: algorithms.GCRA, Limit: limit},
			{Key: prefix + "user:{1}", Algorithm: algorithms.TokenBucket, Limit: limit},
			{Key: prefix + "route:{1}", Algorithm: algorithms.SlidingLog, Limit: limit},
		}
		res := make([]algorithms.Result, 3)
		loadScript(t, cl)
		resetStats(t, cl)
		const n = 50
		for range n {
			if err := b.Allow(ctx, threeSlots, res); err != nil || !res[0].Allowed || !res[1].Allowed || !res[2].Allowed {
				t.Fatal(res, err)
			}
		}
		evalsha, eval := scriptCalls(t, cl)
		t.Logf("%d calls over 3 slots, all allowed: %d EVALSHA, %d EVAL (masters' INFO commandstats)", n, evalsha, eval)
		if evalsha != 3*n || eval != 0 {
			t.Fatalf("%d calls over 3 slots: %d EVALSHA + %d EVAL, want exactly %d EVALSHA", n, evalsha, eval, 3*n)
		}
		resetStats(t, cl)
		for range n {
			if err := b.Allow(ctx, oneSlot, res); err != nil {
				t.Fatal(err)
			}
		}
		if evalsha, eval := scriptCalls(t, cl); evalsha != n || eval != 0 {
			t.Fatalf("%d calls in one slot: %d EVALSHA + %d EVAL, want exactly %d EVALSHA", n, evalsha, eval, n)
		}
	})

	t.Run("SlotsAreSentConcurrently", func(t *testing.T) {
		wrapped := &barrierCluster{ClusterClient: client, n: 3, all: make(chan struct{})}
		b, _ := redisstore.New(wrapped, redisstore.Config{})
		checks := []algorithms.Check{
			{Key: ip + ":c", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
			{Key: user + ":c", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
			{Key: route + ":c", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
		}
		if err := b.Allow(ctx, checks, make([]algorithms.Result, 3)); err != nil {
			t.Fatal(err)
		}
	})

	// One slot denies: every other slot ends exactly as it was (DUMP of
	// its key before and after), and every Result reads as the memory
	// backend's, for each algorithm in turn in the committing slots.
	t.Run("DenialConsumesNothing", func(t *testing.T) {
		now := midHour()
		b, _ := redisstore.New(client, redisstore.Config{Now: now})
		mem, _ := memstore.New(memstore.Config{Now: now})
		limit := algorithms.PerHour(100)
		var checks []algorithms.Check
		for i, alg := range algorithms.Algorithms {
			checks = append(checks, algorithms.Check{Key: fmt.Sprintf("%sdeny:%s:{m%d}", prefix, alg, i), Algorithm: alg, Limit: limit, Cost: 3})
		}
		inner := algorithms.Check{Key: prefix + "deny:inner:{tight}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
		checks = append(checks, inner)
		keys := make([]string, len(checks))
		for i, c := range checks {
			keys[i] = c.Key
		}
		requireSlots(t, keys...)

		got, want := make([]algorithms.Result, len(checks)), make([]algorithms.Result, len(checks))
		step := func(name string, checks []algorithms.Check) {
			t.Helper()
			if err := b.Allow(ctx, checks, got); err != nil {
				t.Fatal(err)
			}
			if err := mem.Allow(ctx, checks, want); err != nil {
				t.Fatal(err)
			}
			for i := range checks {
				if final(got[i]) != want[i] {
					t.Errorf("%s: Allow(%s) = %+v, memory backend %+v", name, checks[i].Key, got[i], want[i])
				}
			}
		}
		step("first call", checks)
		if !got[0].Allowed || !got[len(checks)-1].Allowed {
			t.Fatalf("first call not allowed: %+v", got)
		}
		before := dumps(t, client, keys[:len(keys)-1])
		step("inner denies", checks)
		if got[len(checks)-1].Allowed {
			t.Fatal("the tight inner rule allowed a second request")
		}
		after := dumps(t, client, keys[:len(keys)-1])
		for i := range before {
			if before[i] != after[i] {
				t.Errorf("%s changed although the call was denied", keys[i])
			}
		}
		step("outer alone", checks[:len(checks)-1])
		for i := range len(checks) - 1 {
			if got[i].Remaining != 100-6 {
				t.Errorf("%s: remaining %d after two allowed costs of 3, want 94", keys[i], got[i].Remaining)
			}
		}
	})

	// 32 goroutines make layered calls whose rules live in different slots;
	// the inner rule allows 10. The outer rule (each algorithm in turn) is
	// charged for exactly the allowed calls: the refunds undo every commit
	// of a denied call, under races. Unpipelined, so that every call sends
	// its own scripts (BatchExactness covers batches).
	t.Run("ConcurrentLayered", func(t *testing.T) {
		now := midHour()
		b, _ := redisstore.New(client, redisstore.Config{Now: now, Pipelines: -1})
		loadScript(t, cl)
		resetStats(t, cl)
		for i, alg := range algorithms.Algorithms {
			outer := algorithms.Check{Key: fmt.Sprintf("%sconc:%s:{outer%d}", prefix, alg, i), Algorithm: alg, Limit: algorithms.PerHour(1000)}
			inner := algorithms.Check{Key: fmt.Sprintf("%sconc:%s:{inner%d}", prefix, alg, i), Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(10)}
			requireSlots(t, outer.Key, inner.Key)
			allowed, remaining := hammerLayered(t, b, outer, inner)
			if allowed != 10 || remaining != 1000-11 {
				t.Errorf("%v outer: allowed %d (want 10); remaining %d (want %d)", alg, allowed, remaining, 1000-11)
			}
		}
		// Each call sends one script per slot; each denied call one refund
		// (the outer slot committed, the inner one denied); nothing else.
		evalsha, eval := scriptCalls(t, cl)
		if n := int64(len(algorithms.Algorithms)); evalsha+eval != n*320*2+n+n*310 {
			want := n*320*2 + n + n*310
			t.Errorf("%d EVALSHA + %d EVAL, want %d: 2 per call, 1 per single call, 1 refund per denial", evalsha, eval, want)
		}
	})

	// Batches on the cluster: with one round trip in flight per backend,
	// most calls queue and the queue is decided by one batch script per
	// hash slot. 64 goroutines on two clients hammer one key: exactly the
	// limit is allowed, for every algorithm. Then layered calls whose two
	// rules live in two slots (parts with commit markers, refunds of the
	// parts that committed when the other slot denied): the inner rule
	// allows exactly 10, and the outer one is charged for exactly those.
	t.Run("BatchExactness", func(t *testing.T) {
		var cfg redisstore.Config
		cfg.Pipelines = 1
		cfg.Now = midHour()
		var backends []algorithms.Backend
		for range 2 {
			b, err := redisstore.New(cl.Client(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			backends = append(backends, b)
		}
		loadScript(t, cl)
		resetStats(t, cl)
		for alg, limit := range exactLimits() {
			allowed, _ := hammerTwo(t, backends, algorithms.Check{Key: prefix + "batch:" + alg.String() + ":{hot}", Algorithm: alg, Limit: limit})
			if allowed != 100 {
				t.Errorf("%v: allowed %d of 320, want exactly 100", alg, allowed)
			}
		}
		evalsha, eval := scriptCalls(t, cl)
		t.Logf("5×320 one-check calls: %d EVALSHA, %d EVAL", evalsha, eval)
		if evalsha+eval >= 5*320 {
			t.Errorf("%d scripts for %d calls: not batched", evalsha+eval, 5*320)
		}
		for i, alg := range algorithms.Algorithms {
			outer := algorithms.Check{Key: fmt.Sprintf("%sbatch-layered:%s:{outer%d}", prefix, alg, i), Algorithm: alg, Limit: algorithms.PerHour(1000)}
			inner := algorithms.Check{Key: fmt.Sprintf("%sbatch-layered:%s:{inner%d}", prefix, alg, i), Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(10)}
			requireSlots(t, outer.Key, inner.Key)
			allowed, remaining := hammerLayered(t, backends[i%2], outer, inner)
			if allowed != 10 || remaining != 1000-11 {
				t.Errorf("%v outer: allowed %d (want 10); remaining %d (want %d)", alg, allowed, remaining, 1000-11)
			}
		}
	})

	// Pipelining on the cluster: 64 goroutines making calls whose three
	// rules live in three slots share round trips (go-redis splits each
	// pipeline by node), the tight rule allows exactly its limit, and the
	// denied calls' refunds leave the other rules charged exactly for the
	// allowed calls.
	t.Run("Pipelining", func(t *testing.T) {
		for _, pipelines := range []int{0, -1} {
			c := cl.Client(t)
			h := &tripCounter{}
			c.AddHook(h)
			b, _ := redisstore.New(c, redisstore.Config{Pipelines: pipelines, Now: midHour()})
			tag := fmt.Sprint("pipe", pipelines)
			checks := []algorithms.Check{
				{Key: prefix + tag + ":{203.0.113.7}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(500)},
				{Key: prefix + tag + ":{alice}", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(100_000)},
				{Key: prefix + tag + ":{POST /pay}", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerHour(100_000)},
			}
			requireSlots(t, checks[0].Key, checks[1].Key, checks[2].Key)
			loadScript(t, cl)
			h.trips.Store(0)
			h.cmds.Store(0)
			const calls = 1000
			start := time.Now()
			allowed := hammer(t, b, 64, calls, checks...)
			elapsed := time.Since(start)
			trips, cmds := h.trips.Load(), h.cmds.Load()
			t.Logf("Pipelines %d: %d calls over 3 slots in %v (%.0f calls/s), %d allowed: %d scripts in %d round trips", pipelines, calls, elapsed.Round(time.Millisecond), calls/elapsed.Seconds(), allowed, cmds, trips)
			if allowed != 500 {
				t.Fatalf("Pipelines %d: allowed %d, want exactly 500", pipelines, allowed)
			}
			res := make([]algorithms.Result, 1)
			for _, ch := range checks[1:] {
				ch.Cost = 100_001 // peek: never fits, consumes nothing
				if err := b.Allow(ctx, []algorithms.Check{ch}, res); err != nil {
					t.Fatal(err)
				}
				if res[0].Remaining != 100_000-500 {
					t.Errorf("Pipelines %d: %s has %d remaining, want %d: refunds left units charged", pipelines, ch.Key, res[0].Remaining, 100_000-500)
				}
			}
			switch {
			case pipelines == 0 && trips >= cmds/2:
				t.Errorf("pipelined: %d round trips for %d scripts", trips, cmds)
			case pipelines < 0 && trips != cmds:
				t.Errorf("unpipelined: %d round trips for %d scripts, want one each", trips, cmds)
			}
		}
	})

	// SCRIPT FLUSH on every master between calls: go-redis answers NOSCRIPT
	// with EVAL, which loads the script again on that node.
	t.Run("ScriptFlush", func(t *testing.T) {
		b, _ := redisstore.New(client, redisstore.Config{})
		checks := []algorithms.Check{
			{Key: ip + ":f", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10)},
			{Key: user + ":f", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
			{Key: route + ":f", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerHour(10)},
		}
		res := make([]algorithms.Result, 3)
		resetStats(t, cl)
		for i := range 4 {
			if err := cl.ForEachMaster(ctx, func(c *redis.Client) error { return c.ScriptFlush(ctx).Err() }); err != nil {
				t.Fatal(err)
			}
			if err := b.Allow(ctx, checks, res); err != nil {
				t.Fatalf("after SCRIPT FLUSH %d: %v", i, err)
			}
			for j := range res {
				if !res[j].Allowed || res[j].Remaining != int64(9-i) {
					t.Fatalf("after SCRIPT FLUSH %d: check %d: %+v", i, j, res[j])
				}
			}
		}
		// Each flush costs each master one EVAL at least; two slots on one
		// master may both find the script missing, or one may find it
		// loaded again by the other.
		if _, eval := scriptCalls(t, cl); eval < 4 || eval > 4*3 {
			t.Fatalf("%d EVAL after 4 flushes and 4 calls on 3 slots, want 4 to 12 (reloads)", eval)
		}
	})

	// TestScriptsSentOnce on the cluster: a cluster client with go-redis's
	// default options (MaxRedirects 3, which retries a command after a
	// network error as MaxRetries does) whose connections to every node
	// lose one script reply in five after the node ran the script. The
	// calls fall in two slots; alone (each its own round trip), and from
	// several callers that queue and go in pipelines, as batch scripts.
	t.Run("ScriptsSentOnce", func(t *testing.T) {
		one := redis.NewScript(luaScript("one_" + algorithms.FixedWindow.String())).Hash()
		multi := redis.NewScript(luaScript("multi")).Hash()
		batch := redis.NewScript(luaScript("batch_" + algorithms.FixedWindow.String())).Hash()
		for _, tc := range []struct {
			name      string
			pipelines int
			callers   int
			lost      []string // scripts some of whose replies must be lost
		}{
			{"lone calls", 0, 1, []string{one, multi}},
			{"pipelines", 1, 8, []string{batch}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := &lossyDialer{t: t, every: 5, proxies: map[string]*lossyProxy{}}
				c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Dialer: d.dial})
				t.Cleanup(func() { c.Close() })
				b, err := redisstore.New(c, redisstore.Config{Pipelines: tc.pipelines})
				if err != nil {
					t.Fatal(err)
				}
				reader, _ := redisstore.New(client, redisstore.Config{})
				p := redistest.Prefix(t)
				sentOnce(t, b, reader, tc.callers, 60, func(i int) string { return fmt.Sprintf("%s{s%d}:c%d", p, i%2, i) })
				for _, sha := range tc.lost {
					if sent, lost := counts(sha, d.all()...); lost == 0 {
						t.Errorf("script %s: none of %d replies lost, the test does not cover it", sha, sent)
					}
				}
			})
		}
	})

	// A refund applies at most once, whatever happens to its reply: sent
	// and applied while the caller's context ends (the call then used to
	// send it again, detached), or delivered twice (go-redis retrying
	// after a lost reply). A shared route key of limit 101, alternately
	// charged by a new client and by a client denied by its own rule,
	// allows exactly 101 calls in all.
	t.Run("RefundsAtMostOnce", func(t *testing.T) {
		loadScript(t, cl)
		for _, fault := range []refundFault{refundCtxEnds, refundTwice} {
			for i, alg := range algorithms.Algorithms {
				t.Run(fmt.Sprint(fault, "/", alg), func(t *testing.T) {
					wrapped := &faultyRefunds{ClusterClient: client, fault: fault, seen: map[string]bool{}}
					b, _ := redisstore.New(wrapped, redisstore.Config{Now: midHour()})
					tag := fmt.Sprintf("%sonce:%v:%d:", prefix, fault, i)
					exhausted := algorithms.Check{Key: tag + "ip:{exhausted}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
					route := algorithms.Check{Key: tag + "route:{POST /pay}", Algorithm: alg, Limit: algorithms.PerHour(101)}
					requireSlots(t, exhausted.Key, route.Key)
					if err := b.Allow(ctx, []algorithms.Check{exhausted}, make([]algorithms.Result, 1)); err != nil {
						t.Fatal(err)
					}
					res := make([]algorithms.Result, 2)
					var allowed int
					for n := 0; n < 2*101; n++ {
						fresh := algorithms.Check{Key: fmt.Sprintf("%sip:{fresh%d}", tag, n), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
						if err := b.Allow(ctx, []algorithms.Check{fresh, route}, res); err != nil {
							t.Fatal(err)
						}
						if allAllowed(res) {
							allowed++
						}
						cctx, cancel := context.WithCancel(ctx)
						err := b.Allow(context.WithValue(cctx, cancelKey{}, cancel), []algorithms.Check{exhausted, route}, res)
						cancel()
						if err == nil && allAllowed(res) {
							t.Fatalf("Allow(%s, %s) allowed a client over its limit", exhausted.Key, route.Key)
						}
					}
					wrapped.wait() // every refund, detached ones included, has landed
					t.Logf("%d refunds faulted; route allowed %d of 101", wrapped.faults.Load(), allowed)
					if wrapped.faults.Load() == 0 {
						t.Fatal("no refund was faulted: the test tests nothing")
					}
					if allowed != 101 {
						t.Errorf("route %v PerHour(101): %d calls allowed, want 101", alg, allowed)
					}
				})
			}
		}
	})

	// Tight deadlines and a slowed node: the node of the route key sleeps
	// 2 ms at a time (DEBUG SLEEP), and the calls of a client over its own
	// limit give up after 4 ms, so the refunds of their route commits often
	// outlive their callers' contexts. However they end, the route key
	// never allows more than its limit.
	t.Run("RefundsUnderDeadlines", func(t *testing.T) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		loadScript(t, cl)
		for i, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow, algorithms.TokenBucket, algorithms.GCRA} {
			t.Run(alg.String(), func(t *testing.T) {
				b, _ := redisstore.New(c, redisstore.Config{Now: midHour()})
				tag := fmt.Sprintf("%sdeadline:%d:", prefix, i)
				exhausted := algorithms.Check{Key: tag + "ip:{exhausted}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
				route := algorithms.Check{Key: tag + "route:{POST /pay}", Algorithm: alg, Limit: algorithms.PerHour(101)}
				requireSlots(t, exhausted.Key, route.Key)
				if err := b.Allow(ctx, []algorithms.Check{exhausted}, make([]algorithms.Result, 1)); err != nil {
					t.Fatal(err)
				}
				mc, err := c.MasterForKey(ctx, route.Key)
				if err != nil {
					t.Fatal(err)
				}
				stop := make(chan struct{})
				var sleeper sync.WaitGroup
				sleeper.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						mc.Do(ctx, "DEBUG", "SLEEP", "0.002")
					}
				})
				var allowed, next atomic.Int64
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						res := make([]algorithms.Result, 2)
						for range 150 {
							ip, timeout := exhausted, 4*time.Millisecond
							if w%2 == 0 {
								ip, timeout = algorithms.Check{Key: fmt.Sprintf("%sip:{fresh%d}", tag, next.Add(1)), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}, time.Minute
							}
							cctx, cancel := context.WithTimeout(ctx, timeout)
							if b.Allow(cctx, []algorithms.Check{ip, route}, res) == nil && allAllowed(res) {
								allowed.Add(1)
							}
							cancel()
						}
					})
				}
				wg.Wait()
				close(stop)
				sleeper.Wait()
				time.Sleep(3 * time.Second) // detached refunds end within 2 s
				during := allowed.Load()
				res := make([]algorithms.Result, 2)
				for n := 0; ; n++ {
					fresh := algorithms.Check{Key: fmt.Sprintf("%sip:{drain%d}", tag, n), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
					if err := b.Allow(ctx, []algorithms.Check{fresh, route}, res); err != nil {
						t.Fatal(err)
					}
					if !allAllowed(res) {
						break
					}
					allowed.Add(1)
				}
				t.Logf("route %v PerHour(101): %d allowed under deadlines, %d in all", alg, during, allowed.Load())
				if allowed.Load() > 101 {
					t.Errorf("route %v PerHour(101): %d calls allowed, limit 101", alg, allowed.Load())
				}
			})
		}
	})

	// The deny cache on a cluster: instance B's call from a client over
	// its own limit commits the last unit of a shared route key, whose
	// refund is held; meanwhile instance A (with a DenyCache) sees the
	// route key denied. Once the refund has landed, the route key holds a
	// unit again, and A must answer a new client as an instance without
	// the cache does. A denial that no refund can undo is still cached.
	t.Run("DenyCacheAndRefunds", func(t *testing.T) {
		loadScript(t, cl)
		for i, alg := range algorithms.Algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				now := midHour()
				held := &heldRefunds{ClusterClient: client, arrived: make(chan struct{}, 1), release: make(chan struct{})}
				instB, _ := redisstore.New(held, redisstore.Config{Now: now})
				plain, _ := redisstore.New(client, redisstore.Config{Now: now})
				instA, _ := denycache.New(plain, denycache.Config{})
				tag := fmt.Sprintf("%sdenycache:%d:", prefix, i)
				ipLimit := algorithms.PerHour(1)
				ipCheck := func(name string) algorithms.Check {
					return algorithms.Check{Key: tag + "ip:{" + name + "}", Algorithm: algorithms.FixedWindow, Limit: ipLimit}
				}
				route := algorithms.Check{Key: tag + "route:{GET /}", Algorithm: alg, Limit: algorithms.PerHour(10)}
				requireSlots(t, ipCheck("exhausted").Key, route.Key)
				one := make([]algorithms.Result, 1)
				// The route key holds 1 of 10; the client "exhausted" is over its limit.
				for range 9 {
					if err := plain.Allow(ctx, []algorithms.Check{route}, one); err != nil || !one[0].Allowed {
						t.Fatal(one, err)
					}
				}
				if err := plain.Allow(ctx, []algorithms.Check{ipCheck("exhausted")}, one); err != nil {
					t.Fatal(err)
				}
				res := make([]algorithms.Result, 2)
				done := make(chan error, 1)
				go func() {
					done <- instB.Allow(ctx, []algorithms.Check{ipCheck("exhausted"), route}, make([]algorithms.Result, 2))
				}()
				<-held.arrived // B committed the route's last unit, its refund waits
				if err := instA.Allow(ctx, []algorithms.Check{ipCheck("new1"), route}, res); err != nil {
					t.Fatal(err)
				}
				if res[1].Allowed {
					t.Fatalf("route allowed while its last unit was committed: %+v", res)
				}
				close(held.release)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if err := plain.Allow(ctx, []algorithms.Check{{Key: route.Key, Algorithm: alg, Limit: route.Limit, Cost: 11}}, one); err != nil {
					t.Fatal(err)
				}
				if one[0].Remaining != 1 {
					t.Fatalf("route holds %d after the refund, want 1", one[0].Remaining)
				}
				local := instA.LocalDenials()
				if err := instA.Allow(ctx, []algorithms.Check{ipCheck("new2"), route}, res); err != nil {
					t.Fatal(err)
				}
				if !allAllowed(res) {
					t.Errorf("instance with a DenyCache: Allow(new client, %s holding 1 of 10) = %+v (%d local denials), want allowed as without the cache",
						route.Key, res, instA.LocalDenials()-local)
				}
				// A denial with no commit pending: cached.
				local = instA.LocalDenials()
				for range 2 {
					if err := instA.Allow(ctx, []algorithms.Check{ipCheck("exhausted")}, one); err != nil || one[0].Allowed {
						t.Fatal(one, err)
					}
				}
				if n := instA.LocalDenials() - local; n != 1 {
					t.Errorf("a denial that no refund can undo: %d local denials of 2 calls, want 1", n)
				}
			})
		}
	})

	// Layered checks in two slots, a route rule with room and an IP rule
	// already exhausted, so that every call is denied and must charge
	// nothing, under 64 goroutines whose deadlines (0.5 to 6ms) end many
	// calls before their replies: a part that timed out may have committed
	// the route's unit, and is cancelled (lua/cancel.lua). Before, the
	// route rule lost tens of thousands of units that no request used.
	t.Run("DeadlinesChargeNothing", func(t *testing.T) {
		p := prefix + "deadline:"
		route, ip := p+"route:{r}", p+"ip:{i}"
		requireSlots(t, route, ip)
		var refundErrors, cancels, gaveBack atomic.Int64
		b, _ := redisstore.New(client, redisstore.Config{Now: midHour(), OnRefundError: func(error) { refundErrors.Add(1) }})
		redisstore.OnCancel(b, func(g bool) {
			cancels.Add(1)
			if g {
				gaveBack.Add(1)
			}
		})
		one := make([]algorithms.Result, 1)
		ipCheck := algorithms.Check{Key: ip, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
		if err := b.Allow(ctx, []algorithms.Check{ipCheck}, one); err != nil || !one[0].Allowed {
			t.Fatal(one, err)
		}
		before := charged(t, b, route)
		checks := []algorithms.Check{{Key: route, Algorithm: algorithms.FixedWindow, Limit: counterLimit}, ipCheck}
		var calls, timeouts, allowed atomic.Int64
		stop := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				res := make([]algorithms.Result, 2)
				for i := 0; time.Now().Before(stop); i++ {
					d := 500*time.Microsecond + time.Duration((g*7919+i*104729)%5500)*time.Microsecond
					cctx, cancel := context.WithTimeout(ctx, d)
					err := b.Allow(cctx, checks, res)
					cancel()
					calls.Add(1)
					switch {
					case err != nil:
						timeouts.Add(1)
					case res[0].Allowed && res[1].Allowed:
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 0 {
			t.Fatalf("%d calls allowed past an exhausted rule", allowed.Load())
		}
		if timeouts.Load() == 0 {
			t.Fatalf("no call of %d ended by its deadline: the test no longer exercises deadlines", calls.Load())
		}
		// The cancels run in the background, each within 2s.
		time.Sleep(2500 * time.Millisecond)
		after := charged(t, b, route)
		t.Logf("%d calls, %d ended by their deadline; %d cancels delivered (%d gave units back), %d refund errors; route charged %d before, %d after",
			calls.Load(), timeouts.Load(), cancels.Load(), gaveBack.Load(), refundErrors.Load(), before, after)
		if lost := after - before - 1; lost > refundErrors.Load() {
			t.Errorf("the route rule lost %d units that no request used (%d undelivered cancels or refunds reported)", lost, refundErrors.Load())
		}
	})

	t.Run("FixedWindowSettles", func(t *testing.T) {
		loadScript(t, cl)
		testFixedWindowSettles(t, client)
	})

	t.Run("ManualFailover", func(t *testing.T) {
		failoverUnderTraffic(t, cl, client, prefix+"manual", func(master, replica *redistest.Server) {
			rc := replica.NodeClient()
			defer rc.Close()
			if err := rc.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("MasterKilled", func(t *testing.T) {
		failoverUnderTraffic(t, cl, client, prefix+"killed", func(master, replica *redistest.Server) {
			master.Stop()
		})
	})
}

// clusterBackend returns a Redis backend on a cluster client with a
// settable clock.
func clusterBackend(t *testing.T, client redis.Scripter) (algorithms.Backend, *backendtest.Clock) {
	t.Helper()
	c := &backendtest.Clock{}
	b, err := redisstore.New(client, redisstore.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// dumps returns DUMP of every key (the value, not the TTL).
func dumps(t *testing.T, client *redis.ClusterClient, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := client.Dump(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[i] = v
	}
	return out
}

// traffic is a steady load of calls from several goroutines, recording
// what the callers saw.
type traffic struct {
	allowed, denied, failed atomic.Int64

	mu                sync.Mutex
	firstErr, lastErr time.Time
	sample            error

	stop chan struct{}
	wg   sync.WaitGroup
}

func startTraffic(b algorithms.Backend, checks []algorithms.Check, workers int) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for range workers {
		tr.wg.Go(func() {
			res := make([]algorithms.Result, len(checks))
			for {
				select {
				case <-tr.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := b.Allow(ctx, checks, res)
				cancel()
				switch {
				case err != nil:
					tr.failed.Add(1)
					tr.mu.Lock()
					if tr.firstErr.IsZero() {
						tr.firstErr, tr.sample = time.Now(), err
					}
					tr.lastErr = time.Now()
					tr.mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				case allAllowed(res):
					tr.allowed.Add(1)
				default:
					tr.denied.Add(1)
				}
			}
		})
	}
	return tr
}

func (tr *traffic) Stop() {
	close(tr.stop)
	tr.wg.Wait()
}

// outage returns how long after since the calls kept failing (zero if
// none failed after since), and an example error.
func (tr *traffic) outage(since time.Time) (time.Duration, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return max(tr.lastErr.Sub(since), 0), tr.sample
}

func allAllowed(res []algorithms.Result) bool {
	for _, r := range res {
		if !r.Allowed {
			return false
		}
	}
	return true
}

// counterLimit is never reached: a key under it counts the units charged.
var counterLimit = algorithms.Limit{Rate: 1 << 40, Period: time.Hour}

// charged returns how many units key has been charged under counterLimit,
// charging one more to find out.
func charged(t *testing.T, b algorithms.Backend, key string) int64 {
	t.Helper()
	res := make([]algorithms.Result, 1)
	var err error
	for range 50 { // the first calls after a failover may still fail
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: counterLimit}}, res)
		cancel()
		if err == nil {
			return counterLimit.Rate - res[0].Remaining - 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("reading %s: %v", key, err)
	return 0
}

// failoverUnderTraffic runs 8 goroutines of layered calls on two masters
// (a counter on the master that fail fails, a bystander on another),
// fails that master over, waits until the cluster is healthy again and
// reports: the error blip, and how the counters compare with the allowed
// calls (units forgotten by the failover; units charged to the bystander
// by calls that failed).
func failoverUnderTraffic(t *testing.T, cl *redistest.Cluster, client *redis.ClusterClient, prefix string, fail func(master, replica *redistest.Server)) {
	ctx := context.Background()
	// A refund detached from its call may fail up to 2 s after it, after
	// this test has returned: the callback logs nothing, the summary does.
	var refundErrors atomic.Int64
	var firstRefundError atomic.Value
	b, _ := redisstore.New(client, redisstore.Config{Now: midHour(), OnRefundError: func(err error) {
		if refundErrors.Add(1) == 1 {
			firstRefundError.Store(err.Error())
		}
	}})
	victim := prefix + ":{victim}"
	mc, err := client.MasterForKey(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	var bystander string
	for i := 0; bystander == ""; i++ {
		k := fmt.Sprintf("%s:{bystander%d}", prefix, i)
		if oc, err := client.MasterForKey(ctx, k); err == nil && oc.Options().Addr != mc.Options().Addr {
			bystander = k
		}
	}
	var master *redistest.Server
	for _, s := range cl.Nodes {
		if s.Addr == mc.Options().Addr {
			master = s
		}
	}
	replica, err := cl.ReplicaOf(ctx, master)
	if err != nil {
		t.Fatal(err)
	}

	checks := []algorithms.Check{
		{Key: victim, Algorithm: algorithms.FixedWindow, Limit: counterLimit},
		{Key: bystander, Algorithm: algorithms.FixedWindow, Limit: counterLimit},
	}
	tr := startTraffic(b, checks, 8)
	time.Sleep(200 * time.Millisecond)
	failedAt := time.Now()
	fail(master, replica)
	for {
		if role, _ := replica.Role(ctx); role == "master" {
			break
		}
		if time.Since(failedAt) > 15*time.Second {
			tr.Stop()
			t.Fatalf("replica %s not promoted after 15 s", replica.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	promoted := time.Since(failedAt)
	if err := cl.WaitHealthy(15 * time.Second); err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	healthy := time.Since(failedAt)
	time.Sleep(300 * time.Millisecond)
	tr.Stop()
	time.Sleep(50 * time.Millisecond) // let the refunds of the last failed calls land

	blip, sample := tr.outage(failedAt)
	allowed := tr.allowed.Load()
	forgotten := allowed - charged(t, b, victim)
	overcharged := charged(t, b, bystander) - allowed
	t.Logf("promoted after %v, cluster healthy after %v; calls: %d allowed, %d failed, the last %v after the fault (%v); "+
		"units forgotten by the failed-over master: %d; units charged to the bystander by failed calls: %d (%d refunds failed)",
		promoted.Round(time.Millisecond), healthy.Round(time.Millisecond), allowed, tr.failed.Load(), blip.Round(time.Millisecond), sample, forgotten, overcharged, refundErrors.Load())
	if first := firstRefundError.Load(); first != nil {
		t.Logf("first refund failure: %s", first)
	}
	if blip > 10*time.Second {
		t.Errorf("calls failed for %v", blip)
	}
	if forgotten > 50 {
		t.Errorf("the failover forgot %d units, tolerance 50", forgotten)
	}
	if overcharged < 0 {
		t.Errorf("the bystander was charged %d units less than allowed", -overcharged)
	}
}

// TestRing: on a *redis.Ring the checks of a call are grouped by shard, so
// every key is stored on the shard that owns it (a single script would
// have put them all on the first key's shard), with the same compensation
// when one shard denies.
func TestRing(t *testing.T) {
	redistest.Require(t)
	t.Parallel()
	addrs := map[string]string{}
	for _, name := range []string{"s1", "s2"} {
		s, err := redistest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		addrs[name] = s.Addr
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { ring.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	first, err := ring.GetShardClientForKey(prefix + "ip:{0}")
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for i := 1; other == ""; i++ {
		k := fmt.Sprintf("%suser:{%d}", prefix, i)
		if c, err := ring.GetShardClientForKey(k); err == nil && c != first {
			other = k
		}
	}
	b, _ := redisstore.New(ring, redisstore.Config{Now: midHour()})
	checks := []algorithms.Check{
		{Key: prefix + "ip:{0}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(100)},
		{Key: other, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)},
	}
	res := make([]algorithms.Result, 2)
	for i, want := range []bool{true, false} {
		if err := b.Allow(ctx, checks, res); err != nil {
			t.Fatal(err)
		}
		if res[1].Allowed != want || !res[0].Allowed || res[0].Remaining != 99 {
			t.Fatalf("call %d: %+v, want the second check allowed=%v and the first at 99 remaining", i, res, want)
		}
	}
	for _, c := range checks {
		owner, _ := ring.GetShardClientForKey(c.Key)
		if n, err := owner.Exists(ctx, c.Key).Result(); err != nil || n != 1 {
			t.Errorf("%s is not on its shard %s: EXISTS = %d, %v", c.Key, owner.Options().Addr, n, err)
		}
	}

	// Batches per shard: with one round trip in flight per shard, 64
	// goroutines on two backends hammer one key, and layered calls span
	// both shards: exactly the limit is allowed, for every algorithm, and
	// the denied layered calls' refunds leave the outer rule charged for
	// exactly the allowed ones.
	var backends []algorithms.Backend
	for range 2 {
		b, err := redisstore.New(ring, redisstore.Config{Pipelines: 1, Now: midHour()})
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, b)
	}
	for i, alg := range algorithms.Algorithms {
		allowed, _ := hammerTwo(t, backends, algorithms.Check{Key: prefix + "batch:" + alg.String() + ":{hot}", Algorithm: alg, Limit: algorithms.PerHour(100)})
		if allowed != 100 {
			t.Errorf("ring, %v: allowed %d of 320, want exactly 100", alg, allowed)
		}
		outer := algorithms.Check{Key: fmt.Sprintf("%sbatch-layered:%s:{0}", prefix, alg), Algorithm: alg, Limit: algorithms.PerHour(1000)}
		inner := algorithms.Check{Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(10)}
		oc, _ := ring.GetShardClientForKey(outer.Key)
		for j := 1; inner.Key == ""; j++ {
			k := fmt.Sprintf("%sbatch-layered:%s:{%d}", prefix, alg, j)
			if c, err := ring.GetShardClientForKey(k); err == nil && c != oc {
				inner.Key = k
			}
		}
		allowed2, remaining := hammerLayered(t, backends[i%2], outer, inner)
		if allowed2 != 10 || remaining != 1000-11 {
			t.Errorf("ring, %v outer: allowed %d (want 10); remaining %d (want %d)", alg, allowed2, remaining, 1000-11)
		}
	}
}

// refundFault is what faultyRefunds does to the first sending of a refund.
type refundFault int

const (
	// refundCtxEnds applies the refund, loses its reply and ends the
	// caller's context (its cancel func travels as the value cancelKey{}),
	// as when a deadline passes while the refund is in flight.
	refundCtxEnds refundFault = iota
	// refundTwice delivers the refund twice, as go-redis does when it
	// retries a command whose reply it lost.
	refundTwice
)

func (f refundFault) String() string { return [...]string{"ctx_ends", "twice"}[f] }

type cancelKey struct{}

// refundSHA is the SHA1 of the script that runs refunds.
var refundSHA = redis.NewScript(luaScript("multi")).Hash()

// faultyRefunds is a cluster client whose refunds (the dispatch script in
// refund mode) meet fault the first time each is sent.
type faultyRefunds struct {
	*redis.ClusterClient
	fault  refundFault
	faults atomic.Int64 // refunds faulted
	resent atomic.Int64 // faulted refunds sent again by the backend

	mu   sync.Mutex
	seen map[string]bool
}

func (f *faultyRefunds) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha != refundSHA || len(args) < 2 || fmt.Sprint(args[1]) != "1" {
		return f.ClusterClient.EvalSha(ctx, sha, keys, args...)
	}
	id := fmt.Sprint(keys, args)
	f.mu.Lock()
	again := f.seen[id]
	f.seen[id] = true
	f.mu.Unlock()
	if again {
		f.resent.Add(1)
		return f.ClusterClient.EvalSha(ctx, sha, keys, args...)
	}
	f.faults.Add(1)
	f.ClusterClient.EvalSha(context.WithoutCancel(ctx), sha, keys, args...)
	switch f.fault {
	case refundCtxEnds:
		if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
			cancel()
		}
		lost := redis.NewCmd(ctx)
		lost.SetErr(context.Canceled)
		return lost
	default:
		return f.ClusterClient.EvalSha(context.WithoutCancel(ctx), sha, keys, args...)
	}
}

// wait waits (up to 5 s) until every refund that the backend sends again
// after a lost reply has been sent.
func (f *faultyRefunds) wait() {
	if f.fault != refundCtxEnds {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); f.resent.Load() < f.faults.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// heldRefunds is a cluster client whose refunds wait, once arrived says so,
// until release is closed.
type heldRefunds struct {
	*redis.ClusterClient
	arrived chan struct{}
	release chan struct{}
}

func (h *heldRefunds) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == refundSHA && len(args) >= 2 && fmt.Sprint(args[1]) == "1" {
		select {
		case h.arrived <- struct{}{}:
		default:
		}
		<-h.release
	}
	return h.ClusterClient.EvalSha(ctx, sha, keys, args...)
}

// final returns r as a single node would: a denial that a refund may undo
// (Provisional, on a cluster only) is a denial all the same.
func final(r algorithms.Result) algorithms.Result {
	r.Provisional = false
	return r
}

// finalResults is a Backend whose Results are final's, but for those of
// refundable checks, which report Provisional as on one server. It
// refunds like the Backend it wraps.
type finalResults struct{ algorithms.Backend }

func (f finalResults) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	err := f.Backend.Allow(ctx, checks, results)
	for i := range results {
		if i >= len(checks) || checks[i].RefundWindow == 0 {
			results[i] = final(results[i])
		}
	}
	return err
}

func (f finalResults) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	return f.Backend.(algorithms.Refunder).Refund(ctx, refunds)
}

// miniBackend returns a Store on mr, on a clock of its own.
func miniBackend(t *testing.T, mr *miniredis.Miniredis) (algorithms.Backend, *backendtest.Clock) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	c := &backendtest.Clock{}
	b, err := redisstore.New(client, redisstore.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// holdUntilDone is a go-redis hook that, once armed, holds the reply of
// the first command naming key until that command's context is done: the
// script ran, but its caller's deadline passes before its answer is in.
type holdUntilDone struct {
	key   string
	armed atomic.Bool
}

func (*holdUntilDone) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdUntilDone) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if slices.Contains(cmd.Args(), any(h.key)) && h.armed.CompareAndSwap(true, false) {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
		return err
	}
}

func (*holdUntilDone) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestShardedCallAfterDeadline: a call spanning two shards of a Ring, on
// a client that does not honour deadlines (ContextTimeoutEnabled unset,
// as by default): both shards allow, but one's reply comes in after the
// caller's context ended. The caller (the engine stops waiting at its
// deadline) never learns of the call, so the store gives both shards'
// units back and returns the context's error. Before, it returned the
// call allowed to nobody, and the units stayed charged for the rest of
// the window (the chaos harness, cluster seed 1204: 2 units of a fixed
// window key never given back after a call that timed out).
func TestShardedCallAfterDeadline(t *testing.T) {
	redistest.Require(t)
	t.Parallel()
	addrs := map[string]string{}
	for _, name := range []string{"s1", "s2"} {
		s, err := redistest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		addrs[name] = s.Addr
	}
	prefix := redistest.Prefix(t)
	hold := &holdUntilDone{}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs, NewClient: func(opt *redis.Options) *redis.Client {
		c := redis.NewClient(opt)
		c.AddHook(hold)
		return c
	}})
	t.Cleanup(func() { ring.Close() })
	// two keys of each shard: one to load the scripts, one for the call
	keyOn := func(c *redis.Client, from int) (string, int) {
		for i := from; ; i++ {
			k := fmt.Sprintf("%sfw:{%d}", prefix, i)
			if o, err := ring.GetShardClientForKey(k); err == nil && o == c {
				return k, i + 1
			}
		}
	}
	first, err := ring.GetShardClientForKey(prefix + "fw:{0}")
	if err != nil {
		t.Fatal(err)
	}
	var second *redis.Client
	for i := 1; second == nil; i++ {
		if c, err := ring.GetShardClientForKey(fmt.Sprintf("%sfw:{%d}", prefix, i)); err == nil && c != first {
			second = c
		}
	}
	a0, n := keyOn(first, 0)
	a1, _ := keyOn(first, n)
	b0, n := keyOn(second, 0)
	b1, _ := keyOn(second, n)
	b, err := redisstore.New(ring, redisstore.Config{Now: midHour()})
	if err != nil {
		t.Fatal(err)
	}
	call := func(ctx context.Context, ka, kb string) ([]algorithms.Result, error) {
		checks := []algorithms.Check{
			{Key: ka, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10), Cost: 2},
			{Key: kb, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10), Cost: 3},
		}
		res := make([]algorithms.Result, len(checks))
		return res, b.Allow(ctx, checks, res)
	}
	// the scripts are loaded on both shards: the held command is the one
	// that decides (a NOSCRIPT reply held instead would fail the call
	// before the script ran, a case the cancel covers)
	if res, err := call(context.Background(), a0, b0); err != nil || !res[0].Allowed || !res[1].Allowed {
		t.Fatalf("first call: %+v, %v; want both allowed", res, err)
	}
	hold.key = b1
	hold.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := call(ctx, a1, b1)
	if hold.armed.Load() {
		t.Fatalf("the call's command on %s was not held", b1)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose context ended before its last shard answered returned %+v, %v; want the context's error", res, err)
	}
	// The give-backs run in the background: they are over within the
	// store's refund timeout (2 s); 10 s leaves room for a loaded machine.
	for _, k := range []struct {
		c   *redis.Client
		key string
	}{{first, a1}, {second, b1}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := k.c.Exists(context.Background(), k.key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				v, _ := k.c.HGetAll(context.Background(), k.key).Result()
				t.Fatalf("%s still holds %v 10 s after a call its caller never heard of: its units were not given back", k.key, v)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
