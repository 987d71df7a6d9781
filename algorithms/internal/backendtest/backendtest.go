// Package backendtest is what the tests of redlimit's backends share: the
// conformance vectors of testdata/vectors, a settable clock, and Redis
// clients that keep keys from expiring on the server's clock.
package backendtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the vectors' time zones, whatever the machine holds

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// vectorsDir is testdata/vectors at the module's root, found from this
// file's path, so that any package's tests can load the vectors.
func vectorsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "vectors")
}

// The vector format (testdata/vectors/*.txt), one step per line:
//
//	scenario <name>
//	start <RFC 3339 time>
//	limit <name> <algorithm> rate=<n> period=<duration> [burst=<n>]
//	limit <name> fixed_window rate=<n> calendar=<day|week|month|year> [zone=<IANA name>]
//	keys shared
//	<offset> <check> [<check>...] [@<label>] -> <result> [| <result>...]
//	<offset> refund <label> <units> [<units>...] -> refunded|none
//
// where a check is <limit>/<key>[*<cost>] and a result is
// allow|deny <remaining> <retry_after> <reset_after> [provisional]. A call
// with a @label is refundable (Check.RefundWindow = RefundWindow), and a
// later refund step gives back units of each of its checks, expecting
// them given back (refunded) or not (none: ErrNotRefunded). Each limit has keys of
// its own, unless the scenario says "keys shared": then a key is the same
// whatever limit checks it, and a scenario plays one key whose limit
// changes. Offsets are durations
// from T0, a Unix time aligned to a whole day, or from the scenario's start
// when it names one, and may go backwards.
// '#' starts a comment.
//
// Concurrency checks name their lease: <limit>/<key>[*<cost>][@<id>],
// where id is a number (default: one of the step's own). Two more steps
// release and renew leases ([algorithms.Leaser]):
//
//	<offset> release <check> [<check>...]
//	<offset> renew <check> [<check>...] -> held|lost [| held|lost...]

// T0 is 2023-11-15T00:00:00Z: aligned to seconds, minutes, hours and days, so
// fixed windows start at T0.
var T0 = time.Unix(19676*86400, 0)

type Limit struct {
	Alg   algorithms.Algorithm
	Limit algorithms.Limit
}

type Step struct {
	Line   int
	At     time.Duration // from T0
	Op     string        // "" (Allow), "release" or "renew"
	Checks []CheckSpec
	Want   []algorithms.Result
	Held   []bool // renew: whether each lease is held
	Text   string

	Label   string  // a refundable call: its label
	Refund  string  // a refund step: the label of the call it refunds
	Units   []int64 // a refund step: the units per check
	Outcome string  // a refund step: "refunded" or "none"
}

type CheckSpec struct {
	Limit string // the name of one of the scenario's Limits
	Key   string
	Cost  int64
	Lease uint64 // concurrency checks
}

type Scenario struct {
	File, Name string
	Limits     map[string]Limit
	Shared     bool      // keys are shared by the limits
	Start      time.Time // the steps' offsets count from it: T0 unless the scenario says
	Steps      []Step
}

func LoadVectors(t testing.TB) []*Scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorsDir(), "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	var all []*Scenario
	for _, f := range files {
		all = append(all, parseVectors(t, f)...)
	}
	return all
}

