package algorithms_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkDenyCache measures the cache's own cost on a fixed clock: hit is
// a key already denied (answered locally), miss a key never denied, passed
// on to AllowAll (which costs almost nothing). serial is one goroutine;
// parallel has every goroutine on the one hot key for hit, and on a key of
// its own for miss.
func BenchmarkDenyCache(b *testing.B) {
	now := func() time.Time { return t0 }
	mem, _ := algorithms.NewMemory(algorithms.MemoryConfig{Now: now})
	hit, _ := algorithms.NewDenyCache(mem, algorithms.DenyCacheConfig{Now: now})
	hot := []algorithms.Check{{Key: "bench:{hot}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}}
	res := make([]algorithms.Result, 1)
	for range 2 { // the second is denied for an hour: cached
		if err := hit.Allow(context.Background(), hot, res); err != nil {
			b.Fatal(err)
		}
	}
	if res[0].Allowed {
		b.Fatal("hot key allowed; want it denied and cached")
	}
	miss, _ := algorithms.NewDenyCache(algorithms.AllowAll{}, algorithms.DenyCacheConfig{Now: now})

	b.Run("hit/serial", func(b *testing.B) {
		benchDenyCacheSerial(b, hit, hot)
	})
	b.Run("hit/parallel", func(b *testing.B) {
		benchDenyCacheParallel(b, hit, func(int64) []algorithms.Check { return hot })
	})
	b.Run("miss/serial", func(b *testing.B) {
		benchDenyCacheSerial(b, miss, []algorithms.Check{{Key: "bench:{miss}", Algorithm: algorithms.GCRA, Limit: benchLimit}})
	})
	b.Run("miss/parallel", func(b *testing.B) {
		benchDenyCacheParallel(b, miss, func(id int64) []algorithms.Check {
			return []algorithms.Check{{Key: "bench:{miss" + strconv.FormatInt(id, 10) + "}", Algorithm: algorithms.GCRA, Limit: benchLimit}}
		})
	})
}

func benchDenyCacheSerial(b *testing.B, d *algorithms.DenyCache, checks []algorithms.Check) {
	res := make([]algorithms.Result, len(checks))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Allow(context.Background(), checks, res); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDenyCacheParallel(b *testing.B, d *algorithms.DenyCache, checks func(id int64) []algorithms.Check) {
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := checks(id.Add(1))
		res := make([]algorithms.Result, len(c))
		for pb.Next() {
			if err := d.Allow(context.Background(), c, res); err != nil {
				b.Error(err)
				return
			}
		}
	})
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
	rb, _ := algorithms.NewRedis(client, algorithms.RedisConfig{})
	for _, bc := range []struct {
		name    string
		backend func() algorithms.Backend
	}{
		{"redis", func() algorithms.Backend { return rb }},
		{"redis+denycache", func() algorithms.Backend {
			d, _ := algorithms.NewDenyCache(rb, algorithms.DenyCacheConfig{})
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
