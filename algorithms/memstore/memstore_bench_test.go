package memstore_test

import (
	"context"
	"math/bits"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// benchKey returns a 32-byte key for i ("rate:bench:" and 21 digits), so
// that every key costs the same: one 32-byte allocation.
func benchKey(prefix byte, i int) string {
	var buf [32]byte
	n := copy(buf[:], "rate:bench:")
	buf[n] = prefix
	digits := strconv.AppendInt(nil, int64(i), 10)
	for j := n + 1; j < len(buf)-len(digits); j++ {
		buf[j] = '0'
	}
	copy(buf[len(buf)-len(digits):], digits)
	return string(buf[:])
}

// benchMemoryLimit keeps every key live for the whole benchmark (the clock
// stands still): a full backend stays full and must evict.
var benchMemoryLimit = algorithms.PerHour(1000)

// fillMemory allows one check on n distinct keys and returns the heap
// growth per key, in bytes, once the garbage is collected.
func fillMemory(tb testing.TB, m *memstore.Store, prefix byte, n int) float64 {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	checks := make([]algorithms.Check, 1)
	res := make([]algorithms.Result, 1)
	for i := range n {
		checks[0] = algorithms.Check{Key: benchKey(prefix, i), Algorithm: algorithms.GCRA, Limit: benchMemoryLimit}
		if err := m.Allow(context.Background(), checks, res); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// benchMemoryFill measures admitting new keys into a Memory of 1<<20 keys
// that is empty (replaced by a fresh one every 1<<18 keys, so it never gets
// past a quarter full) and one that is at its cap (every new key evicts
// one), and the latency of checks on existing keys while two goroutines
// keep adding new keys to the full backend. full/newkeys also reports the
// heap per key of the full backend, key bytes included. New keys cost one
// allocation for the key itself; full/existing's B/op counts the new keys'
// allocations too (the process's), its checks themselves allocate nothing.
func benchMemoryFill(b *testing.B) {
	const maxKeys = 1 << 20
	now := func() time.Time { return backendtest.T0 }
	b.Run("empty/newkeys", func(b *testing.B) {
		m, _ := memstore.New(memstore.Config{Now: now, MaxKeys: maxKeys})
		checks := make([]algorithms.Check, 1)
		res := make([]algorithms.Result, 1)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i++; i%(maxKeys/4) == 0 {
				b.StopTimer()
				m, _ = memstore.New(memstore.Config{Now: now, MaxKeys: maxKeys})
				runtime.GC()
				b.StartTimer()
			}
			checks[0] = algorithms.Check{Key: benchKey('n', i), Algorithm: algorithms.GCRA, Limit: benchMemoryLimit}
			if err := m.Allow(context.Background(), checks, res); err != nil {
				b.Fatal(err)
			}
		}
	})

	full, _ := memstore.New(memstore.Config{Now: now, MaxKeys: maxKeys})
	perKey := fillMemory(b, full, 'f', maxKeys)
	var next atomic.Int64 // new keys: never seen before

	b.Run("full/newkeys", func(b *testing.B) {
		checks := make([]algorithms.Check, 1)
		res := make([]algorithms.Result, 1)
		b.ReportAllocs()
		for b.Loop() {
			checks[0] = algorithms.Check{Key: benchKey('n', int(next.Add(1))), Algorithm: algorithms.GCRA, Limit: benchMemoryLimit}
			if err := full.Allow(context.Background(), checks, res); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(perKey, "heap-B/key")
	})

	b.Run("full/existing", func(b *testing.B) {
		// 64 existing keys, refreshed before the clock starts, so that
		// eviction by the new keys does not touch them during the run.
		existing := make([]algorithms.Check, 64)
		for i := range existing {
			existing[i] = algorithms.Check{Key: benchKey('e', i), Algorithm: algorithms.GCRA, Limit: algorithms.Limit{Rate: 1 << 30, Period: time.Hour}}
		}
		res := make([]algorithms.Result, 1)
		for i := range existing {
			if err := full.Allow(context.Background(), existing[i:i+1], res); err != nil {
				b.Fatal(err)
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				checks := make([]algorithms.Check, 1)
				res := make([]algorithms.Result, 1)
				for {
					select {
					case <-stop:
						return
					default:
					}
					checks[0] = algorithms.Check{Key: benchKey('n', int(next.Add(1))), Algorithm: algorithms.GCRA, Limit: benchMemoryLimit}
					if err := full.Allow(context.Background(), checks, res); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		var h latencies
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			start := time.Now()
			if err := full.Allow(context.Background(), existing[i%64:i%64+1], res); err != nil {
				b.Fatal(err)
			}
			h.add(time.Since(start))
		}
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(h.quantile(0.50)), "p50-ns")
		b.ReportMetric(float64(h.quantile(0.99)), "p99-ns")
		b.ReportMetric(float64(h.quantile(0.999)), "p99.9-ns")
		b.ReportMetric(float64(h.quantile(0.9999)), "p99.99-ns")
	})
}

// latencies is a histogram of durations with buckets 1/8 of a power of two
// wide (12.5% resolution); adding does not allocate.
type latencies struct {
	n       int64
	buckets [64 * 8]int64
}

func (h *latencies) add(d time.Duration) {
	ns := uint64(max(d, 1))
	e := bits.Len64(ns) - 1 // ns in [2^e, 2^(e+1))
	frac := 0
	if e >= 3 {
		frac = int(ns>>(e-3)) & 7
	}
	h.buckets[e*8+frac]++
	h.n++
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *latencies) quantile(q float64) time.Duration {
	want := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.buckets {
		if seen += c; seen > want {
			e, frac := i/8, i%8
			return time.Duration((uint64(8+frac+1) << e) >> 3)
		}
	}
	return 0
}

// benchLimit is never reached: benchmarks measure allowed checks.
var benchLimit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}

// BenchmarkMemory uses a fixed clock (time.Now alone costs 25-60 ns on this
// kind of VM); clock=time.Now shows the default clock's share.
func BenchmarkMemory(b *testing.B) {
	m, _ := memstore.New(memstore.Config{Now: func() time.Time { return backendtest.T0 }})
	b.Run("clock=time.Now/gcra", func(b *testing.B) {
		real, _ := memstore.New(memstore.Config{})
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
		checks := backendtest.LayeredChecks("layered:", 3, benchLimit)
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

func benchLimitFor(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingLog {
		// entries leave after 1ms: the log stays short (2000 is the
		// sliding log's largest Rate; on the memory benchmarks' fixed clock
		// checks past the 2000th are denials)
		return algorithms.Limit{Rate: 2_000, Period: time.Millisecond}
	}
	return benchLimit
}