func parseVectors(t testing.TB, path string) []*Scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*Scenario
	var cur *Scenario
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s:%d: %s", path, n, fmt.Sprintf(format, args...))
		}
		switch fields[0] {
		case "scenario":
			cur = &Scenario{File: filepath.Base(path), Name: strings.Join(fields[1:], " "), Limits: map[string]Limit{}, Start: T0}
			out = append(out, cur)
		case "start":
			if cur == nil || len(fields) != 2 {
				fail("bad start line: want \"start <RFC 3339 time>\"")
			}
			if cur.Start, err = time.Parse(time.RFC3339, fields[1]); err != nil {
				fail("start: %v", err)
			}
		case "keys":
			if cur == nil || len(fields) != 2 || fields[1] != "shared" {
				fail("bad keys line: want \"keys shared\"")
			}
			cur.Shared = true
		case "limit":
			if cur == nil || len(fields) < 5 {
				fail("bad limit line")
			}
			alg, err := algorithms.ParseAlgorithm(fields[2])
			if err != nil {
				fail("%v", err)
			}
			var l algorithms.Limit
			for _, kv := range fields[3:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "rate":
					l.Rate, err = strconv.ParseInt(v, 10, 64)
				case "burst":
					l.Burst, err = strconv.ParseInt(v, 10, 64)
				case "period":
					l.Period, err = time.ParseDuration(v)
				case "calendar":
					l.Calendar = calendarUnits[v]
					if l.Calendar == 0 {
						fail("unknown calendar unit %q", v)
					}
				case "zone":
					l.Location, err = time.LoadLocation(v)
				default:
					fail("unknown limit field %q", k)
				}
				if err != nil {
					fail("%v", err)
				}
			}
			cur.Limits[fields[1]] = Limit{alg, l}
		default:
			if cur == nil {
				fail("step before scenario")
			}
			st := Step{Line: n, Text: strings.Join(fields, " ")}
			if st.At, err = time.ParseDuration(fields[0]); err != nil {
				fail("offset: %v", err)
			}
			if len(fields) > 1 && (fields[1] == "release" || fields[1] == "renew") {
				st.Op = fields[1]
				fields = append(fields[:1:1], fields[2:]...)
				if st.Op == "release" {
					fields = append(fields, "->")
				}
			}
			if len(fields) > 1 && fields[1] == "refund" {
				if err := parseRefund(&st, fields, cur); err != nil {
					fail("%v", err)
				}
				cur.Steps = append(cur.Steps, st)
				continue
			}
			arrow := indexOf(fields, "->")
			if arrow > 2 && strings.HasPrefix(fields[arrow-1], "@") {
				st.Label = fields[arrow-1][1:]
				fields = append(fields[:arrow-1:arrow-1], fields[arrow:]...)
				arrow--
			}
			if arrow < 2 {
				fail("no checks or no ->")
			}
			for j, c := range fields[1:arrow] {
				lease := uint64(n)*16 + uint64(j) + 1
				if k, id, ok := strings.Cut(c, "@"); ok {
					if lease, err = strconv.ParseUint(id, 10, 64); err != nil {
						fail("lease: %v", err)
					}
					c = k
				}
				lim, rest, ok := strings.Cut(c, "/")
				if !ok {
					fail("check %q: want limit/key", c)
				}
				if _, ok := cur.Limits[lim]; !ok {
					fail("unknown limit %q", lim)
				}
				vc := CheckSpec{Limit: lim, Key: rest, Cost: 1, Lease: lease}
				if k, cost, ok := strings.Cut(rest, "*"); ok {
					vc.Key = k
					if vc.Cost, err = strconv.ParseInt(cost, 10, 64); err != nil {
						fail("cost: %v", err)
					}
				}
				st.Checks = append(st.Checks, vc)
			}
			if st.Op != "" {
				for _, r := range strings.Split(strings.Join(fields[arrow+1:], " "), "|") {
					if r = strings.TrimSpace(r); r != "" {
						st.Held = append(st.Held, r == "held")
					}
				}
				if st.Op == "renew" && len(st.Held) != len(st.Checks) {
					fail("%d leases but %d results", len(st.Checks), len(st.Held))
				}
				cur.Steps = append(cur.Steps, st)
				continue
			}
			for _, r := range strings.Split(strings.Join(fields[arrow+1:], " "), "|") {
				rf := strings.Fields(r)
				var res algorithms.Result
				if len(rf) == 5 && rf[4] == "provisional" {
					res.Provisional = true
					rf = rf[:4]
				}
				if len(rf) != 4 || rf[0] != "allow" && rf[0] != "deny" {
					fail("result %q: want allow|deny remaining retry reset [provisional]", r)
				}
				res.Allowed = rf[0] == "allow"
				if res.Remaining, err = strconv.ParseInt(rf[1], 10, 64); err != nil {
					fail("remaining: %v", err)
				}
				if res.RetryAfter, err = time.ParseDuration(rf[2]); err != nil {
					fail("retry: %v", err)
				}
				if res.ResetAfter, err = time.ParseDuration(rf[3]); err != nil {
					fail("reset: %v", err)
				}
				st.Want = append(st.Want, res)
			}
			if len(st.Want) != len(st.Checks) {
				fail("%d checks but %d results", len(st.Checks), len(st.Want))
			}
			for i, c := range st.Checks {
				l := cur.Limits[c.Limit]
				st.Want[i].Limit = l.Limit.Capacity(l.Alg)
			}
			cur.Steps = append(cur.Steps, st)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var calendarUnits = map[string]algorithms.CalendarUnit{"day": algorithms.Day, "week": algorithms.Week, "month": algorithms.Month, "year": algorithms.Year}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func FormatResult(r algorithms.Result) string {
	verdict := "deny"
	if r.Allowed {
		verdict = "allow"
	}
	if r.Provisional {
		return fmt.Sprintf("%s %d %v %v provisional", verdict, r.Remaining, r.RetryAfter, r.ResetAfter)
	}
	return fmt.Sprintf("%s %d %v %v", verdict, r.Remaining, r.RetryAfter, r.ResetAfter)
}

