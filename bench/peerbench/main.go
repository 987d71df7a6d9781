// Command peerbench measures redlimit against its peers on one Redis server,
// in one run: go-redis/redis_rate, ulule/limiter, throttled, and a bare
// EVALSHA of `return 1` as the floor of one round trip per check. It prints
// Markdown tables with absolute numbers and ratios against redlimit's GCRA.
//
//	make peerbench                       # from the repository root
//	go run . -duration 3s -rounds 5      # longer, steadier
//	go run . -redis 127.0.0.1:6390       # an existing server: it is FLUSHALLed
//
// Measurements of one scenario are interleaved between limiters, round after
// round, so that machine noise hits them all alike; the median round is shown.
// See docs/performance.md for what each number means.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/bench/leasebench/lease"
)

var (
	duration = flag.Duration("duration", 1500*time.Millisecond, "length of each throughput measurement")
	rounds   = flag.Int("rounds", 3, "interleaved rounds; the median is reported")
	addr     = flag.String("redis", "", "address of an existing redis-server to use instead of starting one (it is FLUSHALLed and its stats reset)")
	only     = flag.String("only", "", "a regular expression: run only the limiters whose name matches it (and redlimit gcra, the reference of every ratio)")
	scOnly   = flag.String("scenarios", "", "a regular expression: run only the throughput scenarios whose name matches it")
	leasing  = flag.Int("lease-windows", 120, "windows of 500ms of the quota leasing run after the tables (bench/leasebench/lease); 0 leaves it out")
	instrN   = flag.Int("instructions", 0, "also count, under valgrind's callgrind, the Redis instructions per check of the same-algorithm contenders: this many checks per cell (needs valgrind; 0 leaves it out; with -same -rounds 0, only that)")
	control  = flag.Bool("control", false, "add a second ulule/limiter row, measured as a contender of its own: its ratio to ulule/limiter is the harness's resolution (an A/A control)")
	same     = flag.Bool("same", false, "run only the same-algorithm comparison: redlimit's fixed window and GCRA, ulule/limiter, redis_rate and the bare EVALSHA")
)

// Scenario names, also the columns of the tables.
const (
	scHot1  = "hot key, c=1"
	scHot8  = "hot key, c=8"
	scHot64 = "hot key, c=64"
	scKeys1 = "100k keys, c=1"
	scKeys8 = "100k keys, c=8"
	scKeys  = "100k keys, c=64"
	scAbuse = "abusive key, c=64"
)

// hot is never reached: each limiter would need a million checks a second.
var hot = limit{1_000_000, time.Second}

// scenario is one throughput measurement.
type scenario struct {
	name    string
	conc    int    // goroutines
	key     string // key name, or prefix of the keys when keys > 1
	keys    int    // distinct keys, checked round robin
	lim     limit
	latency bool // record each call's duration
}

var scenarios = []scenario{
	{name: scHot1, conc: 1, key: "hot", keys: 1, lim: hot},
	{name: scHot8, conc: 8, key: "hot", keys: 1, lim: hot, latency: true},
	{name: scHot64, conc: 64, key: "hot", keys: 1, lim: hot},
	// 100 a day: keys persist between rounds and are never limited. Each
	// measurement starts again from the first key.
	{name: scKeys1, conc: 1, key: "k", keys: 100_000, lim: limit{100, 24 * time.Hour}},
	{name: scKeys8, conc: 8, key: "k", keys: 100_000, lim: limit{100, 24 * time.Hour}},
	{name: scKeys, conc: 64, key: "k", keys: 100_000, lim: limit{100, 24 * time.Hour}},
	{name: scAbuse, conc: 64, key: "abuse", keys: 1, lim: limit{10, time.Second}},
}

func keyNames(id, key string, n int) []string {
	if n == 1 {
		return []string{id + ":" + key}
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = id + ":" + key + strconv.Itoa(i)
	}
	return keys
}

// env is the server and the clients every measurement shares.
type env struct {
	addr    string
	client  *redis.Client    // every limiter's, counted by counter
	counter *counter         //
	admin   *redis.Client    // statistics, FLUSHALL
	peers   [2]*redis.Client // the correctness test's two application servers
}

func options(addr string) *redis.Options {
	return &redis.Options{Addr: addr, PoolSize: 128}
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("peerbench: ")
	if err := run(); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	e := &env{addr: *addr, counter: &counter{}}
	if e.addr == "" {
		a, stop, err := startRedis(ctx)
		if err != nil {
			return err
		}
		defer stop()
		e.addr = a
	}
	e.client = redis.NewClient(options(e.addr))
	e.client.AddHook(e.counter)
	e.admin = redis.NewClient(&redis.Options{Addr: e.addr})
	for i := range e.peers {
		e.peers[i] = redis.NewClient(options(e.addr))
	}
	if err := e.admin.FlushAll(ctx).Err(); err != nil {
		return err
	}

	load0 := loadAvg()
	all := limiters()
	if *control {
		all = append(all, controlRow())
	}
	lms, err := selected(all, *only, *scOnly)
	if err != nil {
		return err
	}
	if *same {
		lms = sameAlgorithm(lms)
	}
	if *same && *rounds == 0 && *instrN > 0 {
		// the instruction counts alone
		return countInstructions(ctx, os.Stdout, lms)
	}
	results, err := e.rounds(ctx, lms)
	if err != nil {
		return err
	}
	once, err := e.once(ctx, lms)
	if err != nil {
		return err
	}

	h, err := e.header(ctx, load0)
	if err != nil {
		return err
	}
	report(os.Stdout, h, lms, results, once)
	if *instrN > 0 {
		if err := countInstructions(ctx, os.Stdout, sameAlgorithm(lms)); err != nil {
			return err
		}
	}
	if *leasing > 0 {
		// the leasing scenario: quota blocks, 1 and 4 instances with their
		// own clients on one hot key, and their exactness
		fmt.Print("\n## Quota leasing (redlimit.Rule.Blocks)\n\n```\n")
		lease.Run(os.Stdout, e.addr, lease.Config{Duration: *duration, Rounds: *rounds, Window: 500 * time.Millisecond, Windows: *leasing, Limit: 20_000})
		fmt.Print("```\n")
	}
	return nil
}

// selected filters lms and the scenarios by the -only and -scenarios
// expressions. The first limiter, the reference, always stays.
func selected(lms []limiter, only, sc string) ([]limiter, error) {
	if sc != "" {
		re, err := regexp.Compile(sc)
		if err != nil {
			return nil, fmt.Errorf("-scenarios: %w", err)
		}
		scenarios = slices.DeleteFunc(scenarios, func(s scenario) bool { return !re.MatchString(s.name) })
	}
	if only == "" {
		return lms, nil
	}
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	return append(lms[:1], slices.DeleteFunc(lms[1:], func(lm limiter) bool { return !re.MatchString(lm.name) })...), nil
}

// slice is the longest stretch one limiter runs before the next one's turn:
// a burst of noise on the machine lands on every limiter of the scenario.
const slice = 100 * time.Millisecond

// sliceOrders returns the source of the contenders' order in each slice,
// a permutation drawn by Perm. It is seeded so that a run can be repeated;
// each limiter follows each other one about as often, so that whatever
// one leaves behind (garbage to collect, a cold cache, a server still
// writing its reply buffers) lands on all of them alike, where a cyclic
// order would always put the same contender after the same one.
func sliceOrders() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// rounds runs every scenario, rounds times, for duration per limiter, in
// slices that rotate between the limiters in an order shuffled for each
// slice.
func (e *env) rounds(ctx context.Context, lms []limiter) (map[string]map[string][]runResult, error) {
	results := map[string]map[string][]runResult{}
	// Warm up: scripts loaded, connections dialled.
	for _, lm := range lms {
		results[lm.id] = map[string][]runResult{}
		a, err := lm.build(e.client, hot)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lm.name, err)
		}
		if _, err := e.run(ctx, a, 64, 200*time.Millisecond, &keyRing{keys: keyNames(lm.id, "warm", 1)}, false); err != nil {
			return nil, err
		}
	}
	type contender struct {
		lm   limiter
		a    allowFunc
		ring *keyRing
		res  runResult
	}
	n := max(1, int((*duration+slice-1)/slice))
	rng := sliceOrders()
	for r := range *rounds {
		for _, sc := range scenarios {
			var cs []*contender
			for _, lm := range lms {
				if !lm.runs(sc.name) {
					continue
				}
				a, err := lm.build(e.client, sc.lim)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", lm.name, err)
				}
				cs = append(cs, &contender{lm: lm, a: a, ring: &keyRing{keys: keyNames(lm.id, sc.key, sc.keys)}})
			}
			runtime.GC()
			start := time.Now()
			for range n {
				for _, j := range rng.Perm(len(cs)) {
					c := cs[j]
					res, err := e.run(ctx, c.a, sc.conc, *duration/time.Duration(n), c.ring, sc.latency)
					if err != nil {
						return nil, err
					}
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					c.res.add(res)
				}
			}
			for _, c := range cs {
				c.res.wall = time.Since(start)
				log.Printf("round %d/%d  %-18s %-32s %9.0f checks/s  %d errors", r+1, *rounds, sc.name, c.lm.name, c.res.rate(), c.res.errs)
				results[c.lm.id][sc.name] = append(results[c.lm.id][sc.name], c.res)
			}
		}
	}
	return results, nil
}

