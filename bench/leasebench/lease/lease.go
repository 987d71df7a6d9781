// Package lease measures quota blocks (redlimit.Rule.Blocks, docs/leasing.md)
// on a redis-server it is given (make leasebench starts one; make peerbench
// runs it after its tables, on its own server):
//
//   - throughput, in rounds that interleave the contenders: one engine
//     with one caller on a hot key answered from blocks, against a bare
//     EVALSHA of `return 1` (the floor of one round trip per check), and
//     the same with a GCRA rule (whose blocks are charged as of their
//     hold's end, see algorithms.Blocker); four
//     engines (each its own go-redis client) with eight callers each on
//     one hot key, with blocks and without;
//   - exactness, over many short windows: four engines × eight callers
//     offering far more than the limit of a fixed window rule with blocks,
//     counting the admissions of every window, the share of the limit
//     each window admitted, and the Redis commands per admitted request.
//
// An admission is counted in the window holding both the instant before
// its Decide and the instant after (the machine's clock is the server's:
// one machine); one whose Decide straddles a boundary is counted in the
// window whose end its Result's ResetAfter names, and reported.
//
// [Run] ends with the line
//
//	lease: hot c=1 X.XX× bare EVALSHA; 4 instances X.XX× unleased; over-admission N in W windows; worst saturated window admitted P% of the limit; Redis calls per admitted request C
package lease

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// Config is what Run measures.
type Config struct {
	Duration time.Duration // length of each throughput measurement
	Rounds   int           // interleaved throughput rounds (the median is reported)
	Window   time.Duration // window of the exactness run
	Windows  int           // windows of the exactness run
	Limit    int64         // limit per window of the exactness run
}

// Run measures quota blocks on the redis-server at addr and writes what
// it found to w, ending with the lease: line, which it also returns.
func Run(w io.Writer, addr string, cfg Config) string {
	b := &bench{addr: addr}
	fmt.Fprintf(w, "leasebench: %s, %d CPUs, redis-server at %s\n", CPUModel(), runtime.NumCPU(), addr)

	var hot, hotGCRA, four []float64
	for r := range cfg.Rounds {
		bare := b.bare(cfg.Duration)
		leased1 := b.throughput(fmt.Sprintf("t%d.l1", r), algorithms.FixedWindow, 1, 1, true, cfg.Duration)
		gcra1 := b.throughput(fmt.Sprintf("t%d.g1", r), algorithms.GCRA, 1, 1, true, cfg.Duration)
		unleased4 := b.throughput(fmt.Sprintf("t%d.u4", r), algorithms.FixedWindow, 4, 8, false, cfg.Duration)
		leased4 := b.throughput(fmt.Sprintf("t%d.l4", r), algorithms.FixedWindow, 4, 8, true, cfg.Duration)
		fmt.Fprintf(w, "round %d: bare EVALSHA c=1 %.0f/s; blocks c=1 %.0f/s (%.2f×), gcra blocks c=1 %.0f/s (%.2f×); 4×8 unleased %.0f/s; 4×8 blocks %.0f/s (%.2f×)\n",
			r, bare, leased1, leased1/bare, gcra1, gcra1/bare, unleased4, leased4, leased4/unleased4)
		hot = append(hot, leased1/bare)
		hotGCRA = append(hotGCRA, gcra1/bare)
		four = append(four, leased4/unleased4)
	}
	fmt.Fprintf(w, "gcra: hot c=1 %.2f× bare EVALSHA (median of %d rounds)\n", median(hotGCRA), cfg.Rounds)

	ex := b.exactness(w, cfg.Window, cfg.Windows, cfg.Limit)
	if ex.admitted == 0 {
		// every check refused: the bench no longer measures the limiter
		log.Fatalf("leasebench: the exactness run admitted nothing in %d windows (%d checks not decided)", ex.windows, failed.Load())
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(w, "%d checks were not decided (the store failed or timed out: denied)\n", n)
	}
	fmt.Fprintf(w, "exactness: %d windows of %v, limit %d, 4 instances × 8 callers: admitted %d, offered %d (%.1f× the limit); %d admissions straddled a boundary; %d Redis commands from window 1 on\n",
		ex.windows, cfg.Window, cfg.Limit, ex.admitted, ex.offered, float64(ex.offered)/float64(int64(ex.windows)*cfg.Limit), ex.straddled, ex.commands)
	line := fmt.Sprintf("lease: hot c=1 %.2f× bare EVALSHA; 4 instances %.2f× unleased; over-admission %d in %d windows; worst saturated window admitted %.2f%% of the limit; Redis calls per admitted request %.4f",
		median(hot), median(four), ex.over, ex.windows, ex.worst*100, ex.perAdmitted)
	fmt.Fprintln(w, line)
	return line
}

