package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua"
)

// TestConformanceEveryScript plays every conformance vector
// (testdata/vectors) through each script a check can be decided by, on a
// real redis-server whose wall clock is the vector's (libfaketime), so
// that the scripts on the server's clock, which read TIME and TTLs, are
// held to the vectors as the injected clock's are (TestConformance plays
// them on an injected clock, where neither lean scripts nor the string
// layout run):
//
//   - server clock: one check on the server's clock goes as its lean
//     script (fixed window, GCRA) or its one-check script, several as the
//     multi script;
//   - server clock, batched: each call of one check queued behind the
//     pipeline with three others of its limit on keys of their own, so
//     that the pipeline sends the four as batch_<algorithm>;
//   - server clock, batched with others: the same with three calls of other
//     algorithms, sent as batch_all;
//   - injected clock, batched: batch_<algorithm> with the hash layouts.
//
// A scenario with a step at a time of no whole ms is skipped on the
// server's clock, whose expiries are ms (the compat test's rule), and so
// is one whose vectors hold the hash layout's answer where the string
// layout differs by design (stringLayoutDiffers). The server's SLOWLOG then
// proves which scripts ran: every generated script a variant is meant to
// reach must appear (by its SHA1), so that a change to how calls are
// routed cannot leave a variant untested.
func TestConformanceEveryScript(t *testing.T) {
	redistest.Require(t)
	preload := faketimePreload(t)
	scenarios := backendtest.LoadVectors(t)
	type variant struct {
		name   string
		server bool // on the server's clock, else an injected one
		pad    func(c algorithms.Check) []algorithms.Check
		want   []string // scripts the SLOWLOG must show
	}
	same := func(c algorithms.Check) []algorithms.Check {
		var pad []algorithms.Check
		for i := range 3 {
			p := c
			p.Key = fmt.Sprintf("pad%d:%s", i, c.Key)
			p.RefundWindow, p.Lease = 0, 0
			pad = append(pad, p)
		}
		return pad
	}
	others := func(c algorithms.Check) []algorithms.Check {
		var pad []algorithms.Check
		for i, a := range []algorithms.Algorithm{algorithms.GCRA, algorithms.FixedWindow, algorithms.SlidingLog, algorithms.TokenBucket} {
			if a == c.Algorithm || len(pad) == 3 {
				continue
			}
			pad = append(pad, algorithms.Check{Key: fmt.Sprintf("pad%d:%s", i, c.Key), Algorithm: a, Limit: algorithms.PerSecond(1000), Cost: 1})
		}
		return pad
	}
	variants := []variant{
		{name: "server clock", server: true, want: []string{"lean_gcra", "lean_fixed_window", "one_sliding_log", "one_sliding_window", "one_token_bucket", "one_concurrency", "one_calendar", "multi"}},
		{name: "server clock, batched", server: true, pad: same, want: []string{"batch_gcra", "batch_fixed_window", "batch_sliding_log", "batch_sliding_window", "batch_token_bucket"}},
		{name: "server clock, batched with others", server: true, pad: others, want: []string{"batch_all"}},
		{name: "injected clock, batched", pad: same, want: []string{"batch_gcra", "batch_fixed_window", "batch_sliding_log", "batch_sliding_window", "batch_token_bucket"}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			srv := startFrozen(t, preload, backendtest.T0)
			c := srv.Client(t)
			ctx := context.Background()
			for _, cmd := range [][]any{{"config", "set", "slowlog-log-slower-than", "0"}, {"config", "set", "slowlog-max-len", "1000000"}, {"slowlog", "reset"}} {
				if err := c.Do(ctx, cmd...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			played, skipped := 0, 0
			for _, sc := range scenarios {
				if v.server && (!wholeMs(sc) || stringLayoutDiffers[sc.File+"/"+sc.Name]) {
					skipped++
					continue
				}
				played++
				t.Run(sc.File+"/"+sc.Name, func(t *testing.T) {
					clock := &backendtest.Clock{T: backendtest.T0}
					cfg := redisstore.Config{}
					if !v.server {
						cfg.Now = clock.Now
					}
					b, err := redisstore.New(c, cfg)
					if err != nil {
						t.Fatal(err)
					}
					var backend algorithms.Backend = b
					if v.pad != nil {
						backend = padded{Store: b, t: t, pad: v.pad}
					}
					backendtest.Play(t, &backendtest.Harness{Backend: backend, Clock: clock, Prefix: redistest.Prefix(t) + v.name, Advance: srv.set}, sc, false)
				})
			}
			t.Logf("%d scenarios played, %d skipped (times of no whole ms, or the string layout's documented difference)", played, skipped)
			ran := scriptsRun(t, c)
			for _, name := range v.want {
				if ran[name] == 0 {
					t.Errorf("no step ran %s: the variant does not reach it (scripts run: %v)", name, ran)
				}
			}
		})
	}
}

// stringLayoutDiffers names the scenarios whose vectors hold the hash
// layout's answer where the string layout (the server's clock, a period
// of whole ms) answers otherwise by design: a string does not store its
// window's start, so a count written under a longer period counts until
// its key expires (lua/fixed_window.lua, docs/algorithms.md).
var stringLayoutDiffers = map[string]bool{
	"limit_change.txt/fixed window: a shorter period starts its own window": true,
}

// padded is a Store whose one-check calls are queued behind its pipeline
// with pad's calls, so that they are decided in a batch script.
type padded struct {
	*redisstore.Store
	t   *testing.T
	pad func(algorithms.Check) []algorithms.Check
}

func (p padded) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if len(checks) != 1 || checks[0].RefundWindow > 0 || checks[0].Algorithm == algorithms.Concurrency {
		return p.Store.Allow(ctx, checks, results)
	}
	calls := [][]algorithms.Check{checks}
	for _, c := range p.pad(checks[0]) {
		calls = append(calls, []algorithms.Check{c})
	}
	rs, errs, _ := redisstore.AllowQueued(p.t, p.Store, calls)
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("call %d of the batch: %w", i, err)
		}
	}
	copy(results, rs[0])
	return nil
}

// wholeMs reports whether every step of sc is at a whole ms.
func wholeMs(sc *backendtest.Scenario) bool {
	for _, st := range sc.Steps {
		if sc.Start.Add(st.At).Nanosecond()%int(time.Millisecond) != 0 {
			return false
		}
	}
	return true
}

// scriptsRun counts the EVALSHA and EVAL commands of the server's SLOWLOG
// by the generated script they ran, named as lua.Script names it.
func scriptsRun(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	byHash := map[string]string{}
	for _, name := range scriptNames() {
		src, ok := lua.Script(name)
		if !ok {
			t.Fatalf("no script %s", name)
		}
		byHash[redis.NewScript(src).Hash()] = name
	}
	entries, err := c.SlowLogGet(context.Background(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, e := range entries {
		if len(e.Args) < 2 {
			continue
		}
		switch strings.ToLower(e.Args[0]) {
		case "evalsha":
			if name, ok := byHash[e.Args[1]]; ok {
				ran[name]++
			}
		case "eval":
			if name, ok := byHash[redis.NewScript(e.Args[1]).Hash()]; ok {
				ran[name]++
			}
		}
	}
	return ran
}

// scriptNames lists the names of the generated scripts the store runs.
func scriptNames() []string {
	names := []string{"multi", "batch_all", "block", "refund", "cancel", "release", "renew", "one_calendar", "lean_gcra", "lean_fixed_window"}
	for _, a := range algorithms.Algorithms {
		names = append(names, "one_"+a.String(), "batch_"+a.String())
	}
	slices.Sort(names)
	return slices.Compact(names)
}