// single holds the measurements made once per limiter.
type single struct {
	allocs, bytes float64
	mem           memory
	verdict       verdict
}

// once measures each limiter's allocations, correctness and memory.
func (e *env) once(ctx context.Context, lms []limiter) (map[string]single, error) {
	out := map[string]single{}
	for _, lm := range lms {
		var s single
		a, err := lm.build(e.client, hot)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lm.name, err)
		}
		if s.allocs, s.bytes, err = allocs(ctx, a, lm.id+":allocs", 3000); err != nil {
			return nil, fmt.Errorf("%s: %w", lm.name, err)
		}
		if !lm.stateless {
			if s.verdict, err = e.correct(ctx, lm); err != nil {
				return nil, fmt.Errorf("%s: %w", lm.name, err)
			}
		}
		out[lm.id] = s
	}
	// Memory last, on a quiet server: the buffers of hundreds of connections
	// would otherwise grow and shrink while a limiter's keys are counted.
	e.client.Close()
	for _, c := range e.peers {
		c.Close()
	}
	c := redis.NewClient(options(e.addr))
	defer c.Close()
	// The first count on a server comes out about 5 B/key lower than a
	// second of the same limiter (the server's one-time growth lands in
	// it): the first limiter is counted twice, its first count thrown away.
	first := true
	for _, lm := range lms {
		s := out[lm.id]
		if !lm.stateless {
			a, err := lm.build(c, limit{100, time.Hour})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lm.name, err)
			}
			if first {
				if _, err := e.memory(ctx, a, memKeys(lm, 1+10_000)); err != nil {
					return nil, fmt.Errorf("%s: %w", lm.name, err)
				}
				first = false
			}
			if s.mem, err = e.memory(ctx, a, memKeys(lm, 1+10_000)); err != nil {
				return nil, fmt.Errorf("%s: %w", lm.name, err)
			}
		}
		out[lm.id] = s
		log.Printf("%-32s %5.0f B/key %5.1f allocs/check %4d of 320 allowed", lm.name, s.mem.perKey, s.allocs, s.verdict.allowed)
	}
	return out, nil
}

// memKeys returns n keys that the limiter stores under names of 32 bytes,
// its library's prefix included, so that key length plays no part.
func memKeys(lm limiter, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		k := lm.id + ":m" + strconv.Itoa(i)
		keys[i] = k + strings.Repeat("_", max(0, 32-len(lm.prefix)-len(k)))
	}
	return keys
}

// correct runs the correctness test on a fresh key.
func (e *env) correct(ctx context.Context, lm limiter) (verdict, error) {
	// Fixed windows are aligned to the minute: stay clear of a boundary.
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 3*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
	var inst [2]allowFunc
	for i, c := range e.peers {
		var err error
		if inst[i], err = lm.build(c, limit{100, time.Minute}); err != nil {
			return verdict{}, err
		}
	}
	key := lm.id + ":correct:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return correctness(ctx, inst, key, 64, 5), nil
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and returns its address and a function that stops it.
func startRedis(ctx context.Context) (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	a := "127.0.0.1:" + port
	if err := waitPing(ctx, a, 5*time.Second); err != nil {
		stop()
		return "", nil, err
	}
	return a, stop, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// waitPing waits up to d for the redis-server at a to answer.
func waitPing(ctx context.Context, a string, d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(errors.New("redis-server did not answer"), cmp.Or(ctx.Err(), err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
