package algorithms_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// Benchmarks run each algorithm on an existing key (the common case) with
// a huge limit, so every check is a real allowed check.
var benchLimit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}

func benchLimitFor(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingLog {
		// entries leave after 1ms: the log stays short
		return algorithms.Limit{Rate: 1_000_000, Period: time.Millisecond}
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
				benchRedis(b, client, func() { runGoroutines(b, g, v.backend, checks) })
			})
		}
	}
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
	}
}

// runGoroutines calls backend b.N times in all from g goroutines.
func runGoroutines(b *testing.B, g int, backend algorithms.Backend, checks []algorithms.Check) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			res := make([]algorithms.Result, len(checks))
			for next.Add(1) <= int64(b.N) {
				if err := backend.Allow(context.Background(), checks, res); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
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
