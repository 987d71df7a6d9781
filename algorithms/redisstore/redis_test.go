package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// exactLimits is a limit of 100 under each algorithm.
func exactLimits() map[algorithms.Algorithm]algorithms.Limit {
	return map[algorithms.Algorithm]algorithms.Limit{
		algorithms.FixedWindow:   algorithms.PerHour(100),
		algorithms.SlidingLog:    algorithms.PerHour(100),
		algorithms.SlidingWindow: algorithms.PerHour(100),
		algorithms.TokenBucket:   algorithms.PerHour(100),
		algorithms.GCRA:          algorithms.PerHour(100),
	}
}

// TestConcurrentExactness: 64 goroutines on two separate go-redis clients
// (two connection pools, one of them autopipelined) hammer one key with a
// limit of 100: exactly 100 requests are allowed, for every algorithm. The clock is the server's,
// except for the window algorithms, which get a fixed clock in the middle of
// a window so the test cannot straddle a boundary.
func TestConcurrentExactness(t *testing.T) {
	srv := redistest.Require(t)
	clients := []*redis.Client{srv.Client(t), srv.Client(t)}
	prefix := redistest.Prefix(t)
	for alg, limit := range exactLimits() {
		t.Run(alg.String(), func(t *testing.T) {
			var cfg redisstore.Config
			if alg == algorithms.FixedWindow || alg == algorithms.SlidingWindow {
				mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
				cfg.Now = func() time.Time { return mid }
			}
			// One plain client, one through go-redis's autopipeliner (which
			// batches concurrent scripts into one write).
			ap, err := clients[1].AutoPipeline()
			if err != nil {
				t.Fatal(err)
			}
			defer ap.Close()
			backends := make([]algorithms.Backend, 2)
			for i, c := range []redis.Scripter{clients[0], ap} {
				b, err := redisstore.New(c, cfg)
				if err != nil {
					t.Fatal(err)
				}
				backends[i] = b
			}
			allowed, denied := hammerTwo(t, backends, algorithms.Check{Key: prefix + alg.String() + ":{hot}", Algorithm: alg, Limit: limit})
			if allowed != 100 || denied != 220 {
				t.Fatalf("%v: allowed %d, denied %d of 320; want exactly 100 allowed", alg, allowed, denied)
			}
		})
	}
}

// hammerTwo is backendtest.HammerTwo.
func hammerTwo(t *testing.T, backends []algorithms.Backend, check algorithms.Check) (allowed, denied int64) {
	t.Helper()
	return backendtest.HammerTwo(t, backends, check)
}

// TestConcurrentLayeredAllOrNothing: concurrent layered calls where the
// second rule is the tighter one never consume the first rule beyond what
// was allowed.
func TestConcurrentLayeredAllOrNothing(t *testing.T) {
	srv := redistest.Require(t)
	b, _ := redisstore.New(srv.Client(t), redisstore.Config{})
	prefix := redistest.Prefix(t)
	outer := algorithms.Check{Key: prefix + "ip:{1.2.3.4}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1000)}
	inner := algorithms.Check{Key: prefix + "pay:{u1}", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(10)}
	allowed, remaining := hammerLayered(t, b, outer, inner)
	// 10 layered requests went through; the outer rule was charged for
	// those 10 and this one only.
	if allowed != 10 || remaining != 1000-11 {
		t.Fatalf("allowed %d (want 10); outer remaining %d (want %d)", allowed, remaining, 1000-11)
	}
}

// hammerLayered makes 320 layered calls {outer, inner} from 32 goroutines,
// then one call on outer alone. It returns how many layered calls were
// allowed and what outer has left after that last call.
func hammerLayered(t *testing.T, b algorithms.Backend, outer, inner algorithms.Check) (allowed, remaining int64) {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			res := make([]algorithms.Result, 2)
			for range 10 {
				if err := b.Allow(context.Background(), []algorithms.Check{outer, inner}, res); err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed && res[1].Allowed {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res := make([]algorithms.Result, 1)
	if err := b.Allow(context.Background(), []algorithms.Check{outer}, res); err != nil {
		t.Fatal(err)
	}
	return n.Load(), res[0].Remaining
}

// TestScriptFlushIsTransparent: SCRIPT FLUSH between requests (a restart or
// a failover to a node with an empty script cache looks the same) does not
// surface: the backend reloads the script and answers.
func TestScriptFlushIsTransparent(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	defer ap.Close()
	for name, client := range map[string]redis.Scripter{"client": c, "autopipeline": ap} {
		b, _ := redisstore.New(client, redisstore.Config{})
		key := redistest.Prefix(t) + name + ":{k}"
		res := make([]algorithms.Result, 1)
		for i := range 4 {
			if err := c.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if err := b.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10)}}, res); err != nil {
				t.Fatalf("%s: after SCRIPT FLUSH %d: %v", name, i, err)
			}
			if !res[0].Allowed || res[0].Remaining != int64(9-i) {
				t.Fatalf("%s: after SCRIPT FLUSH %d: %+v", name, i, res[0])
			}
		}
	}
}

