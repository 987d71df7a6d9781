package algorithms_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
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

// BenchmarkMemory uses a fixed clock (time.Now alone costs 25-60 ns on this
// kind of VM); clock=time.Now shows the default clock's share.
func BenchmarkMemory(b *testing.B) {
	m, _ := algorithms.NewMemory(algorithms.MemoryConfig{Now: func() time.Time { return t0 }})
	b.Run("clock=time.Now/gcra", func(b *testing.B) {
		real, _ := algorithms.NewMemory(algorithms.MemoryConfig{})
		checks := []algorithms.Check{{Key: "k", Algorithm: algorithms.GCRA, Limit: benchLimit}}
		res := make([]algorithms.Result, 1)
		b.ReportAllocs()
		for b.Loop() {
			if err := real.Allow(context.Background(), checks, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range algorithms.Algorithms {
		limit := benchLimitFor(alg)
		b.Run(alg.String()+"/serial", func(b *testing.B) {
			checks := []algorithms.Check{{Key: "serial:" + alg.String(), Algorithm: alg, Limit: limit}}
			res := make([]algorithms.Result, 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Allow(context.Background(), checks, res); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/parallel", func(b *testing.B) {
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				// one key per goroutine
				checks := []algorithms.Check{{Key: "par:" + alg.String() + strconv.FormatInt(id.Add(1), 10), Algorithm: alg, Limit: limit}}
				res := make([]algorithms.Result, 1)
				for pb.Next() {
					if err := m.Allow(context.Background(), checks, res); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
	b.Run("rules=3/gcra", func(b *testing.B) {
		checks := layeredChecks("layered:", 3)
		res := make([]algorithms.Result, 3)
		b.ReportAllocs()
		for b.Loop() {
			if err := m.Allow(context.Background(), checks, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchMemoryFill(b) // empty/... and full/...
}

func layeredChecks(prefix string, n int) []algorithms.Check {
	checks := make([]algorithms.Check, n)
	for i := range checks {
		checks[i] = algorithms.Check{Key: prefix + "r" + strconv.Itoa(i) + ":{k}", Algorithm: algorithms.GCRA, Limit: benchLimit}
	}
	return checks
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
	backend, _ := algorithms.NewRedis(client, algorithms.RedisConfig{})
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
	unpiped, _ := algorithms.NewRedis(client, algorithms.RedisConfig{Pipelines: -1})
	ap, err := client.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	defer ap.Close()
	autopiped, _ := algorithms.NewRedis(ap, algorithms.RedisConfig{})
	for _, g := range []int{1, 8, 64, 256} {
		for _, v := range []struct {
			name    string
			backend *algorithms.Redis
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
			checks := layeredChecks(prefix+"layered"+strconv.Itoa(n), n)
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
			checks := layeredChecks(prefix+"layered64-"+strconv.Itoa(n), n)
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
	calls, usec := scriptStats(ctx, c)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(calls/float64(b.N), "scripts/op")
	b.ReportMetric(float64(trips.trips.Load())/float64(b.N), "round-trips/op")
	if calls > 0 {
		b.ReportMetric(usec/calls, "server-µs/op")
	}
}

// scriptStats sums calls and usec of evalsha and eval from lines of INFO
// commandstats like "cmdstat_evalsha:calls=10,usec=52,usec_per_call=5.20,...".
func scriptStats(ctx context.Context, c *redis.Client) (calls, usec float64) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			rest, ok = strings.CutPrefix(strings.TrimSpace(line), "cmdstat_eval:")
		}
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += f
			case "usec":
				usec += f
			}
		}
	}
	return calls, usec
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
		{"fixed_window", lua.FixedWindowOne, 1, []any{0, 1_000_000, 1_000_000, 0, 0, 1}},
		{"sliding_log", lua.SlidingLogOne, 1, []any{0, 1_000, 1_000, 0, 0, 1}},
		{"sliding_window", lua.SlidingWindowOne, 1, []any{0, 1_000_000, 1_000_000, 0, 0, 1}},
		{"token_bucket", lua.TokenBucketOne, 1, []any{0, 1_000_000, 0, 1, 1, 1}},
		{"gcra", lua.GCRAOne, 1, []any{0, 1_000_000, 0, 1, 1, 1}},
		{"dispatch/gcra×3", lua.Script, 3, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
		{"dispatch/gcra+token_bucket+sliding_window", lua.Script, 3, dispatch(algorithms.GCRA, algorithms.TokenBucket, algorithms.SlidingWindow)},
		{"dispatch/gcra×5", lua.Script, 5, dispatch(algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA, algorithms.GCRA)},
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
			calls, usec := scriptStats(ctx, client)
			b.ReportMetric(usec/calls, "server-µs/script")
		})
	}
}