// Clock is a settable clock for backends: pass its Now method as their
// clock and set T.
type Clock struct{ T time.Time }

// Now returns c.T.
func (c *Clock) Now() time.Time { return c.T }

// Harness is a backend under test with a settable clock. Advance is called
// with the new time before each step so that stores with their own notion
// of expiry (miniredis) expire keys on the vectors' clock.
type Harness struct {
	Backend algorithms.Backend
	Clock   *Clock
	Advance func(to time.Time) // nil: nothing to do
	Prefix  string             // starts every key
}

// Play plays sc against h: every step's Results must equal the vector's.
// With print, it logs what h answers instead, to review new vectors.
func Play(t *testing.T, h *Harness, sc *Scenario, print bool) {
	t.Helper()
	ctx := context.Background()
	var printed strings.Builder
	calls := map[string]call{} // refundable calls by label
	for _, st := range sc.Steps {
		now := sc.Start.Add(st.At)
		h.Clock.T = now
		if h.Advance != nil {
			h.Advance(now)
		}
		if st.Refund != "" {
			playRefund(t, h, st, calls, &printed, print)
			continue
		}
		checks := make([]algorithms.Check, len(st.Checks))
		for i, c := range st.Checks {
			l := sc.Limits[c.Limit]
			key := h.Prefix + "v:" + c.Limit + ":{" + c.Key + "}"
			if sc.Shared {
				key = h.Prefix + "v:{" + c.Key + "}"
			}
			checks[i] = algorithms.Check{
				Key:       key,
				Algorithm: l.Alg,
				Limit:     l.Limit,
				Cost:      c.Cost,
				Lease:     c.Lease,
			}
		}
		if st.Op != "" {
			playLeases(t, h, st, checks, print, &printed)
			continue
		}
		if st.Label != "" {
			for i := range checks {
				checks[i].RefundWindow = RefundWindow
			}
		}
		got := make([]algorithms.Result, len(checks))
		if err := h.Backend.Allow(ctx, checks, got); err != nil {
			t.Fatalf("line %d: %s: Allow: %v", st.Line, st.Text, err)
		}
		if st.Label != "" {
			calls[st.Label] = call{checks, append([]algorithms.Result(nil), got...)}
			for i := range got {
				got[i].Receipt = algorithms.Receipt{} // the vectors do not name receipts
			}
		}
		if print {
			var parts []string
			for _, r := range got {
				parts = append(parts, FormatResult(r))
			}
			arrow := strings.Index(st.Text, "->")
			fmt.Fprintf(&printed, "%-40s -> %s\n", strings.TrimSpace(st.Text[:arrow]), strings.Join(parts, " | "))
			continue
		}
		for i := range got {
			if got[i] != st.Want[i] {
				t.Errorf("line %d: %s\n  check %d: Allow(%s, T0+%v) = %s, want %s",
					st.Line, st.Text, i, checks[i].Key, st.At, FormatResult(got[i]), FormatResult(st.Want[i]))
			}
		}
	}
	if print {
		t.Logf("scenario %s\n%s", sc.Name, printed.String())
	}
}

// Persisting runs every script in MULTI/EXEC followed by PERSIST of its
// keys, so a real server's clock cannot expire keys between steps of a
// workload that runs on a clock of its own.
type Persisting struct{ *redis.Client }

func (p Persisting) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.Client, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.EvalSha(ctx, sha, keys, args...) })
}

func (p Persisting) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.Client, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.Eval(ctx, src, keys, args...) })
}

// persistInTx runs one script command in MULTI/EXEC, followed by PERSIST of
// its keys.
func persistInTx(ctx context.Context, c interface {
	TxPipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
}, keys []string, script func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	var cmd *redis.Cmd
	c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		cmd = script(pipe)
		for _, k := range keys {
			pipe.Persist(ctx, k)
		}
		return nil
	})
	return cmd
}

// PersistingCluster is Persisting for a cluster: each script runs in
// MULTI/EXEC with PERSIST of its keys (all of one slot), so the servers'
// clocks cannot expire keys of a workload that runs on a clock of its own.
type PersistingCluster struct{ *redis.ClusterClient }

func (p PersistingCluster) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.ClusterClient, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.EvalSha(ctx, sha, keys, args...) })
}

func (p PersistingCluster) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return persistInTx(ctx, p.ClusterClient, keys, func(pipe redis.Pipeliner) *redis.Cmd { return pipe.Eval(ctx, src, keys, args...) })
}

// barrierCluster holds every EVALSHA until n of them are in flight at once,
// or fails them after a second: a call spanning n slots passes only if it
// sends its n scripts concurrently.