// TestServerClock: without an injected clock the script uses the Redis
// server's TIME, so instances with skewed clocks agree on windows.
func TestServerClock(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	skewed, _ := redisstore.New(c, redisstore.Config{}) // no Now: server clock
	key := redistest.Prefix(t) + "{k}"
	res := make([]algorithms.Result, 1)
	if err := skewed.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 5, Period: 10 * time.Second}}}, res); err != nil {
		t.Fatal(err)
	}
	serverNow, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// On the server's clock the fixed window is a string counter that
	// expires when its window ends: the server's now plus its TTL falls on
	// a window boundary of the server's clock (within the ms of the TTL and
	// the time between the two commands).
	ttl, err := c.PTTL(context.Background(), key).Result()
	if err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("PTTL %v, %v: want the rest of a 10s window", ttl, err)
	}
	end := serverNow.Add(ttl).UnixMilli()
	if off := (end%10_000 + 10_000) % 10_000; off > 20 && off < 10_000-20 {
		t.Fatalf("the key expires %dms past a window boundary of the server clock: the script did not use it", off)
	}
}

// TestKeysExpireAndMemory runs a mixed workload with the server clock, then
// audits every key: each has a TTL > 0 and no longer than its state needs
// (one Period for the window algorithms, the time to refill the bucket for
// the others, two Periods for the sliding window counter). It logs MEMORY
// USAGE per key for docs/algorithms.md.
func TestKeysExpireAndMemory(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	b, _ := redisstore.New(c, redisstore.Config{})
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	// 100 an hour: the smallest TTL written (a token bucket's one unit)
	// is 36 s, far more than the test takes, also on a slow machine (at
	// 100/min it was 600 ms, and under load keys expired before the count)
	limit := algorithms.PerHour(100)
	maxTTL := map[algorithms.Algorithm]time.Duration{
		algorithms.FixedWindow:   time.Hour,
		algorithms.SlidingLog:    time.Hour,
		algorithms.SlidingWindow: 2 * time.Hour,
		algorithms.TokenBucket:   time.Hour,
		algorithms.GCRA:          time.Hour,
		algorithms.Concurrency:   time.Hour, // the lease
	}
	res := make([]algorithms.Result, 1)
	for _, alg := range algorithms.Algorithms {
		for k := range 50 {
			key := fmt.Sprintf("%s%s:{client-%03d}", prefix, alg, k)
			for range 1 + k%7 {
				if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: alg, Limit: limit, Cost: int64(1 + k%3)}}, res); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var report []string
	for _, alg := range algorithms.Algorithms {
		keys, err := c.Keys(ctx, prefix+alg.String()+":*").Result()
		if err != nil || len(keys) != 50 {
			t.Fatalf("%v: %d keys, %v", alg, len(keys), err)
		}
		var mem int64
		for _, k := range keys {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil || ttl <= 0 || ttl > maxTTL[alg] {
				t.Errorf("%s: PTTL %v (err %v), want within (0, %v]", k, ttl, err, maxTTL[alg])
			}
			n, err := c.MemoryUsage(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			mem += n
		}
		report = append(report, fmt.Sprintf("%s %d B/key", alg, mem/int64(len(keys))))
	}
	t.Logf("MEMORY USAGE (limit 100/h, 1-7 requests of cost 1-3 per key): %s", strings.Join(report, ", "))
}

// TestLuaSources guards the scripts against known pitfalls.
func TestLuaSources(t *testing.T) {
	t.Parallel()
	for i, src := range redisstore.Scripts() {
		for _, bad := range []string{"replicate_commands", "HMSET", "KEYS *", "'EXPIRE'"} {
			if strings.Contains(src, bad) {
				t.Errorf("script %d contains %q", i, bad)
			}
		}
		if !strings.Contains(src, "redis.call('TIME')") {
			t.Errorf("script %d does not read the server clock", i)
		}
	}
}

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	if _, err := memstore.New(memstore.Config{MaxKeys: -1}); err == nil || !strings.Contains(err.Error(), "memstore.Config.MaxKeys") {
		t.Fatalf("NewMemory(MaxKeys -1) = %v", err)
	}
	if _, err := redisstore.New(nil, redisstore.Config{}); err == nil || !strings.Contains(err.Error(), "client must not be nil") {
		t.Fatalf("NewRedis(nil) = %v", err)
	}
}

