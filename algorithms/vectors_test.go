package algorithms_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// The vector format (testdata/vectors/*.txt), one step per line:
//
//	scenario <name>
//	limit <name> <algorithm> rate=<n> period=<duration> [burst=<n>]
//	keys shared
//	<offset> <check> [<check>...] -> <result> [| <result>...]
//
// where a check is <limit>/<key>[*<cost>] and a result is
// allow|deny <remaining> <retry_after> <reset_after>. Each limit has keys of
// its own, unless the scenario says "keys shared": then a key is the same
// whatever limit checks it, and a scenario plays one key whose limit
// changes. Offsets are durations
// from t0, a Unix time aligned to a whole day, and may go backwards.
// '#' starts a comment.

// t0 is 2023-11-15T00:00:00Z: aligned to seconds, minutes, hours and days, so
// fixed windows start at t0.
var t0 = time.Unix(19676*86400, 0)

type vecLimit struct {
	alg   algorithms.Algorithm
	limit algorithms.Limit
}

type vecStep struct {
	line   int
	at     time.Duration
	checks []vecCheck
	want   []algorithms.Result
	text   string
}

type vecCheck struct {
	limit string
	key   string
	cost  int64
}

type scenario struct {
	file, name string
	limits     map[string]vecLimit
	shared     bool // keys are shared by the limits
	steps      []vecStep
}

func loadVectors(t testing.TB) []*scenario {
	t.Helper()
	files, err := filepath.Glob("../testdata/vectors/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	var all []*scenario
	for _, f := range files {
		all = append(all, parseVectors(t, f)...)
	}
	return all
}

func parseVectors(t testing.TB, path string) []*scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*scenario
	var cur *scenario
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
			cur = &scenario{file: filepath.Base(path), name: strings.Join(fields[1:], " "), limits: map[string]vecLimit{}}
			out = append(out, cur)
		case "keys":
			if cur == nil || len(fields) != 2 || fields[1] != "shared" {
				fail("bad keys line: want \"keys shared\"")
			}
			cur.shared = true
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
				default:
					fail("unknown limit field %q", k)
				}
				if err != nil {
					fail("%v", err)
				}
			}
			cur.limits[fields[1]] = vecLimit{alg, l}
		default:
			if cur == nil {
				fail("step before scenario")
			}
			st := vecStep{line: n, text: strings.Join(fields, " ")}
			if st.at, err = time.ParseDuration(fields[0]); err != nil {
				fail("offset: %v", err)
			}
			arrow := indexOf(fields, "->")
			if arrow < 2 {
				fail("no checks or no ->")
			}
			for _, c := range fields[1:arrow] {
				lim, rest, ok := strings.Cut(c, "/")
				if !ok {
					fail("check %q: want limit/key", c)
				}
				if _, ok := cur.limits[lim]; !ok {
					fail("unknown limit %q", lim)
				}
				vc := vecCheck{limit: lim, key: rest, cost: 1}
				if k, cost, ok := strings.Cut(rest, "*"); ok {
					vc.key = k
					if vc.cost, err = strconv.ParseInt(cost, 10, 64); err != nil {
						fail("cost: %v", err)
					}
				}
				st.checks = append(st.checks, vc)
			}
			for _, r := range strings.Split(strings.Join(fields[arrow+1:], " "), "|") {
				rf := strings.Fields(r)
				if len(rf) != 4 || rf[0] != "allow" && rf[0] != "deny" {
					fail("result %q: want allow|deny remaining retry reset", r)
				}
				var res algorithms.Result
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
				st.want = append(st.want, res)
			}
			if len(st.want) != len(st.checks) {
				fail("%d checks but %d results", len(st.checks), len(st.want))
			}
			for i, c := range st.checks {
				l := cur.limits[c.limit]
				st.want[i].Limit = l.limit.Capacity(l.alg)
			}
			cur.steps = append(cur.steps, st)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func formatResult(r algorithms.Result) string {
	verdict := "deny"
	if r.Allowed {
		verdict = "allow"
	}
	return fmt.Sprintf("%s %d %v %v", verdict, r.Remaining, r.RetryAfter, r.ResetAfter)
}

// clock is a settable clock for backends.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }
