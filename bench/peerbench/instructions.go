package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis instructions per check: a measurement that does not depend on the
// machine's load. peerbench -instructions N starts a second redis-server
// under valgrind's callgrind, and for each same-algorithm contender and
// the bare EVALSHA counts the instructions the server executes (its whole
// work: reading and parsing the command, the script, the reply, the
// event loop) over N checks from one caller, after a warm-up, in these
// scenarios: one hot key; warm keys (N keys, each checked once before, so
// every check finds its key: the 100k-keys scenario after its first
// round); new keys (every check the first of its key, which starts a
// window or a bucket); then limits whose numbers take the scripts off
// their whole-unit paths: a GCRA emission interval that is no whole
// number of µs (10⁹/h on a hot key, 3/s on a hot key, which denies
// almost every check, and 7/min on warm keys), and a fixed window whose
// period is no whole number of ms (10⁶ per 1.0005 s on a hot key). The same contenders' counts repeat within about 1% from
// run to run (another machine with the same redis-server build differs
// only by the CPU-specific variants of libc's string functions), where
// timings on a shared machine vary by several percent; every count moved
// by up to 6% between runs whose servers held other scripts, so compare
// within one run.

// instrScenario is one column of the instruction counts: the keys
// checked and their limit.
type instrScenario struct {
	name string
	keys string // "hot" (one key), "warm" (n keys, checked once before) or "new" (n keys, checked first)
	lim  limit
}

// instrScenarios are the scenarios of the instruction counts: the hot
// limit, and 100/day on each of the warm and new keys, which outlives the
// warm-up, as the timed scenarios; then the limits off the whole-unit
// paths.
var instrScenarios = []instrScenario{
	{"hot key", "hot", hot},
	{"warm keys", "warm", limit{100, 24 * time.Hour}},
	{"new keys", "new", limit{100, 24 * time.Hour}},
	{"hot key, 10⁹/h", "hot", limit{1_000_000_000, time.Hour}},
	{"hot key, 3/s", "hot", limit{3, time.Second}},
	{"warm keys, 7/min", "warm", limit{7, time.Minute}},
	{"hot key, 10⁶/1.0005s", "hot", limit{1_000_000, 1000500 * time.Microsecond}},
}

// callgrind is a redis-server run under callgrind.
type callgrind struct {
	cmd   *exec.Cmd
	addr  string
	out   string // callgrind's output file; dump k is out.k
	dumps int
}

// startCallgrind starts redis-server under callgrind with instrumentation
// off until the first measurement.
func startCallgrind(ctx context.Context) (*callgrind, error) {
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("-instructions needs %s (apt-get install valgrind): %w", tool, err)
		}
	}
	dir, err := os.MkdirTemp("", "peerbench-callgrind")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cg := &callgrind{addr: "127.0.0.1:" + port, out: filepath.Join(dir, "callgrind.out")}
	cg.cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+cg.out,
		"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning", "--hz", "1")
	if err := cg.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server under callgrind: %w", err)
	}
	if err := waitPing(ctx, cg.addr, 60*time.Second); err != nil {
		cg.stop()
		return nil, err
	}
	return cg, nil
}

func (cg *callgrind) stop() {
	cg.cmd.Process.Kill()
	cg.cmd.Wait()
	os.RemoveAll(filepath.Dir(cg.out))
}

// control runs callgrind_control with args on the server's process.
func (cg *callgrind) control(args ...string) error {
	out, err := exec.Command("callgrind_control", append(args, strconv.Itoa(cg.cmd.Process.Pid))...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// count returns the instructions the server executes while fn runs.
func (cg *callgrind) count(fn func() error) (int64, error) {
	if err := cg.control("-z"); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	if err := cg.control("-d"); err != nil {
		return 0, err
	}
	cg.dumps++
	f, err := os.Open(cg.out + "." + strconv.Itoa(cg.dumps))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return totalIr(f)
}

// totalIr reads the instruction count of a callgrind dump: its summary
// (or totals) line.
func totalIr(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, p := range []string{"summary: ", "totals: "} {
			if v, ok := strings.CutPrefix(sc.Text(), p); ok {
				return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("callgrind dump without a summary line")
}

// instructions measures each limiter of lms: n checks per scenario, from
// one caller, on the server under callgrind. It returns the instructions
// per check by limiter id and scenario; a cell whose checks failed is
// left out, and logged.
func instructions(ctx context.Context, lms []limiter, n int) (map[string]map[string]float64, error) {
	cg, err := startCallgrind(ctx)
	if err != nil {
		return nil, err
	}
	defer cg.stop()
	c := redis.NewClient(options(cg.addr))
	defer c.Close()
	out := map[string]map[string]float64{}
	for _, lm := range lms {
		out[lm.id] = map[string]float64{}
		calls := func(a allowFunc, keys []string) func() error {
			return func() error {
				for i := range n {
					if _, err := a(ctx, keys[i%len(keys)]); err != nil {
						return fmt.Errorf("%s: %w", lm.name, err)
					}
				}
				return nil
			}
		}
		for j, sc := range instrScenarios {
			// keys of the scenario's own
			tag := "instr" + strconv.Itoa(j) + "-"
			keys, warm := []string{lm.id + ":" + tag + "hot"}, []string(nil)
			switch sc.keys {
			case "warm":
				keys = keyNames(lm.id, tag+"warm", n)
			case "new": // the warm-up on other keys: each measured check starts its key
				keys, warm = keyNames(lm.id, tag+"new", n), keyNames(lm.id, tag+"new-warm", n)
			}
			a, err := lm.build(c, sc.lim)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lm.name, err)
			}
			if warm == nil {
				warm = keys
			}
			// a check that fails leaves its cell out ("error" in the
			// table) rather than the whole run
			if err := calls(a, warm)(); err != nil { // warm-up: scripts loaded, keys there
				log.Printf("instructions  %-20s %s", sc.name, err)
				continue
			}
			var failed error
			ir, err := cg.count(func() error { failed = calls(a, keys)(); return failed })
			if failed != nil {
				log.Printf("instructions  %-20s %s", sc.name, failed)
				continue
			}
			if err != nil {
				return nil, err
			}
			out[lm.id][sc.name] = float64(ir) / float64(n)
			log.Printf("instructions  %-20s %-32s %8.0f per check", sc.name, lm.name, out[lm.id][sc.name])
		}
	}
	return out, nil
}

// countInstructions measures the instructions of lms (-instructions) and
// reports them to w.
func countInstructions(ctx context.Context, w io.Writer, lms []limiter) error {
	instr, err := instructions(ctx, lms, *instrN)
	if err != nil {
		return err
	}
	reportInstructions(w, lms, instr, *instrN)
	return nil
}

// reportInstructions prints the instruction counts: per check, for the
// baseline and each same-algorithm pair, then each pair's ratio (lower
// is cheaper for Redis).
func reportInstructions(w io.Writer, lms []limiter, instr map[string]map[string]float64, n int) {
	base, pairs := samePairs(lms)
	if base == nil || len(pairs) == 0 {
		return
	}
	fmt.Fprintf(w, "**Redis instructions per check (lower is better).** redis-server under valgrind's callgrind, one caller, %d checks per cell after as many to warm up: every instruction the server executes (reading and parsing the command, the script, the reply, the event loop). Warm keys: %d keys, each checked once before. New keys: each check the first of its key (its window's start). 10⁹/h, 3/s (a hot key: almost every check denied) and 7/min: GCRA emission intervals of no whole µs; 10⁶/1.0005s: a fixed window period of no whole ms. Compare within one run: the same contenders' counts repeat within about 1%%, but every count moved by up to 6%% between runs whose servers held other scripts; another machine with the same redis-server build differs only by the CPU-specific variants of libc's string functions.\n\n", n, n)
	fmt.Fprint(w, "| contender |")
	for _, sc := range instrScenarios {
		fmt.Fprintf(w, " %s |", sc.name)
	}
	fmt.Fprint(w, "\n|---|")
	for range instrScenarios {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	row := func(lm limiter) {
		fmt.Fprintf(w, "| %s |", lm.name)
		for _, sc := range instrScenarios {
			if v, ok := instr[lm.id][sc.name]; ok {
				fmt.Fprintf(w, " %s |", number(v, 0))
			} else {
				fmt.Fprint(w, " error |")
			}
		}
		fmt.Fprintln(w)
	}
	for _, lm := range rows(base, pairs) {
		row(lm)
	}
	for _, p := range pairs {
		fmt.Fprint(w, p.label())
		for _, sc := range instrScenarios {
			a, okA := instr[p.ours.id][sc.name]
			b, okB := instr[p.peer.id][sc.name]
			if !okA || !okB {
				fmt.Fprint(w, " — |")
				continue
			}
			fmt.Fprintf(w, " %.3f |", a/max(b, 1))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