// TestMemoryBounded: a flood of distinct keys never holds more than
// MaxKeys, and expired keys are swept.
func TestMemoryBounded(t *testing.T) {
	t.Parallel()
	c := &backendtest.Clock{T: backendtest.T0}
	m, _ := memstore.New(memstore.Config{Now: c.Now, MaxKeys: 6400})
	res := make([]algorithms.Result, 1)
	for i := range 50_000 {
		c.T = backendtest.T0.Add(time.Duration(i) * time.Microsecond)
		check := algorithms.Check{Key: "k" + strconv.Itoa(i), Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10)}
		if err := m.Allow(context.Background(), []algorithms.Check{check}, res); err != nil || !res[0].Allowed {
			t.Fatal(res[0], err)
		}
	}
	if n := m.Len(); n > 6400 {
		t.Fatalf("Len = %d, want <= MaxKeys 6400", n)
	}
	c.T = c.T.Add(2 * time.Second) // every key back to full: expired
	for i := range 64 * 16 {
		check := algorithms.Check{Key: "late" + strconv.Itoa(i), Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10)}
		if err := m.Allow(context.Background(), []algorithms.Check{check}, res); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n > 64*16 {
		t.Fatalf("Len = %d after expiry, want only the %d live keys", n, 64*16)
	}
}

// TestMemoryAllocs: a check on an existing key does not allocate, for every
// algorithm, single and layered.
func TestMemoryAllocs(t *testing.T) {
	c := &backendtest.Clock{T: backendtest.T0}
	m, _ := memstore.New(memstore.Config{Now: c.Now})
	res := make([]algorithms.Result, 3)
	for alg, limit := range exactLimits() {
		checks := []algorithms.Check{
			{Key: "a:" + alg.String(), Algorithm: alg, Limit: limit},
			{Key: "b:" + alg.String(), Algorithm: alg, Limit: limit},
			{Key: "c:" + alg.String(), Algorithm: alg, Limit: limit},
		}
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			i++
			c.T = backendtest.T0.Add(time.Duration(i) * time.Minute) // keep capacity available
			if err := m.Allow(context.Background(), checks[:1], res); err != nil {
				t.Fatal(err)
			}
			if err := m.Allow(context.Background(), checks, res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per check on existing keys, want 0", alg, allocs)
		}
	}
}

// TestHonoursDeadline: a backend returns by its deadline when its client
// has ContextTimeoutEnabled, pipelined or not, single node or cluster.
func TestHonoursDeadline(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: enabled})
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: enabled})
		for _, tc := range []struct {
			name   string
			client redis.Scripter
			cfg    redisstore.Config
			want   bool
		}{
			{"pipelined", c, redisstore.Config{}, enabled},
			{"not pipelined", c, redisstore.Config{Pipelines: -1}, enabled},
			{"cluster", cl, redisstore.Config{}, enabled},
		} {
			b, _ := redisstore.New(tc.client, tc.cfg)
			dc, _ := denycache.New(b, denycache.Config{})
			got, through := contract.TraitsOf(b).HonoursDeadline, contract.TraitsOf(dc).HonoursDeadline
			if got != tc.want || through != tc.want {
				t.Errorf("%s, ContextTimeoutEnabled %v: HonoursDeadline %v, through DenyCache %v, want %v", tc.name, enabled, got, through, tc.want)
			}
		}
		c.Close()
		cl.Close()
	}
}

