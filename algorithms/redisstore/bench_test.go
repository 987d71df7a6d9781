package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Benchmarks run each algorithm on an existing key (the common case) with
// a huge limit, so every check is a real allowed check.
var benchLimit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}

func benchLimitFor(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingLog {
		// entries leave after 1ms: the log stays short (2000 is the
		// sliding log's largest Rate; on the memory benchmarks' fixed clock
		// checks past the 2000th are denials)
		return algorithms.Limit{Rate: 2_000, Period: time.Millisecond}
	}
	return benchLimit
}

// BenchmarkRedis runs against the redis-server the tests start (skipped
// without one), on the server clock. Besides ns/op and allocs/op it reports
// checks/s, scripts per call (EVALSHA+EVAL counted by the server), round
// trips per call (counted by a client hook: below 1 when calls share
// pipelines) and server-side µs per script (INFO commandstats).
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Require(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128})
	defer client.Close()
	client.AddHook(trips)
	backend, _ := redisstore.New(client, redisstore.Config{})
	prefix := redistest.Prefix(b)
	for _, alg := range algorithms.Algorithms {
		limit := benchLimitFor(alg)
		b.Run(alg.String()+"/serial", func(b *testing.B) {
			checks := []algorithms.Check{{Key: prefix + alg.String() + ":{serial}", Algorithm: alg, Limit: limit}}
			benchRedis(b, client, func() {
				res := make([]algorithms.Result, 1)
				for b.Loop() {
					if err := backend.Allow(context.Background(), checks, res); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(alg.String()+"/parallel=64", func(b *testing.B) {
			checks := []algorithms.Check{{Key: prefix + alg.String() + ":{hot}", Algorithm: alg, Limit: limit}}
			b.SetParallelism(32) // GOMAXPROCS 2 × 32 = 64 goroutines
			benchRedis(b, client, func() {
				b.RunParallel(func(pb *testing.PB) {
					res := make([]algorithms.Result, 1)
					for pb.Next() {
						if err := backend.Allow(context.Background(), checks, res); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		})
	}
	// The backend pipelines concurrent calls by default; measured against
	// the same client with pipelining off, and against go-redis's
	// autopipeliner (which batches concurrent commands into one write) as
	// the Scripter, at 1, 8, 64 and 256 goroutines.
	unpiped, _ := redisstore.New(client, redisstore.Config{Pipelines: -1})
	ap, err := client.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	defer ap.Close()
	autopiped, _ := redisstore.New(ap, redisstore.Config{})
	for _, g := range []int{1, 8, 64, 256} {
		for _, v := range []struct {
			name    string
			backend *redisstore.Store
		}{{"pipelined", backend}, {"unpipelined", unpiped}, {"autopipeliner", autopiped}} {
			b.Run("gcra/goroutines="+strconv.Itoa(g)+"/"+v.name, func(b *testing.B) {
				checks := []algorithms.Check{{Key: prefix + "gcra:{hot-" + v.name + "}", Algorithm: algorithms.GCRA, Limit: benchLimit}}
				benchRedis(b, client, func() { hammer(b, v.backend, g, b.N, checks...) })
			})
		}
	}
	// Layered rules, serially and from 64 goroutines: pipelined, the
	// server runs the scripts back to back, so server-µs/op is the
	// script's cost without an idle server's wake-up in it.
	for _, n := range []int{1, 3, 5} {
		b.Run("rules="+strconv.Itoa(n)+"/gcra", func(b *testing.B) {
			checks := backendtest.LayeredChecks(prefix+"layered"+strconv.Itoa(n), n, benchLimit)
			benchRedis(b, client, func() {
				res := make([]algorithms.Result, n)
				for b.Loop() {
					if err := backend.Allow(context.Background(), checks, res); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("rules="+strconv.Itoa(n)+"/gcra/goroutines=64", func(b *testing.B) {
			checks := backendtest.LayeredChecks(prefix+"layered64-"+strconv.Itoa(n), n, benchLimit)
			benchRedis(b, client, func() { hammer(b, backend, 64, b.N, checks...) })
		})
	}
}

// trips counts the round trips of the clients benchRedis measures, once
// they add it as a hook.
var trips = &tripCounter{}

func benchRedis(b *testing.B, c *redis.Client, fn func()) {
	ctx := context.Background()
	c.ConfigResetStat(ctx)
	trips.trips.Store(0)
	b.ReportAllocs()
	start := time.Now()
	fn()
	elapsed := time.Since(start)
	calls, usec := backendtest.ScriptStats(ctx, c)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(calls/float64(b.N), "scripts/op")
	b.ReportMetric(float64(trips.trips.Load())/float64(b.N), "round-trips/op")
	if calls > 0 {
		b.ReportMetric(usec/calls, "server-µs/op")
	}
}

// BenchmarkScripts measures what each script costs the server, apart from
// networking: one op is a pipeline of 200 EVALSHAs of one script on one
// connection (200/k of a batch of k calls), so the server runs them back to
// back, and server-µs/script is INFO commandstats' usec per EVALSHA,
// server-µs/check that divided by the checks a script decides. The
// arguments are those of a limit that is never reached (capacity 10^6, one
// unit per µs), so every check passes and writes. flat_gcra is a reference,
// not redlimit's: a GCRA written flat in the manner of go-redis/redis_rate's
// script (TIME, GET, float arithmetic, SET EX, numbers returned as
// strings); so is flat_counter, a counter of ulule/limiter's shape.
// <algorithm>/lean is the algorithm's lean script (lean.go), which a check
// on the server's clock is sent as; <algorithm> its one-check script.
func BenchmarkScripts(b *testing.B) {
	srv := redistest.Require(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	ctx := context.Background()
	prefix := redistest.Prefix(b)
	period := func(a algorithms.Algorithm) int {
		if a == algorithms.FixedWindow || a == algorithms.SlidingWindow || a == algorithms.SlidingLog {
			return 1_000_000
		}
		return 0
	}
	capacity := func(a algorithms.Algorithm) int {
		if a == algorithms.SlidingLog {
			return 1_000
		}
		return 1_000_000
	}
	one := func(a algorithms.Algorithm) []any {
		return []any{0, capacity(a), period(a), 1, 1, 1}
	}
	dispatch := func(algs ...algorithms.Algorithm) []any {
		args := []any{0, 0} // server clock, decide
		for _, a := range algs {
			args = append(args, int(a), 1_000_000, period(a), 1, 1, 1)
		}
		return args
	}
	type bench struct {
		name   string
		src    string
		keys   int
		checks int // decided per script
		args   []any
	}
	benches := []bench{
		{"return_1", "return 1", 1, 1, nil},
		{"flat_gcra", flatGCRA, 1, 1, []any{1, 1_000_000, 1}},
		{"flat_counter", flatCounter, 1, 1, []any{1, 1000}},
	}
	// batched returns batch.lua's ARGV of k calls, each of the checks algs.
	// Calls of one check after the first send 0 for their numbers, as the
	// Go side does for a call of the same limit as the one before.
	batched := func(k int, algs ...algorithms.Algorithm) []any {
		var args []any
		for i := range k {
			if i > 0 && len(algs) == 1 {
				args = append(args, 0, 0, 0) // the last call's check, server clock, one server
				continue
			}
			args = append(args, len(algs), 0, 0) // checks, server clock, one server
			for _, a := range algs {
				args = append(args, int(a), capacity(a), period(a), 1, 1, 1)
			}
		}
		return args
	}
	benches = append(benches,
		bench{"fixed_window/lean", luaScript("lean_fixed_window"), 1, 1, []any{1_000_000, 1_000_000}},
		bench{"gcra/lean", luaScript("lean_gcra"), 1, 1, []any{1_000_000, 1, "/1000000"}},
	)
	for _, a := range algorithms.Algorithms {
		benches = append(benches, bench{a.String(), luaScript("one_" + a.String()), 1, 1, one(a)})
		for _, k := range []int{2, 4, 8, 16, 64} {
			benches = append(benches, bench{a.String() + "/batch=" + strconv.Itoa(k), luaScript("batch_" + a.String()), k, k, batched(k, a)})
		}
		benches = append(benches, bench{a.String() + "/batch_all=16", luaScript("batch_all"), 16, 16, batched(16, a)})
		benches = append(benches, bench{a.String() + "/batch=16/one_key", luaScript("batch_" + a.String()), 16, 16, batched(16, a)})
	}
	for _, k := range []int{4, 16} {
		// k calls of three rules each, as the middleware's layered rules
		benches = append(benches,
			bench{"gcra×3/batch=" + strconv.Itoa(k), luaScript("batch_gcra"), 3 * k, 3 * k, batched(k, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
			bench{"gcra+token_bucket+sliding_window/batch_all=" + strconv.Itoa(k), luaScript("batch_all"), 3 * k, 3 * k,
				batched(k, algorithms.GCRA, algorithms.TokenBucket, algorithms.SlidingWindow)})
	}
	benches = append(benches,
		bench{"dispatch/gcra×3", luaScript("multi"), 3, 3, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
		bench{"dispatch/gcra+token_bucket+sliding_window", luaScript("multi"), 3, 3, dispatch(algorithms.GCRA, algorithms.TokenBucket, algorithms.SlidingWindow)},
		bench{"dispatch/gcra×5", luaScript("multi"), 5, 5, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
		bench{"dispatch/fixed_window×3", luaScript("multi"), 3, 3, dispatch(algorithms.FixedWindow, algorithms.FixedWindow, algorithms.FixedWindow)},
	)
	for _, sc := range benches {
		b.Run(sc.name, func(b *testing.B) {
			s := redis.NewScript(sc.src)
			keys := make([]string, sc.keys)
			for i := range keys {
				keys[i] = prefix + sc.name + ":{k}" + strconv.Itoa(i)
				if strings.HasSuffix(sc.name, "/one_key") { // every call on one key
					keys[i] = prefix + sc.name + ":{k}"
				}
			}
			if err := s.Run(ctx, client, keys, sc.args...).Err(); err != nil {
				b.Fatal(err)
			}
			client.ConfigResetStat(ctx)
			b.ReportAllocs()
			for b.Loop() {
				pipe := client.Pipeline()
				for range max(1, 200/sc.checks) {
					s.EvalSha(ctx, pipe, keys, sc.args...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			calls, usec := backendtest.ScriptStats(ctx, client)
			b.ReportMetric(usec/calls, "server-µs/script")
			b.ReportMetric(usec/calls/float64(sc.checks), "server-µs/check")
		})
	}
}

// flatGCRA is BenchmarkScripts' reference: ARGV interval µs, burst, cost.
const flatGCRA = `
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then tat = now end
local new_tat = tat + cost * interval
local diff = now - (new_tat - burst * interval)
local remaining = math.floor(diff / interval)
if remaining < 0 then
  return {0, 0, tostring(-diff), tostring(tat - now)}
end
local reset = new_tat - now
redis.call('SET', KEYS[1], new_tat, 'EX', math.ceil(reset / 1000000))
return {1, remaining, tostring(-1), tostring(reset)}
`

// flatCounter is BenchmarkScripts' reference for the fixed window: a
// counter of the shape ulule/limiter's store runs (INCRBY; PEXPIRE when
// the count is the cost, a window's first check; else PTTL); ARGV cost,
// period in ms.
const flatCounter = `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
local ms = tonumber(ARGV[2])
if n == tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  ms = redis.call('PTTL', KEYS[1])
end
return {n, ms}
`

// BenchmarkAbusiveKey: 64 goroutines hammer one key far over its limit
// (GCRA 10/s) on the redis-server the tests start (skipped without one),
// with the server's clock and the real local clock. redis sends every check
// to Redis; redis+denycache answers most of them locally. Compare checks/s
// and scripts/op (EVALSHA+EVAL counted by the server).
func BenchmarkAbusiveKey(b *testing.B) {
	srv := redistest.Require(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128})
	client.AddHook(trips)
	defer client.Close()
	prefix := redistest.Prefix(b)
	limit := algorithms.PerSecond(10)
	rb, _ := redisstore.New(client, redisstore.Config{})
	for _, bc := range []struct {
		name    string
		backend func() algorithms.Backend
	}{
		{"redis", func() algorithms.Backend { return rb }},
		{"redis+denycache", func() algorithms.Backend {
			d, _ := denycache.New(rb, denycache.Config{})
			return d
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			backend := bc.backend()
			checks := []algorithms.Check{{Key: prefix + bc.name + ":{abuser}", Algorithm: algorithms.GCRA, Limit: limit}}
			var allowed atomic.Int64
			b.SetParallelism(32) // GOMAXPROCS 2 × 32 = 64 goroutines
			benchRedis(b, client, func() {
				b.RunParallel(func(pb *testing.PB) {
					res := make([]algorithms.Result, 1)
					for pb.Next() {
						if err := backend.Allow(context.Background(), checks, res); err != nil {
							b.Error(err)
							return
						}
						if res[0].Allowed {
							allowed.Add(1)
						}
					}
				})
			})
			b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
		})
	}
}
