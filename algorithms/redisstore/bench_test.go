package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua"
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
// connection, so the server runs them back to back, and server-µs/script
// is INFO commandstats' usec per EVALSHA. The arguments are those of a
// limit that is never reached (capacity 10^6, one unit per µs), so every
// check passes and writes.
func BenchmarkScripts(b *testing.B) {
	srv := redistest.Require(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	ctx := context.Background()
	prefix := redistest.Prefix(b)
	dispatch := func(algs ...algorithms.Algorithm) []any {
		args := []any{0, 0} // server clock, decide
		for _, a := range algs {
			period := 0
			if a == algorithms.FixedWindow || a == algorithms.SlidingWindow || a == algorithms.SlidingLog {
				period = 1_000_000
			}
			args = append(args, int(a), 1_000_000, period, 1, 1, 1)
		}
		return args
	}
	for _, sc := range []struct {
		name string
		src  string
		keys int
		args []any
	}{
		{"return_1", "return 1", 1, nil},
		{"fixed_window", lua.Single("fixed_window"), 1, []any{0, 1_000_000, 1_000_000, 0, 0, 1}},
		{"sliding_log", lua.Single("sliding_log"), 1, []any{0, 1_000, 1_000, 0, 0, 1}},
		{"sliding_window", lua.Single("sliding_window"), 1, []any{0, 1_000_000, 1_000_000, 0, 0, 1}},
		{"token_bucket", lua.Single("token_bucket"), 1, []any{0, 1_000_000, 0, 1, 1, 1}},
		{"gcra", lua.Single("gcra"), 1, []any{0, 1_000_000, 0, 1, 1, 1}},
		{"dispatch/gcra×3", lua.Multi(), 3, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
		{"dispatch/gcra+token_bucket+sliding_window", lua.Multi(), 3, dispatch(algorithms.GCRA, algorithms.TokenBucket, algorithms.SlidingWindow)},
		{"dispatch/gcra×5", lua.Multi(), 5, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
	} {
		b.Run(sc.name, func(b *testing.B) {
			s := redis.NewScript(sc.src)
			keys := make([]string, sc.keys)
			for i := range keys {
				keys[i] = prefix + sc.name + ":{k}" + strconv.Itoa(i)
			}
			if err := s.Run(ctx, client, keys, sc.args...).Err(); err != nil {
				b.Fatal(err)
			}
			client.ConfigResetStat(ctx)
			b.ReportAllocs()
			for b.Loop() {
				pipe := client.Pipeline()
				for range 200 {
					s.EvalSha(ctx, pipe, keys, sc.args...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			calls, usec := backendtest.ScriptStats(ctx, client)
			b.ReportMetric(usec/calls, "server-µs/script")
		})
	}
}

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