// Call is one call of a workload: its checks, at a time.
type Call struct {
	At     time.Time
	Checks []algorithms.Check
}

// RandomWorkload returns a random sequence of calls: one to three rules with
// random algorithms and limits, costs from 0 to capacity+1, time moving
// forward by up to two periods and sometimes backwards.
func RandomWorkload(seed uint64, steps int) []Call {
	rng := rand.New(rand.NewPCG(seed, 42))
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 3 * time.Second, time.Minute}
	type rule struct {
		alg   algorithms.Algorithm
		limit algorithms.Limit
	}
	rules := make([]rule, 1+rng.IntN(3))
	for i := range rules {
		r := rule{alg: algorithms.Algorithms[rng.IntN(len(algorithms.Algorithms))]}
		r.limit = algorithms.Limit{Rate: 1 + rng.Int64N(20), Period: periods[rng.IntN(len(periods))]}
		if (r.alg == algorithms.TokenBucket || r.alg == algorithms.GCRA) && rng.IntN(2) == 0 {
			r.limit.Burst = 1 + rng.Int64N(25)
		}
		rules[i] = r
	}
	now := T0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
	var out []Call
	for range steps {
		p := rules[0].limit.Period
		switch d := rng.IntN(10); {
		case d == 0:
			now = now.Add(-time.Duration(rng.Int64N(int64(p))))
		case d < 4:
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(2*p/time.Microsecond))) * time.Microsecond / 5)
		}
		c := Call{At: now}
		for i, r := range rules {
			if i > 0 && rng.IntN(3) == 0 {
				continue
			}
			c.Checks = append(c.Checks, algorithms.Check{
				Key:       fmt.Sprintf("r%d:{%c}", i, 'a'+rng.IntN(2)),
				Algorithm: r.alg,
				Limit:     r.limit,
				Cost:      rng.Int64N(r.limit.Capacity(r.alg) + 2),
				Lease:     uint64(len(out))*4 + uint64(i) + 1, // concurrency checks
			})
		}
		out = append(out, c)
	}
	return out
}

// Run sets c to cl's time and asks b about cl's checks, their keys
// prefixed with prefix.
func Run(t *testing.T, b algorithms.Backend, c *Clock, prefix string, cl Call) []algorithms.Result {
	t.Helper()
	c.T = cl.At
	checks := make([]algorithms.Check, len(cl.Checks))
	for i, ch := range cl.Checks {
		ch.Key = prefix + ch.Key
		checks[i] = ch
	}
	res := make([]algorithms.Result, len(checks))
	if err := b.Allow(context.Background(), checks, res); err != nil {
		t.Fatalf("Allow at %v: %v", cl.At, err)
	}
	return res
}

// LayeredChecks returns n GCRA checks of limit on one key material, as a
// rule set layered on one client makes them: keys prefix+"r<i>:{k}".
func LayeredChecks(prefix string, n int, limit algorithms.Limit) []algorithms.Check {
	checks := make([]algorithms.Check, n)
	for i := range checks {
		checks[i] = algorithms.Check{Key: prefix + "r" + strconv.Itoa(i) + ":{k}", Algorithm: algorithms.GCRA, Limit: limit}
	}
	return checks
}

// ScriptStats sums calls and usec of evalsha and eval from lines of INFO
// commandstats like "cmdstat_evalsha:calls=10,usec=52,usec_per_call=5.20,...".
func ScriptStats(ctx context.Context, c *redis.Client) (calls, usec float64) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			rest, ok = strings.CutPrefix(strings.TrimSpace(line), "cmdstat_eval:")
		}
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += f
			case "usec":
				usec += f
			}
		}
	}
	return calls, usec
}

// Scaled returns c with its time offset from t0 and its periods multiplied
// by f: the same workload, slower.
func Scaled(c Call, f int64) Call {
	out := Call{At: T0.Add(c.At.Sub(T0) * time.Duration(f)), Checks: append([]algorithms.Check(nil), c.Checks...)}
	for j := range out.Checks {
		out.Checks[j].Limit.Period *= time.Duration(f)
	}
	return out
}

// HammerTwo sends check from 64 goroutines, 5 calls each, alternating
// between two backends (two application instances), all released
// together, and returns how many calls were allowed and denied.
func HammerTwo(t *testing.T, backends []algorithms.Backend, check algorithms.Check) (allowed, denied int64) {
	t.Helper()
	var a, d atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 64 {
		wg.Go(func() {
			<-start
			res := make([]algorithms.Result, 1)
			for range 5 {
				if err := backends[g%2].Allow(context.Background(), []algorithms.Check{check}, res); err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					a.Add(1)
				} else {
					d.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return a.Load(), d.Load()
}
