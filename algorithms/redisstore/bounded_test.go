package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The bounds of TestBoundedWork.
const (
	// maxGoroutines is the most goroutines the process may run while Redis
	// is in trouble, callers included.
	maxGoroutines = 2000
	// settleWithin is how soon after the fault's end the goroutines must be
	// back (within 5%) to what they were before it: docs/redis.md states
	// the figures measured, up to 3 s; the test allows more, for a loaded
	// machine.
	settleWithin = 10 * time.Second
)

// TestBoundedWork: a Redis in trouble under load, through the engine with
// its default Timeout (100 ms) and the FailOpen policy (every call goes to
// the store, none to a fallback): a single redis-server stopped (SIGSTOP)
// for 3 s under 256 callers, and one master of a 3-master cluster stopped
// for 3 s under 64 callers whose calls span slots, each with a client that
// honours deadlines (ContextTimeoutEnabled) and one that does not
// (go-redis's default). The process runs fewer than 2000 goroutines
// throughout, and is back (within 5%) to its goroutines of before the
// fault soon after it ends. The figures (goroutines, heap, latencies,
// which a test on a shared machine cannot bound) are logged;
// docs/redis.md ("Bounded work") quotes them.
func TestBoundedWork(t *testing.T) {
	redistest.RequireCluster(t)
	for _, honour := range []bool{false, true} {
		t.Run(fmt.Sprint("single node/ContextTimeoutEnabled=", honour), func(t *testing.T) {
			srv, err := redistest.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: honour})
			t.Cleanup(func() { client.Close() })
			store, err := redisstore.New(client, redisstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			rules := []redlimit.Rule{{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1_000_000)}}
			w := underFault(t, store, rules, 256, func(g, i int) []redlimit.Input {
				return []redlimit.Input{{Rule: "user", Material: fmt.Sprint("u", g)}}
			}, func() { pause(t, srv) })
			w.check(t)
		})
	}
	t.Run("cluster", func(t *testing.T) {
		cl, err := redistest.StartCluster(3, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		masters, err := cl.Masters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, honour := range []bool{false, true} {
			t.Run(fmt.Sprint("ContextTimeoutEnabled=", honour), func(t *testing.T) {
				if err := cl.WaitHealthy(30 * time.Second); err != nil {
					t.Fatal(err)
				}
				client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: honour})
				t.Cleanup(func() { client.Close() })
				var refundErrors atomic.Int64
				store, err := redisstore.New(client, redisstore.Config{OnRefundError: func(error) { refundErrors.Add(1) }})
				if err != nil {
					t.Fatal(err)
				}
				limit := algorithms.PerSecond(1_000_000)
				rules := []redlimit.Rule{
					{Name: "user", Algorithm: algorithms.GCRA, Limit: limit},
					{Name: "ip", Algorithm: algorithms.FixedWindow, Limit: limit},
				}
				// two key materials a call, mostly in slots of two masters
				w := underFault(t, store, rules, 64, func(g, i int) []redlimit.Input {
					return []redlimit.Input{{Rule: "user", Material: fmt.Sprint("u", g, "-", i%32)}, {Rule: "ip", Material: fmt.Sprint("ip", g)}}
				}, func() {
					pause(t, masters[0])
					go clusterBack(t, masters[1], time.Now())
				})
				t.Logf("%d refunds and cancels failed or not started (%d not started, at most %d run at once)", refundErrors.Load(), redisstore.Dropped(store), redisstore.MaxDetached)
				w.check(t)
			})
		}
	})
}

// pause stops srv (SIGSTOP) for 3 s.
func pause(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
}

// clusterBack logs how long after since node, a master, reports the
// cluster ok again (CLUSTER INFO), polling every 20 ms for up to 10 s.
func clusterBack(t *testing.T, node *redistest.Server, since time.Time) {
	c := node.NodeClient()
	defer c.Close()
	for time.Since(since) < 10*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.ClusterInfo(ctx).Result()
		cancel()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			t.Logf("cluster_state ok again %v after the master answers", time.Since(since).Round(10*time.Millisecond))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watch is what underFault saw.
type watch struct {
	before        int           // goroutines before the fault, under the load (the most in the second before it)
	peak          int           // most goroutines from the fault's start on
	settled       time.Duration // after the fault's end, from when the goroutines stayed within 5% of before for 1 s; 0: never
	heapBefore    uint64        // most HeapInuse before the fault
	heapPeak      uint64        // most HeapInuse from the fault's start on
	calls, failed int64
	latency       latencies
	sched         redistest.SchedHist // the scheduler's latencies, from 1 s before the fault on
	timeout       time.Duration
	faultAt       time.Duration
}

// underFault runs callers goroutines deciding inputs(g, i) on an engine
// over store (rules, default Timeout, FailOpen) for 1 s, then during
// fault, then until the goroutines are back to their count before it (at
// most settleWithin), sampling goroutines every 10 ms and HeapInuse every
// 100 ms.
func underFault(t *testing.T, store algorithms.Backend, rules []redlimit.Rule, callers int, inputs func(g, i int) []redlimit.Input, fault func()) *watch {
	t.Helper()
	e, err := redlimit.New(store, redlimit.Config{Rules: rules, OnError: redlimit.FailOpen, NoDenyCache: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	w := &watch{timeout: 100 * time.Millisecond}
	var lateMu sync.Mutex
	var late [][2]time.Duration
	t0 := time.Now()
	defer func() {
		hist := map[time.Duration]int{}
		for _, l := range late {
			hist[l[0].Truncate(100*time.Millisecond)]++
		}
		t.Logf("calls over 150 ms, by the 100 ms in which they started, from the load's start: %v; the fault at %v", hist, w.faultAt.Round(time.Millisecond))
	}()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			var d redlimit.Decision
			for i := 0; !stop.Load(); i++ {
				start := time.Now()
				e.Decide(context.Background(), inputs(g, i), &d)
				w.latency.add(time.Since(start))
				if el := time.Since(start); el > 150*time.Millisecond {
					lateMu.Lock()
					late = append(late, [2]time.Duration{start.Sub(t0), el})
					lateMu.Unlock()
				}
				atomic.AddInt64(&w.calls, 1)
				if d.Err != nil {
					atomic.AddInt64(&w.failed, 1)
				}
			}
		})
	}
	type sample struct {
		at time.Time
		n  int
	}
	var (
		mu      sync.Mutex
		samples []sample
		heap    []sample // n: HeapInuse in KiB
	)
	samplerDone := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				s := sample{now, runtime.NumGoroutine()}
				var h sample
				if i%10 == 0 {
					runtime.ReadMemStats(&ms)
					h = sample{now, int(ms.HeapInuse >> 10)}
				}
				mu.Lock()
				samples = append(samples, s)
				if h.n > 0 {
					heap = append(heap, h)
				}
				mu.Unlock()
			}
		}
	}()
	time.Sleep(time.Second) // warm: connections, scripts loaded
	w.latency.reset()
	sched0 := redistest.SchedLatencies()
	faultStart := time.Now().Add(time.Second)
	time.Sleep(time.Second)
	w.faultAt = time.Since(t0)
	fault()
	faultEnd := time.Now()
	// wait until the goroutines are back to their count before the fault
	mu.Lock()
	for _, s := range samples {
		if s.at.After(faultStart.Add(-time.Second)) && s.at.Before(faultStart) {
			w.before = max(w.before, s.n)
		}
	}
	mu.Unlock()
	// 3 s after the fault's end, name the goroutines over the count before
	go func() {
		time.Sleep(time.Until(faultEnd.Add(3 * time.Second)))
		if n := runtime.NumGoroutine(); n > w.before && !stop.Load() {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Logf("3 s after the fault's end, %d goroutines (%d before); the most common:\n%s", n, w.before, commonStacks(buf.String(), 6))
		}
	}()
	// settled: from when on the count stayed within 5% of before for 1 s
	// (the count under load moves by a few goroutines from one 10 ms
	// sample to the next)
	near := w.before + max(w.before/20, 4)
	for deadline := faultEnd.Add(settleWithin + time.Second); time.Now().Before(deadline) && w.settled == 0; {
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		var from time.Time
		for _, s := range samples {
			switch {
			case !s.at.After(faultEnd):
			case s.n > near:
				from = time.Time{}
			case from.IsZero():
				from = s.at
			case s.at.Sub(from) >= time.Second && from.Sub(faultEnd) <= settleWithin:
				w.settled = max(from.Sub(faultEnd), time.Nanosecond)
			}
			if w.settled > 0 {
				break
			}
		}
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()
	w.sched = redistest.SchedLatencies().Since(sched0)
	close(quit)
	<-samplerDone
	for _, s := range samples {
		if !s.at.Before(faultStart) {
			w.peak = max(w.peak, s.n)
		}
	}
	for _, h := range heap {
		switch {
		case h.at.Before(faultStart):
			w.heapBefore = max(w.heapBefore, uint64(h.n)<<10)
		default:
			w.heapPeak = max(w.heapPeak, uint64(h.n)<<10)
		}
	}
	return w
}