type bench struct{ addr string }

// failed counts the checks the store did not decide (Decision.Failed).
var failed atomic.Int64

// client returns a go-redis client of its own, counting its commands in n
// when n is not nil.
func (b *bench) client(n *atomic.Int64) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: 64, MaxRetries: -1})
	if n != nil {
		c.AddHook(counter{n})
	}
	return c
}

var returnOne = redis.NewScript("return 1")

// bare measures EVALSHA of `return 1` from one caller, per second.
func (b *bench) bare(d time.Duration) float64 {
	c := b.client(nil)
	defer c.Close()
	ctx := context.Background()
	if err := returnOne.Load(ctx, c).Err(); err != nil {
		log.Fatalf("leasebench: %v", err)
	}
	return rate(1, d, func() {
		if err := returnOne.EvalSha(ctx, c, nil).Err(); err != nil {
			log.Fatalf("leasebench: %v", err)
		}
	})
}

// engines returns n engines, each on a client of its own, with one rule
// of algorithm alg and limit, with blocks or without.
func (b *bench) engines(prefix string, alg algorithms.Algorithm, n int, limit algorithms.Limit, blocks bool, calls *atomic.Int64) ([]*redlimit.Limiter, func()) {
	var es []*redlimit.Limiter
	var clients []*redis.Client
	for range n {
		c := b.client(calls)
		clients = append(clients, c)
		store, err := redisstore.New(c, redisstore.Config{})
		if err != nil {
			log.Fatalf("leasebench: %v", err)
		}
		rule := redlimit.Rule{Name: "hot", Algorithm: alg, Limit: limit}
		if blocks {
			rule.Blocks = &redlimit.BlockConfig{}
		}
		// FailClosed: a request the store did not decide (a call past the
		// timeout on a busy machine) is denied, not decided by a fallback
		// of the instance's own, which would count apart
		e, err := redlimit.New(store, redlimit.Config{Prefix: "lb." + prefix, Rules: []redlimit.Rule{rule}, Timeout: 2 * time.Second,
			OnError: redlimit.FailClosed, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			log.Fatalf("leasebench: %v", err)
		}
		es = append(es, e)
	}
	return es, func() {
		for _, e := range es {
			e.Close()
		}
		for _, c := range clients {
			c.Close()
		}
	}
}

// throughput measures Decide on one hot key that never runs out, from
// callers goroutines on each of n engines, in checks per second.
func (b *bench) throughput(prefix string, alg algorithms.Algorithm, n, callers int, blocks bool, d time.Duration) float64 {
	limit := algorithms.Limit{Rate: 1 << 38, Period: time.Hour} // below 2^39: a fixed window with blocks
	if alg == algorithms.GCRA {
		limit.Rate = 1_000_000_000 // a bucket's scaled numbers stay below 2^53
	}
	es, done := b.engines(prefix, alg, n, limit, blocks, nil)
	defer done()
	return rateOn(len(es)*callers, d, func(g int) func() {
		e := es[g%len(es)]
		in := []redlimit.Input{{Rule: "hot", Material: "hot"}}
		var dec redlimit.Decision
		return func() {
			e.Decide(context.Background(), in, &dec)
			if dec.Failed {
				failed.Add(1)
			}
		}
	})
}

// exact is what the exactness run found.
type exact struct {
	windows, straddled int
	admitted, offered  int64
	over               int64
	worst              float64
	commands           int64
	perAdmitted        float64
}

// span is an admission whose Decide began in window from and ended in
// window to: it counts in one of them.
type span struct{ from, to int64 }

// exactness offers 4 engines × 8 callers' load to a fixed window rule of
// limit per window, with blocks, for windows windows.
//
// An admission whose Decide began and ended in one window counts in it
// (the machine's clock is the server's: one machine). One that straddled
// a boundary counts in one of the windows it spanned, chosen so as to
// exceed the limit least (earliest deadline first, which is optimal): the
// over-admission reported is what the measurements prove.
func (b *bench) exactness(out io.Writer, window time.Duration, windows int, limit int64) exact {
	var calls atomic.Int64
	es, done := b.engines("exact", algorithms.FixedWindow, 4, algorithms.Limit{Rate: limit, Period: window}, true, &calls)
	defer done()
	// start on a window boundary
	p := window.Microseconds()
	now := time.Now().UnixMicro()
	w0 := now/p + 1
	time.Sleep(time.Duration(w0*p-now) * time.Microsecond)
	end := time.UnixMicro((w0 + int64(windows)) * p)
	n := windows + 2
	type tally struct {
		admitted, offered []int64
		spans             []span
	}
	tallies := make([]tally, len(es)*8)
	var steadyStart atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for g := range tallies {
		t := &tallies[g]
		t.admitted, t.offered = make([]int64, n), make([]int64, n)
		e := es[g%len(es)]
		wg.Go(func() {
			in := []redlimit.Input{{Rule: "hot", Material: "hot"}}
			var d redlimit.Decision
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				e.Decide(context.Background(), in, &d)
				t1 := time.Now()
				if d.Failed {
					failed.Add(1)
				}
				w := t0.UnixMicro()/p - w0
				if w < 0 {
					continue
				}
				if w >= 1 {
					once.Do(func() { steadyStart.Store(calls.Load()) })
				}
				t.offered[w]++
				if !d.Allowed {
					continue
				}
				if to := t1.UnixMicro()/p - w0; to != w {
					t.spans = append(t.spans, span{w, to})
					continue
				}
				t.admitted[w]++
			}
		})
	}
	wg.Wait()
	counts, offered := make([]int64, n), make([]int64, n)
	var spans []span
	for _, t := range tallies {
		for w := range n {
			counts[w] += t.admitted[w]
			offered[w] += t.offered[w]
		}
		spans = append(spans, t.spans...)
	}
	// place the straddlers, earliest deadline first
	slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	var pending []span // sorted by to
	ex := exact{windows: windows, worst: 1, straddled: len(spans)}
	for w := range int64(n) {
		for len(spans) > 0 && spans[0].from == w {
			i, _ := slices.BinarySearchFunc(pending, spans[0], func(a, b span) int { return int(a.to - b.to) })
			pending = slices.Insert(pending, i, spans[0])
			spans = spans[1:]
		}
		for len(pending) > 0 && (counts[w] < limit || pending[0].to == w) {
			counts[w]++
			pending = pending[1:]
		}
	}
	steadyAdmitted := int64(0)
	for w := range windows {
		ex.admitted += counts[w]
		ex.offered += offered[w]
		ex.over += max(counts[w]-limit, 0)
		if counts[w] > limit || os.Getenv("LEASEBENCH_DEBUG") != "" {
			fmt.Fprintf(out, "window %d: admitted %d, offered %d\n", w, counts[w], offered[w])
		}
		if offered[w] >= 2*limit {
			ex.worst = min(ex.worst, float64(counts[w])/float64(limit))
		}
		if w >= 1 {
			steadyAdmitted += counts[w]
		}
	}
	ex.commands = calls.Load() - steadyStart.Load()
	ex.perAdmitted = float64(ex.commands) / float64(max(steadyAdmitted, 1))
	return ex
}

// rate runs f from callers goroutines for d and returns calls per second.
func rate(callers int, d time.Duration, f func()) float64 {
	return rateOn(callers, d, func(int) func() { return f })
}

// rateOn runs the function mk(g) returns from goroutine g, for each of
// callers goroutines, for d, after a warm-up of d/10, and returns calls
// per second.
func rateOn(callers int, d time.Duration, mk func(g int) func()) float64 {
	var count atomic.Int64
	var measuring, stop atomic.Bool
	var wg sync.WaitGroup
	for g := range callers {
		f := mk(g)
		wg.Go(func() {
			var n int64
			for !stop.Load() {
				f()
				if measuring.Load() {
					n++
				}
			}
			count.Add(n)
		})
	}
	time.Sleep(d / 10)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(d)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	return float64(count.Load()) / elapsed.Seconds()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// counter counts the commands a client sends (a pipeline's each).
type counter struct{ n *atomic.Int64 }

func (c counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// CPUModel is the machine's CPU model, from /proc/cpuinfo.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
