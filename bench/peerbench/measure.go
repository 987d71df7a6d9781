package main

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runResult is one measurement of one limiter in one scenario.
type runResult struct {
	calls, allowed, errs int64
	firstErr             error
	elapsed              time.Duration   // time spent calling
	wall                 time.Duration   // from first to last call, others' turns included
	lat                  []time.Duration // each call's duration, when asked for

	trips, sent int64   // from the client hook
	srvCalls    int64   // commandstats calls, commands run inside scripts included
	srvUsec     float64 // commandstats usec of the commands the client sent
	cpu         float64 // redis-server CPU seconds (user+sys)
	clientCPU   float64 // this process's CPU seconds (user+sys): limiter, go-redis, harness
}

// checks counts the calls that got an answer; errors are reported apart.
func (r runResult) checks() int64 { return r.calls - r.errs }

// perCheck divides by the answered calls.
func (r runResult) perCheck(v float64) float64 { return v / float64(max(r.checks(), 1)) }

func (r runResult) rate() float64 { return float64(r.checks()) / r.elapsed.Seconds() }

func (r runResult) percentile(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// add accumulates o, a later slice of the same measurement, into r.
func (r *runResult) add(o runResult) {
	r.calls += o.calls
	r.allowed += o.allowed
	r.errs += o.errs
	if r.firstErr == nil {
		r.firstErr = o.firstErr
	}
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
	r.trips += o.trips
	r.sent += o.sent
	r.srvCalls += o.srvCalls
	r.srvUsec += o.srvUsec
	r.cpu += o.cpu
	r.clientCPU += o.clientCPU
}

// keyRing hands out keys round robin, carrying on from one run to the next.
type keyRing struct {
	keys []string
	next atomic.Uint64
}

func (k *keyRing) key() string {
	if len(k.keys) == 1 {
		return k.keys[0]
	}
	return k.keys[(k.next.Add(1)-1)%uint64(len(k.keys))]
}

// run calls a from conc goroutines for d, taking keys from ring, and reads
// what the server did meanwhile.
func (e *env) run(ctx context.Context, a allowFunc, conc int, d time.Duration, ring *keyRing, latency bool) (runResult, error) {
	cpu0, err := e.resetStats(ctx)
	if err != nil {
		return runResult{}, err
	}
	e.counter.reset()

	type part struct {
		calls, allowed, errs int64
		err                  error
		lat                  []time.Duration
	}
	parts := make([]part, conc)
	self0 := selfCPU()
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for g := range parts {
		wg.Go(func() {
			p := &parts[g]
			if latency {
				p.lat = make([]time.Duration, 0, 1<<15)
			}
			for !stop.Load() {
				key := ring.key()
				t0 := time.Now()
				ok, err := a(ctx, key)
				if latency {
					p.lat = append(p.lat, time.Since(t0))
				}
				p.calls++
				switch {
				case err != nil:
					p.errs++
					if p.err == nil {
						p.err = err
					}
				case ok:
					p.allowed++
				}
			}
		})
	}
	wg.Wait()
	r := runResult{elapsed: time.Since(start), clientCPU: selfCPU() - self0}
	for _, p := range parts {
		r.calls += p.calls
		r.allowed += p.allowed
		r.errs += p.errs
		r.lat = append(r.lat, p.lat...)
		if r.firstErr == nil {
			r.firstErr = p.err
		}
	}
	if err := e.readStats(ctx, &r, cpu0); err != nil {
		return r, err
	}
	return r, nil
}

// memory is what a limiter stores.
type memory struct {
	perKey     float64 // used_memory growth per checked key, bytes, connections' buffers excepted
	keys       int64   // Redis keys after the checks
	sample     string  // one of them
	sampleSize int64   // its MEMORY USAGE, bytes
}

// memory flushes the server, checks each of keys once, serially on one
// connection, and reports how much the server's memory grew. The first key
// only warms the connection up and is not counted.
func (e *env) memory(ctx context.Context, a allowFunc, keys []string) (memory, error) {
	warm, keys := keys[0], keys[1:]
	if err := e.admin.FlushAll(ctx).Err(); err != nil {
		return memory{}, err
	}
	used := func() (float64, error) {
		info, err := e.info(ctx, "memory")
		if err != nil {
			return 0, err
		}
		return stored(info)
	}
	if _, err := a(ctx, warm); err != nil {
		return memory{}, err
	}
	before, err := used()
	if err != nil {
		return memory{}, err
	}
	for _, k := range keys {
		if _, err := a(ctx, k); err != nil {
			return memory{}, err
		}
	}
	time.Sleep(300 * time.Millisecond) // let Redis finish rehashing its key table
	after, err := used()
	if err != nil {
		return memory{}, err
	}
	m := memory{perKey: (after - before) / float64(len(keys))}
	if m.keys, err = e.admin.DBSize(ctx).Result(); err != nil {
		return m, err
	}
	m.keys-- // the warm key
	if m.sample, err = e.admin.RandomKey(ctx).Result(); err != nil {
		return m, err
	}
	m.sampleSize, err = e.admin.MemoryUsage(ctx, m.sample, 0).Result()
	return m, err
}

// stored is the memory INFO's fields say the server holds besides its
// connections: used_memory less their buffers (mem_clients_normal). Redis
// shrinks an idle connection's query buffer seconds after its last
// command, and such a free (the rueidis rows' connections stay open)
// would otherwise land in whichever limiter's count runs then.
func stored(info map[string]string) (float64, error) {
	u, err := strconv.ParseFloat(info["used_memory"], 64)
	if err != nil {
		return 0, err
	}
	c, err := strconv.ParseFloat(info["mem_clients_normal"], 64)
	return u - c, err
}

// allocs returns the Go heap allocations and bytes per call of a, serial,
// on one key: the whole client side (adapter, library, go-redis).
func allocs(ctx context.Context, a allowFunc, key string, n int) (float64, float64, error) {
	for range 100 {
		if _, err := a(ctx, key); err != nil {
			return 0, 0, err
		}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		if _, err := a(ctx, key); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / float64(n), float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n), nil
}

// verdict is the outcome of the correctness test.
type verdict struct {
	allowed, errs int64
	firstErr      error
	elapsed       time.Duration
}

// correctness lets goroutines goroutines make calls calls each on one fresh
// key, alternating between two instances of the limiter on two clients, as
// two application servers would, all released at once.
func correctness(ctx context.Context, inst [2]allowFunc, key string, goroutines, calls int) verdict {
	var v verdict
	var mu sync.Mutex
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-ready
			for range calls {
				ok, err := inst[g%2](ctx, key)
				mu.Lock()
				switch {
				case err != nil:
					v.errs++
					if v.firstErr == nil {
						v.firstErr = err
					}
				case ok:
					v.allowed++
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	close(ready)
	wg.Wait()
	v.elapsed = time.Since(start)
	return v
}

// selfCPU is the CPU time this process has used, user and system, in
// seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