// check reports w and fails t when it broke a bound.
func (w *watch) check(t *testing.T) {
	t.Helper()
	p50, p99, p999, most := w.latency.quantiles()
	t.Logf("goroutines: %d before the fault, %d at most from its start, back within 5%% of %d %v after its end; HeapInuse %.1f MiB before, %.1f MiB at most",
		w.before, w.peak, w.before, w.settled, float64(w.heapBefore)/(1<<20), float64(w.heapPeak)/(1<<20))
	t.Logf("%d calls from 1 s before the fault on, %d failed; latency p50 %v, p99 %v, p99.9 %v, max %v; %d over Timeout+50ms",
		w.calls, w.failed, p50, p99, p999, most, w.latency.over(w.timeout+50*time.Millisecond))
	t.Logf("the scheduler's latency (a goroutine runnable until it runs): p99 %v, p99.9 %v, max %v", w.sched.Quantile(0.99), w.sched.Quantile(0.999), w.sched.Quantile(1))
	if w.peak >= maxGoroutines {
		t.Errorf("%d goroutines at most, want fewer than %d", w.peak, maxGoroutines)
	}
	if w.settled == 0 {
		t.Errorf("goroutines not back within 5%% of %d within %v of the fault's end", w.before, settleWithin)
	}
}

// latencies is a histogram of call latencies, by the millisecond up to
// 10 s.
type latencies struct {
	mu      sync.Mutex
	buckets [10_001]int64
	most    time.Duration
}

func (l *latencies) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.buckets[:])
	l.most = 0
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buckets[min(int(d/time.Millisecond), len(l.buckets)-1)]++
	l.most = max(l.most, d)
}

// quantiles returns the 50th, 99th and 99.9th percentiles (to the ms
// above) and the maximum.
func (l *latencies) quantiles() (p50, p99, p999, most time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, c := range l.buckets {
		n += c
	}
	qs := []float64{0.5, 0.99, 0.999}
	out := make([]time.Duration, len(qs))
	var seen int64
	j := 0
	for ms, c := range l.buckets {
		seen += c
		for j < len(qs) && float64(seen) >= qs[j]*float64(n) {
			out[j] = time.Duration(ms+1) * time.Millisecond
			j++
		}
	}
	return out[0], out[1], out[2], l.most
}

// over returns how many latencies were above d (to the ms).
func (l *latencies) over(d time.Duration) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for ms := int(d / time.Millisecond); ms < len(l.buckets); ms++ {
		n += l.buckets[ms]
	}
	return n
}

// BenchmarkDeadlines: one GCRA check a call through the engine (default
// Timeout) on a store whose client honours deadlines
// (ContextTimeoutEnabled: the engine calls the store directly) and on one
// whose client does not (go-redis's default: the engine calls it from a
// guard goroutine it can stop waiting for), serially and from 64
// goroutines: what each option costs a call.
func BenchmarkDeadlines(b *testing.B) {
	srv := redistest.Require(b)
	prefix := redistest.Prefix(b)
	for _, honour := range []bool{true, false} {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: honour, PoolSize: 64})
		b.Cleanup(func() { client.Close() })
		store, err := redisstore.New(client, redisstore.Config{})
		if err != nil {
			b.Fatal(err)
		}
		rules := []redlimit.Rule{{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1_000_000)}}
		e, err := redlimit.New(store, redlimit.Config{Rules: rules, Prefix: "bench" + fmt.Sprint(honour), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		in := []redlimit.Input{{Rule: "user", Material: prefix}}
		b.Run(fmt.Sprint("ContextTimeoutEnabled=", honour, "/serial"), func(b *testing.B) {
			b.ReportAllocs()
			var d redlimit.Decision
			for b.Loop() {
				if e.Decide(context.Background(), in, &d); d.Err != nil {
					b.Fatal(d.Err)
				}
			}
		})
		b.Run(fmt.Sprint("ContextTimeoutEnabled=", honour, "/goroutines=64"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // GOMAXPROCS 2 × 32
			b.RunParallel(func(pb *testing.PB) {
				var d redlimit.Decision
				for pb.Next() {
					if e.Decide(context.Background(), in, &d); d.Err != nil {
						b.Error(d.Err)
						return
					}
				}
			})
		})
	}
}

// commonStacks returns the first n groups of a goroutine profile written
// with debug 1 (the most common stacks first), each with its count and
// its innermost frames of this module or go-redis.
func commonStacks(profile string, n int) string {
	var out strings.Builder
	groups := strings.Split(profile, "\n\n")
	for i, g := range groups {
		if i == 0 || i > n {
			continue
		}
		lines := strings.Split(g, "\n")
		out.WriteString(strings.Fields(lines[0])[0])
		kept := 0
		for _, l := range lines[1:] {
			if kept < 3 && strings.HasPrefix(l, "#") && (strings.Contains(l, "redlimit") || strings.Contains(l, "go-redis")) {
				f := strings.Fields(l)
				out.WriteString(" " + f[len(f)-2])
				kept++
			}
		}
		out.WriteString("\n")
	}
	return out.String()
}
