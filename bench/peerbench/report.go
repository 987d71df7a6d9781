package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// header describes the machine and the run.
type header struct {
	date, goVersion, cpu, redis, where string
	load0, load1                       string // load averages at start and end
	versions                           []string
}

func (e *env) header(ctx context.Context, load0 string) (header, error) {
	h := header{date: time.Now().UTC().Format("2006-01-02 15:04 MST"), goVersion: runtime.Version(), cpu: cpuModel(), load0: load0, load1: loadAvg()}
	info, err := e.info(ctx, "server")
	if err != nil {
		return h, err
	}
	h.redis = info["redis_version"]
	h.where = "started by peerbench on " + e.addr + ` with --save "" --appendonly no`
	if *addr != "" {
		h.where = "existing server at " + e.addr
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/go-redis/redis_rate/v10", "github.com/ulule/limiter/v3",
				"github.com/throttled/throttled/v2", "github.com/redis/go-redis/v9":
				h.versions = append(h.versions, d.Path+" "+d.Version)
			}
		}
	}
	return h, nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAvg returns the 1, 5 and 15 minute load averages: other work on the
// machine is noise in every number.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// table prints a Markdown table whose rows are limiters and whose cells
// show a value and its ratio to the first row's value in the same column.
type table struct {
	w    io.Writer
	cols []column
	ref  []float64
}

// column computes one cell's value for a limiter; ok is false when the
// limiter was not measured for it.
type column struct {
	title string
	value func(lm limiter) (v float64, ok bool)
	unit  string
	prec  int
	note  func(lm limiter) string // optional, appended to the cell
	bare  bool                    // no ratio
}

func (t *table) print(lms []limiter) {
	fmt.Fprint(t.w, "| Limiter |")
	for _, c := range t.cols {
		fmt.Fprintf(t.w, " %s |", c.title)
	}
	fmt.Fprint(t.w, "\n|---|")
	for range t.cols {
		fmt.Fprint(t.w, "---:|")
	}
	fmt.Fprintln(t.w)
	t.ref = make([]float64, len(t.cols))
	for i, c := range t.cols {
		t.ref[i], _ = c.value(lms[0])
	}
	for _, lm := range lms {
		fmt.Fprintf(t.w, "| %s |", lm.name)
		for i, c := range t.cols {
			v, ok := c.value(lm)
			cell := "—"
			if ok {
				cell = number(v, c.prec) + c.unit
				if t.ref[i] != 0 && !c.bare {
					cell += fmt.Sprintf(" (×%.2f)", v/t.ref[i])
				}
				if c.note != nil {
					cell += c.note(lm)
				}
			}
			fmt.Fprintf(t.w, " %s |", cell)
		}
		fmt.Fprintln(t.w)
	}
	fmt.Fprintln(t.w)
}

