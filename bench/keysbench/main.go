// Keysbench measures the engine's cost per check as the number of live
// keys grows, against the store alone, and prints a Markdown table.
//
// For each N, 64 goroutines check keys drawn uniformly at random from N
// distinct key materials (IPv4 addresses), on memstore with a fixed clock:
// "store" asks a memstore.Store with the storage keys built beforehand,
// "engine" asks an redlimit.Limiter of one GCRA rule, on a memstore of its
// own, with the materials. Both hold their N keys before the clock starts.
// The two alternate in short slices (store first in one pair, engine
// first in the next), so that a machine whose load changes moves both
// alike: each pair gives a ratio, engine checks/s over store checks/s, and
// the table reports the medians, the ratio's spread (min–max over the
// pairs) and the ratio at N over the ratio at the smallest N. allocs is
// allocations per check, cpu the process's CPU time (user and system) per
// check (cpu ratio: the store's over the engine's), which the machine's
// load moves less than checks/s, but which does not count the time a
// lock leaves a processor idle.
//
// Usage, from the repository root:
//
//	go run ./bench/keysbench -pairs 20 -slice 100ms
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// limit is never reached: every check is an allowed one.
var limit = algorithms.Limit{Rate: 1 << 30, Period: time.Hour}

func main() {
	pairs := flag.Int("pairs", 20, "store/engine pairs of slices per key count")
	slice := flag.Duration("slice", 100*time.Millisecond, "length of one slice")
	goroutines := flag.Int("goroutines", 64, "goroutines checking at once")
	counts := flag.String("keys", "1000,4000,16000,100000,1000000", "key counts, comma-separated")
	flag.Parse()
	log.SetFlags(0)

	var ns []int
	for f := range strings.SplitSeq(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 1<<24 {
			log.Fatalf("keysbench: -keys: %q is not a count between 1 and 2^24", f)
		}
		ns = append(ns, n)
	}
	fmt.Printf("keysbench: %d goroutines, GOMAXPROCS %d, %d pairs of %v slices, %s\n\n",
		*goroutines, runtime.GOMAXPROCS(0), *pairs, *slice, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| keys | store checks/s | engine checks/s | ratio (min–max) | ratio ÷ ratio at first N | allocs/check store, engine | cpu ns/check store, engine | cpu ratio |")
	fmt.Println("| ---: | ---: | ---: | --- | ---: | --- | --- | ---: |")
	var first float64
	for _, n := range ns {
		r := measure(n, *pairs, *slice, *goroutines)
		ratio := median(r.ratios)
		if first == 0 {
			first = ratio
		}
		fmt.Printf("| %d | %.0f | %.0f | %.3f (%.3f–%.3f) | %.2f | %.3f, %.3f | %.0f, %.0f | %.3f |\n",
			n, median(r.store), median(r.engine), ratio, slices.Min(r.ratios), slices.Max(r.ratios),
			ratio/first, r.storeAllocs, r.engineAllocs, r.storeCPU, r.engineCPU, r.storeCPU/r.engineCPU)
	}
}

// result is what measure saw for one key count: checks/s per slice, a
// ratio per pair, and totals per check.
type result struct {
	store, engine, ratios     []float64
	storeAllocs, engineAllocs float64
	storeCPU, engineCPU       float64 // ns per check
}

func measure(n, pairs int, slice time.Duration, goroutines int) result {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	materials := make([]string, n)
	storeKeys := make([]string, n)
	for i := range materials {
		materials[i] = material(i)
		storeKeys[i] = "rate:ip:gcra:{" + materials[i] + "}"
	}

	store, err := memstore.New(memstore.Config{Now: now})
	if err != nil {
		log.Fatal(err)
	}
	storeChecker := func() func(i int) bool {
		checks := []algorithms.Check{{Algorithm: algorithms.GCRA, Limit: limit}}
		res := make([]algorithms.Result, 1)
		return func(i int) bool {
			checks[0].Key = storeKeys[i]
			err := store.Allow(ctx, checks, res)
			return err == nil && res[0].Allowed
		}
	}
	em, err := memstore.New(memstore.Config{Now: now})
	if err != nil {
		log.Fatal(err)
	}
	e, err := redlimit.New(em, redlimit.Config{
		Rules:  []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: limit}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	engineChecker := func() func(i int) bool {
		in := []redlimit.Input{{Rule: "ip"}}
		d := new(redlimit.Decision)
		return func(i int) bool {
			in[0].Material = materials[i]
			e.Decide(ctx, in, d)
			return d.Allowed
		}
	}
	// Every key once, then a short run of each to warm up.
	warmStore, warmEngine := storeChecker(), engineChecker()
	for i := range n {
		if !warmStore(i) || !warmEngine(i) {
			log.Fatalf("keysbench: key %d denied while warming up", i)
		}
	}
	run(storeChecker, n, slice, goroutines)
	run(engineChecker, n, slice, goroutines)
	runtime.GC()

	var res result
	var st, et sample // totals
	for p := range pairs {
		var s, en sample
		if p%2 == 0 {
			s, en = run(storeChecker, n, slice, goroutines), run(engineChecker, n, slice, goroutines)
		} else {
			en, s = run(engineChecker, n, slice, goroutines), run(storeChecker, n, slice, goroutines)
		}
		res.store = append(res.store, s.rate())
		res.engine = append(res.engine, en.rate())
		res.ratios = append(res.ratios, en.rate()/s.rate())
		st.add(s)
		et.add(en)
	}
	res.storeAllocs, res.engineAllocs = st.perCheck(float64(st.allocs)), et.perCheck(float64(et.allocs))
	res.storeCPU, res.engineCPU = st.perCheck(float64(st.cpu)), et.perCheck(float64(et.cpu))
	return res
}

// sample is one slice: checks done, wall time, allocations and CPU time.
type sample struct {
	checks int64
	wall   time.Duration
	allocs uint64
	cpu    int64 // ns
}

func (s *sample) add(o sample) {
	s.checks += o.checks
	s.wall += o.wall
	s.allocs += o.allocs
	s.cpu += o.cpu
}

func (s sample) perCheck(v float64) float64 { return v / float64(s.checks) }

func (s sample) rate() float64 { return float64(s.checks) / s.wall.Seconds() }

// run runs goroutines checkers, each checking keys drawn uniformly from
// [0, n), for about d and returns what they did.
func run(checker func() func(i int) bool, n int, d time.Duration, goroutines int) sample {
	var stop atomic.Bool
	var total atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	ready := make(chan struct{})
	for g := range goroutines {
		check := checker()
		r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
		check(r.IntN(n)) // a first check allocates the checker's Decision
		wg.Go(func() {
			<-ready
			var done int64
			for !stop.Load() {
				for range 64 {
					if !check(r.IntN(n)) {
						failed.Store(true)
					}
				}
				done += 64
			}
			total.Add(done)
		})
	}
	allocs0, cpu0 := allocs(), cpu()
	start := time.Now()
	close(ready)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	wall := time.Since(start)
	s := sample{checks: total.Load(), wall: wall, allocs: allocs() - allocs0, cpu: cpu() - cpu0}
	if failed.Load() {
		log.Fatal("keysbench: a check was denied or failed")
	}
	return s
}

// material returns the i-th key material, an IPv4 address in 10.0.0.0/8.
func material(i int) string {
	return "10." + strconv.Itoa(i>>16&0xFF) + "." + strconv.Itoa(i>>8&0xFF) + "." + strconv.Itoa(i&0xFF)
}

// allocs returns the heap allocations the process has made.
func allocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// cpu returns the CPU time the process has used, user and system, in ns.
func cpu() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