// TestGCRAState: the stored TAT is one integer when the emission interval
// is a whole number of µs, "<a>:<b>:<r>" when it is not, each followed by
// "/<tau>", the limit's full window in µs; the "<a>:0" form written before
// tau was stored reads as the integer (keys written that way stay valid)
// and is rewritten in the current form.
func TestGCRAState(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := time.UnixMicro(1_800_000_000_000_000)
	b, _ := redisstore.New(c, redisstore.Config{Now: func() time.Time { return now }})
	prefix := redistest.Prefix(t)
	check := func(key string, l algorithms.Limit) algorithms.Result {
		t.Helper()
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: l}}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for _, tc := range []struct {
		limit algorithms.Limit
		want  string
	}{
		{algorithms.PerSecond(10), "1800000000100000/1000000"},    // interval 100,000 µs, full window 1s
		{algorithms.PerSecond(7), "1800000000142857:1:7/1000000"}, // 142,857 1/7 µs: a + 1/7, in sevenths
	} {
		key := prefix + "{" + tc.limit.String() + "}"
		check(key, tc.limit)
		if got := c.Get(ctx, key).Val(); got != tc.want {
			t.Errorf("%v: stored %q, want %q", tc.limit, got, tc.want)
		}
	}

	// A TAT one interval ahead, in the "<a>:0" form: a burst-1 limit is
	// denied for exactly one more interval, then allowed.
	key := prefix + "{legacy}"
	c.Set(ctx, key, "1800000000100000:0", time.Second)
	l := algorithms.PerSecond(10).WithBurst(1)
	if r := check(key, l); r.Allowed || r.RetryAfter != 100*time.Millisecond {
		t.Fatalf("legacy state: %+v, want denied for 100ms", r)
	}
	now = now.Add(100 * time.Millisecond)
	if r := check(key, l); !r.Allowed {
		t.Fatalf("legacy state after 100ms: %+v, want allowed", r)
	}
	if got := c.Get(ctx, key).Val(); got != "1800000000200000/100000" {
		t.Errorf("rewritten as %q", got)
	}
}

// TestEmptiedWindowKeepsItsEnd: a fixed window that refunds emptied (its
// count back to 0, its TTL still set) keeps the end its TTL says when the
// next check comes on the server's clock, in the lean script and in the
// one-check script (a refundable check): a TTL unlike this server clock's
// window end (set by a node whose clock was off, before a failover) is not
// moved, which would shorten or stretch the window. Only a key with no
// TTL starts a window at the clock.
func TestEmptiedWindowKeepsItsEnd(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	b, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	for _, refundable := range []bool{false, true} {
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		end := now.Truncate(time.Hour).Add(time.Hour) // the clock's window end
		target := end.Add(-7 * time.Minute)
		if end.Sub(now) < 10*time.Minute {
			target = end.Add(20 * time.Minute)
		}
		key := fmt.Sprintf("%s{fw-%v}", prefix, refundable)
		if err := c.Set(ctx, key, 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpireAt(ctx, key, target).Err(); err != nil {
			t.Fatal(err)
		}
		check := algorithms.Check{Key: key, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(10)}
		if refundable {
			check.RefundWindow = time.Minute
		}
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{check}, res); err != nil {
			t.Fatal(err)
		}
		left := target.Sub(now)
		if !res[0].Allowed || res[0].Remaining != 9 || (res[0].ResetAfter-left).Abs() > 2*time.Second {
			t.Errorf("refundable %v: %s, want allowed with 9 left and reset in %v (the key's own end)", refundable, backendtest.FormatResult(res[0]), left)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if (ttl - left).Abs() > 2*time.Second {
			t.Errorf("refundable %v: TTL %v after the check, want the key's own %v (the clock's window end is in %v)", refundable, ttl, left, end.Sub(now))
		}
	}
}
