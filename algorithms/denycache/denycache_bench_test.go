package denycache_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/contract"
)

// BenchmarkDenyCache measures the cache's own cost on a fixed clock: hit is
// a key already denied (answered locally), miss a key never denied in a
// cache that holds no denial, passed on to AllowAll (which costs almost
// nothing). serial is one goroutine;
// parallel has every goroutine on the one hot key for hit, and on a key of
// its own for miss.
func BenchmarkDenyCache(b *testing.B) {
	now := func() time.Time { return backendtest.T0 }
	mem, _ := memstore.New(memstore.Config{Now: now})
	hit, _ := denycache.New(mem, denycache.Config{Now: now})
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
	miss, _ := denycache.New(contract.AllowAll{}, denycache.Config{Now: now})

	b.Run("hit/serial", func(b *testing.B) {
		benchDenyCacheSerial(b, hit, hot)
	})
	b.Run("hit/parallel", func(b *testing.B) {
		benchDenyCacheParallel(b, hit, func(int64) []algorithms.Check { return hot })
	})
	b.Run("miss/serial", func(b *testing.B) {
		benchDenyCacheSerial(b, miss, []algorithms.Check{{Key: "bench:{miss}", Algorithm: algorithms.GCRA, Limit: benchLimit}})
	})
	b.Run("miss/others-denied/serial", func(b *testing.B) {
		// a key never denied, in a cache that holds a denial of another
		// key: each call looks its key up (next is memstore here)
		benchDenyCacheSerial(b, hit, []algorithms.Check{{Key: "bench:{miss}", Algorithm: algorithms.GCRA, Limit: benchLimit}})
	})
	b.Run("miss/parallel", func(b *testing.B) {
		benchDenyCacheParallel(b, miss, func(id int64) []algorithms.Check {
			return []algorithms.Check{{Key: "bench:{miss" + strconv.FormatInt(id, 10) + "}", Algorithm: algorithms.GCRA, Limit: benchLimit}}
		})
	})
}

func benchDenyCacheSerial(b *testing.B, d *denycache.Cache, checks []algorithms.Check) {
	res := make([]algorithms.Result, len(checks))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Allow(context.Background(), checks, res); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDenyCacheParallel(b *testing.B, d *denycache.Cache, checks func(id int64) []algorithms.Check) {
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

// benchLimit is never reached by the calls that go to the wrapped Backend.
var benchLimit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}
