package rueidisclient_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkAllow: one GCRA or fixed-window check per call, on the
// server's clock, through the store on go-redis and on rueidis; serial
// (one caller: a round trip each) and parallel (callers queue and are
// batched), each sub-benchmark with its allocations. The serial ones run
// seconds apart on a shared machine; "interleaved-N" alternates the two
// clients every N checks and reports each one's µs per check and their
// ratio, which the machine's drift moves alike. With N = 1 each check
// finds the CPU's caches and branch predictors trained by the other
// client's, as a check amid a handler's own work would; with N = 64 it
// runs warm, as in bench/peerbench's slices.
func BenchmarkAllow(b *testing.B) {
	srv := redistest.Require(b)
	gr := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 64})
	b.Cleanup(func() { gr.Close() })
	clients := []struct {
		name   string
		client redis.Scripter
	}{{"goredis", gr}, {"rueidis", newClient(b, srv)}}
	prefix := redistest.Prefix(b)
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.GCRA} {
		// 1,000,000 per second: a GCRA emission interval of a whole µs
		// and a fixed window of whole ms, so that both are sent as their
		// lean scripts, as a check of a real limit is; never denied here
		limit := algorithms.PerSecond(1_000_000)
		var stores [2]*redisstore.Store
		var checks [2][]algorithms.Check
		for i, c := range clients {
			s, err := redisstore.New(c.client, redisstore.Config{})
			if err != nil {
				b.Fatal(err)
			}
			stores[i] = s
			checks[i] = []algorithms.Check{{Key: prefix + "i" + c.name + alg.String() + ":{hot}", Algorithm: alg, Limit: limit}}
		}
		for _, block := range []int{1, 64} {
			b.Run(alg.String()+"/interleaved-"+strconv.Itoa(block), func(b *testing.B) {
				var spent [2]time.Duration
				res := make([]algorithms.Result, 1)
				for b.Loop() {
					for i := range stores {
						t0 := time.Now()
						for range block {
							if err := stores[i].Allow(context.Background(), checks[i], res); err != nil {
								b.Fatal(err)
							}
						}
						spent[i] += time.Since(t0)
					}
				}
				n := float64(b.N * block)
				b.ReportMetric(float64(spent[0].Microseconds())/n, "goredis-µs/check")
				b.ReportMetric(float64(spent[1].Microseconds())/n, "rueidis-µs/check")
				b.ReportMetric(float64(spent[0])/float64(spent[1]), "goredis÷rueidis")
			})
		}
		for _, c := range clients {
			store, err := redisstore.New(c.client, redisstore.Config{})
			if err != nil {
				b.Fatal(err)
			}
			check := algorithms.Check{Key: prefix + c.name + alg.String() + ":{hot}", Algorithm: alg, Limit: limit}
			b.Run(alg.String()+"/"+c.name+"/serial", func(b *testing.B) {
				b.ReportAllocs()
				checks := []algorithms.Check{check}
				res := make([]algorithms.Result, 1)
				for b.Loop() {
					if err := store.Allow(context.Background(), checks, res); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(alg.String()+"/"+c.name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8) // 8 × GOMAXPROCS callers
				b.RunParallel(func(pb *testing.PB) {
					checks := []algorithms.Check{check}
					res := make([]algorithms.Result, 1)
					for pb.Next() {
						if err := store.Allow(context.Background(), checks, res); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
			})
		}
	}
}
