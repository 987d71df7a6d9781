//go:build unix

package redlimit_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// keysBenchGoroutines is how many goroutines BenchmarkKeys runs, whatever
// GOMAXPROCS is (rounded up to a multiple of it).
const keysBenchGoroutines = 64

// keysBenchLimit is never reached: every check is an allowed one.
var keysBenchLimit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}

// keysBenchMaterial returns the i-th of the benchmark's key materials, an
// IPv4 address in 10.0.0.0/8 (i < 1<<24): what an IP key func yields.
func keysBenchMaterial(i int) string {
	b := make([]byte, 0, 16)
	b = append(b, "10."...)
	b = strconv.AppendInt(b, int64(i>>16&0xFF), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i>>8&0xFF), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i&0xFF), 10)
	return string(b)
}

// BenchmarkKeys measures the engine's cost per check as the number of live
// keys grows: 64 goroutines check keys drawn uniformly at random from N
// distinct key materials, on memstore with a fixed clock. keys=N/store is
// the store alone, asked with the storage keys built beforehand;
// keys=N/engine is Limiter.Decide with one rule, asked with the materials,
// on a store of its own. Each store holds its N keys before the clock
// starts, and only one of them is alive at a time (a collection would
// otherwise mark both).
//
// Each reports checks/s (wall clock) and cpu-ns/check (the process's user
// and system CPU time per check, garbage collection included), and
// keys=N/engine reports, against the keys=N/store run just before it,
// ratio (its checks/s over the store's) and cpu-ratio (the store's CPU
// time per check over its own; on a machine of its own the two agree, 1
// would be an engine that costs nothing). On a shared machine compare
// cpu-ratio, which other processes move least. Run it with
//
//	go test -run '^$' -bench BenchmarkKeys -count 3 ./the redlimit package/
func BenchmarkKeys(b *testing.B) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	ctx := context.Background()
	par := (keysBenchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	var seed atomic.Uint64
	// measure runs 64 goroutines, each with a checker of its own from
	// checker, and reports checks/s and cpu-ns/check; it returns both per
	// check, in ns.
	measure := func(b *testing.B, checker func() func(*rand.Rand) bool) (wall, cpu float64) {
		runtime.GC()
		b.SetParallelism(par)
		b.ReportAllocs()
		cpu0 := selfCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(seed.Add(1), 0))
			check := checker()
			for pb.Next() {
				if !check(rng) {
					return
				}
			}
		})
		b.StopTimer()
		wall = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		cpu = float64(selfCPU()-cpu0) / float64(b.N)
		b.ReportMetric(1e9/wall, "checks/s")
		b.ReportMetric(cpu, "cpu-ns/check")
		return wall, cpu
	}
	for _, n := range []int{1_000, 4_000, 16_000, 100_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			materials := make([]string, n)
			for i := range materials {
				materials[i] = keysBenchMaterial(i)
			}
			// State is built outside the b.Run closures, which run several
			// times while the benchmark sizes b.N.
			storeKeys := make([]string, n)
			for i, mat := range materials {
				storeKeys[i] = "rate:ip:gcra:{" + mat + "}"
			}
			m, err := memstore.New(memstore.Config{Now: now})
			if err != nil {
				b.Fatal(err)
			}
			allow := func() func(key string) bool {
				checks := []algorithms.Check{{Algorithm: algorithms.GCRA, Limit: keysBenchLimit}}
				res := make([]algorithms.Result, 1)
				return func(key string) bool {
					checks[0].Key = key
					if err := m.Allow(ctx, checks, res); err != nil || !res[0].Allowed {
						b.Errorf("Allow(%q) = %+v, %v", key, res[0], err)
						return false
					}
					return true
				}
			}
			warm := allow()
			for _, k := range storeKeys {
				warm(k)
			}
			var storeWall, storeCPU float64
			b.Run("store", func(b *testing.B) {
				storeWall, storeCPU = measure(b, func() func(*rand.Rand) bool {
					allow := allow()
					return func(rng *rand.Rand) bool { return allow(storeKeys[rng.IntN(n)]) }
				})
			})
			m, storeKeys = nil, nil

			em, err := memstore.New(memstore.Config{Now: now})
			if err != nil {
				b.Fatal(err)
			}
			e := newEngine(b, em, redlimit.Config{Rules: []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: keysBenchLimit}}})
			decide := func() func(material string) bool {
				in := []redlimit.Input{{Rule: "ip"}}
				d := new(redlimit.Decision)
				return func(material string) bool {
					in[0].Material = material
					e.Decide(ctx, in, d)
					if !d.Allowed {
						b.Errorf("Decide(%q): denied (%v)", material, d.Err)
					}
					return d.Allowed
				}
			}
			warm = decide()
			for _, mat := range materials {
				warm(mat)
			}
			b.Run("engine", func(b *testing.B) {
				wall, cpu := measure(b, func() func(*rand.Rand) bool {
					decide := decide()
					return func(rng *rand.Rand) bool { return decide(materials[rng.IntN(n)]) }
				})
				if storeWall > 0 {
					b.ReportMetric(storeWall/wall, "ratio")
					b.ReportMetric(storeCPU/cpu, "cpu-ratio")
				}
			})
		})
	}
}

// selfCPU returns the CPU time this process has used, user and system, in
// ns.
func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