// number formats v with prec decimals and thousands separators.
func number(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

func report(w io.Writer, h header, lms []limiter, res map[string]map[string][]runResult, once map[string]single) {
	// med is the median over rounds of f for lm in scenario sc.
	med := func(sc string, f func(runResult) float64) func(limiter) (float64, bool) {
		return func(lm limiter) (float64, bool) {
			rs := res[lm.id][sc]
			if len(rs) == 0 {
				return 0, false
			}
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs), true
		}
	}
	// errNote flags the errors of lm in sc over all rounds.
	errNote := func(sc string) func(limiter) string {
		return func(lm limiter) string {
			var calls, errs int64
			for _, r := range res[lm.id][sc] {
				calls, errs = calls+r.calls, errs+r.errs
			}
			if errs == 0 {
				return ""
			}
			return fmt.Sprintf(" **%.1f%% errors**", 100*float64(errs)/float64(calls))
		}
	}
	rate := func(r runResult) float64 { return r.rate() }
	perCheck := func(f func(runResult) float64) func(runResult) float64 {
		return func(r runResult) float64 { return r.perCheck(f(r)) }
	}
	trips := perCheck(func(r runResult) float64 { return float64(r.trips) })
	sent := perCheck(func(r runResult) float64 { return float64(r.sent) })
	run := perCheck(func(r runResult) float64 { return float64(r.srvCalls) })
	usec := perCheck(func(r runResult) float64 { return r.srvUsec })
	cpu := perCheck(func(r runResult) float64 { return r.cpu * 1e6 })
	clientCPU := perCheck(func(r runResult) float64 { return r.clientCPU * 1e6 })
	pct := func(p float64) func(runResult) float64 {
		return func(r runResult) float64 { return float64(r.percentile(p)) / 1e3 }
	}
	one := func(f func(single) float64, stateful bool) func(limiter) (float64, bool) {
		return func(lm limiter) (float64, bool) {
			if stateful && lm.stateless {
				return 0, false
			}
			return f(once[lm.id]), true
		}
	}

	fmt.Fprintf(w, "### redlimit and its peers on one Redis — %s\n\n", h.date)
	fmt.Fprintf(w, "- %s %s/%s, GOMAXPROCS=%d, %d logical CPUs: %s; load average %s at start, %s at end\n",
		h.goVersion, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(), h.cpu, h.load0, h.load1)
	fmt.Fprintf(w, "- redis-server %s, %s; the benchmark and the server share the machine\n", h.redis, h.where)
	fmt.Fprintf(w, "- %s\n", strings.Join(h.versions, ", "))
	fmt.Fprintf(w, "- `-duration %v -rounds %d`: measurements interleaved between limiters, median of the rounds; ratios (×) are against redlimit gcra\n\n", *duration, *rounds)

	fmt.Fprintf(w, "**Throughput (checks/s, higher is better) and latency (µs, lower is better).** c = goroutines. Hot key: one key, limit 1,000,000/s, never reached. 100k keys: 100,000 keys round robin, 100/day each, every measurement starting from the first key (keys persist, so after the first round most checks find their key). Abusive key: one key, 10/s with a burst of 10; allowed/s is over the wall-clock time of the scenario, when the key also refills during the other limiters' turns, so about 10 + 10/that time. A call that returns an error is not a check; the share of such calls is shown in bold. Latency: every call's duration at c=8.\n\n")
	cols := []column{}
	for _, sc := range scenarios {
		cols = append(cols, column{title: sc.name, value: med(sc.name, rate), note: errNote(sc.name)})
	}
	cols = append(cols,
		column{title: "abusive: allowed/s", bare: true, prec: 1, value: func(lm limiter) (float64, bool) {
			if lm.stateless {
				return 0, false
			}
			return med(scAbuse, func(r runResult) float64 { return float64(r.allowed) / r.wall.Seconds() })(lm)
		}},
		column{title: "p50, hot c=8", value: med(scHot8, pct(0.50)), prec: 0},
		column{title: "p99, hot c=8", value: med(scHot8, pct(0.99)), prec: 0},
	)
	(&table{w: w, cols: cols}).print(lms)
	fmt.Fprintf(w, "%s\n\n", spread(lms, res))
	reportSame(w, lms, res, once)

	fmt.Fprintf(w, "**Redis work per check (lower is better).** Round trips and commands sent: counted by a go-redis hook on the client. Commands run: INFO commandstats calls, including the commands scripts run. Command µs: commandstats usec of the commands sent (a script's usec includes its inner commands). Redis CPU µs: used_cpu_user+sys. Client CPU µs: the CPU time of the benchmark process (limiter, go-redis and harness), user+sys. The two share 2 cores: at c=64 their sum bounds the throughput.\n\n")
	(&table{w: w, cols: []column{
		{title: "round trips, hot c=8", value: med(scHot8, trips), prec: 2},
		{title: "commands sent", value: med(scHot8, sent), prec: 2},
		{title: "commands run", value: med(scHot8, run), prec: 2},
		{title: "command µs", value: med(scHot8, usec), prec: 2},
		{title: "Redis CPU µs", value: med(scHot8, cpu), prec: 1},
		{title: "Redis CPU µs, hot c=64", value: med(scHot64, cpu), prec: 1},
		{title: "client CPU µs, hot c=64", value: med(scHot64, clientCPU), prec: 1},
		{title: "round trips, abusive c=64", value: med(scAbuse, trips), prec: 3},
		{title: "commands run", value: med(scAbuse, run), prec: 3},
		{title: "Redis CPU µs", value: med(scAbuse, cpu), prec: 2},
	}}).print(lms)

	fmt.Fprintf(w, "**State, allocations and correctness.** Memory: after FLUSHALL, 10,000 fresh keys checked once each (100/hour), serially on one connection, every stored key name 32 bytes long; used_memory growth per key (key table overhead included; connections' buffers, mem_clients_normal, not; after one count thrown away), and MEMORY USAGE of one key. Go allocations per check: serial, hot key, client side (adapter, library, go-redis). Correctness: limit 100/min, 64 goroutines × 5 calls on one fresh key through two instances on two clients; exact is 100.\n\n")
	(&table{w: w, cols: []column{
		{title: "bytes/key (used_memory)", value: one(func(s single) float64 { return s.mem.perKey }, true)},
		{title: "MEMORY USAGE of one key", value: one(func(s single) float64 { return float64(s.mem.sampleSize) }, true), note: func(lm limiter) string { return " `" + once[lm.id].mem.sample + "`" }},
		{title: "keys/check", value: one(func(s single) float64 { return float64(s.mem.keys) / 10_000 }, true), prec: 2},
		{title: "allocs/check", value: one(func(s single) float64 { return s.allocs }, false), prec: 1},
		{title: "B/check", value: one(func(s single) float64 { return s.bytes }, false)},
		{title: "allowed of 320 (limit 100)", bare: true, value: one(func(s single) float64 { return float64(s.verdict.allowed) }, true), note: func(lm limiter) string {
			v := once[lm.id].verdict
			if v.errs == 0 {
				return ""
			}
			return fmt.Sprintf(" **%d errors**", v.errs)
		}},
	}}).print(lms)

	for _, lm := range lms {
		if v := once[lm.id].verdict; v.firstErr != nil {
			fmt.Fprintf(w, "- %s, first correctness error: `%v`\n", lm.name, v.firstErr)
		}
		for _, sc := range scenarios {
			for _, r := range res[lm.id][sc.name] {
				if r.firstErr != nil {
					fmt.Fprintf(w, "- %s, %s, first error: `%v`\n", lm.name, sc.name, r.firstErr)
					break
				}
			}
		}
	}
}

// spread summarises how much throughput moved between rounds: max/min - 1
// of each limiter and scenario.
func spread(lms []limiter, res map[string]map[string][]runResult) string {
	var all []float64
	worst, where := 0.0, ""
	for _, lm := range lms {
		for _, sc := range scenarios {
			rs := res[lm.id][sc.name]
			if len(rs) < 2 {
				continue
			}
			lo, hi := rs[0].rate(), rs[0].rate()
			for _, r := range rs[1:] {
				lo, hi = min(lo, r.rate()), max(hi, r.rate())
			}
			d := hi/max(lo, 1) - 1
			all = append(all, d)
			if d > worst {
				worst, where = d, lm.name+", "+sc.name
			}
		}
	}
	if len(all) == 0 {
		return "One round: no spread to report."
	}
	return fmt.Sprintf("Throughput spread between rounds (fastest/slowest − 1): median %.0f%%, largest %.0f%% (%s).", 100*median(all), 100*worst, where)
}
