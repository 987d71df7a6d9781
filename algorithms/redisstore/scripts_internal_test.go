package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// scriptAlgorithms are the numbers a check's algorithm travels as in
// ARGV, named as package lua names them: every algorithms.Algorithm, and
// a calendar check.
func scriptAlgorithms() map[string]uint8 {
	ids := map[string]uint8{"calendar": calc.Calendar}
	for _, a := range algorithms.Algorithms {
		ids[a.String()] = uint8(a)
	}
	return ids
}

// layoutParams returns the Params of a check of alg whose numbers differ
// from one another (capacity 10, cost 3, a period of 4s: r = 3, u =
// 2000000 for the buckets), so that two of them swapped in ARGV change
// the reply.
func layoutParams(alg uint8, now int64) calc.Params {
	switch alg {
	case calc.Calendar:
		return calc.PrepareCalendar(calc.Day, time.UTC, 10, 3, now)
	case calc.Concurrency:
		p := calc.Prepare(alg, 10, 4*time.Second, 0, 3)
		p.R = 42 // the lease
		return p
	}
	return calc.Prepare(alg, 6, 4*time.Second, 10, 3)
}

// TestScriptNumbers: the scripts number the algorithms as
// algorithms.Algorithm and calc do, and the tables the scripts call an
// algorithm's functions through (dispatch.lua's checks, writes and
// refunds, refund.lua's late, cancel.lua's undo, batch.lua's checks,
// writes and fasts) hold, under each number, that algorithm: a check sent
// with its number to the multi script and to the batch scripts replies as
// the algorithm's own script does (writing a key of the same type), and
// the refund and cancel scripts know
// exactly the numbers they give back.
func TestScriptNumbers(t *testing.T) {
	t.Parallel()
	ids := scriptAlgorithms()
	for name := range ids {
		if luaScript("one_"+name) == "" {
			t.Errorf("no one-check script of %s", name)
		}
	}

	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	now := backendtest.T0.Add(time.Hour).UnixMicro()
	run := func(src string, keys []string, args ...any) ([]int64, error) {
		return redis.NewScript(src).Run(ctx, client, keys, args...).Int64Slice()
	}

	for name, id := range ids {
		p := layoutParams(id, now)
		one, err := run(luaScript("one_"+name), []string{"one:" + name}, oneArgs(&p, now)...)
		if err != nil {
			t.Fatalf("%s: one-check script: %v", name, err)
		}
		check := []algorithms.Check{{Key: "multi:" + name}}
		keys, args := scriptArgs(check, []calc.Params{p}, now, modeDecide, 0)
		multi, err := run(luaScript("multi"), keys, args...)
		if err != nil || len(multi) != 5 || !slices.Equal(multi[:4], one[:4]) {
			t.Errorf("multi script, check of algorithm %d (%s) = %v, %v; want %v as its own script replies", id, name, multi, err, one[:4])
		}
		if id != calc.Calendar { // calendar checks are never batched
			batch := append([]any{1, now, modeDecide}, args[2:]...)
			for _, src := range []string{luaScript("batch_" + name), luaScript("batch_all")} {
				got, err := run(src, []string{"batch:" + name}, batch...)
				if err != nil || len(got) != 4 || !slices.Equal(got, one[:4]) {
					t.Errorf("batch script, check of algorithm %d (%s) = %v, %v; want %v as its own script replies", id, name, got, err, one[:4])
				}
				mr.Del("batch:" + name)
			}
		}
		if mr.Type("multi:"+name) != mr.Type("one:"+name) {
			t.Errorf("algorithm %d (%s): the multi script wrote a %s key, its own script a %s", id, name, mr.Type("multi:"+name), mr.Type("one:"+name))
		}

		// refund.lua gives back every algorithm's units but concurrency's
		// (released, never refunded); cancel.lua every algorithm's.
		refund := []any{now, now, int64(id), p.Cap, p.Period, p.R, p.U, int64(1), int64(1)}
		_, err = run(luaScript("refund"), []string{"refund:" + name, "refund:marker"}, refund...)
		if unknown := err != nil && strings.Contains(err.Error(), "unknown algorithm"); unknown != (id == calc.Concurrency) {
			t.Errorf("refund script, algorithm %d (%s): %v", id, name, err)
		}
		cancel := append([]any{now, 1000}, args[2:]...)
		if _, err := run(luaScript("cancel"), []string{"cancel:" + name, "cancel:marker:" + name}, cancel...); err != nil {
			t.Errorf("cancel script, algorithm %d (%s): %v", id, name, err)
		}
	}
	for _, id := range []int64{0, int64(calc.Calendar) + 1} {
		args := []any{now, modeDecide, id, 10, 1000, 1, 1, 1}
		if _, err := run(luaScript("multi"), []string{"unknown"}, args...); err == nil || !strings.Contains(err.Error(), "unknown algorithm") {
			t.Errorf("multi script, algorithm %d: %v, want unknown algorithm", id, err)
		}
		args[1] = 1000
		if _, err := run(luaScript("cancel"), []string{"unknown", "unknown:marker"}, args...); err == nil || !strings.Contains(err.Error(), "unknown algorithm") {
			t.Errorf("cancel script, algorithm %d: %v, want unknown algorithm", id, err)
		}
	}
}

// TestScriptArgs: the scripts read a check's numbers where the Go side
// lays them out (args.go): every algorithm's check, with numbers that all
// differ, sent by oneArgs to its one-check script, by scriptArgs as two
// checks to the multi script, and by units as calls of one and of two
// checks to its batch script, replies, twice on the same keys, what calc
// computes for it. (refund.lua's layout, putCheck's too, is played
// against memstore by the refund differential tests.)
func TestScriptArgs(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	t0 := backendtest.T0.Add(time.Hour).UnixMicro()
	const step = 100_000 // µs between the two rounds
	run := func(s *redis.Script, keys []string, args []any) []int64 {
		t.Helper()
		vals, err := s.Run(ctx, client, keys, args...).Int64Slice()
		if err != nil {
			t.Fatalf("%v", err)
		}
		return vals
	}
	for name, id := range scriptAlgorithms() {
		// want[r]: calc's reply to round r on a fresh key
		var s calc.State
		var want [2][4]int64
		for r := range want {
			now := t0 + int64(r)*step
			p := layoutParams(id, now)
			o := s.Eval(&p, now, r > 0, true)
			allowed := int64(0)
			if o.Allowed {
				allowed = 1
			}
			want[r] = [4]int64{allowed, max(o.Remaining, 0), o.Retry, o.Reset}
		}
		expect := func(what string, r int, got []int64) {
			t.Helper()
			if len(got) < 4 || [4]int64(got[:4]) != want[r] {
				t.Errorf("%s (%s), round %d: reply %v, want %v as calc computes", what, name, r, got, want[r])
			}
		}
		for r := range want {
			now := t0 + int64(r)*step
			p := layoutParams(id, now)
			expect("one-check script", r, run(oneScript(id), []string{"one:" + name}, oneArgs(&p, now)))

			checks := []algorithms.Check{{Key: "multi:a:" + name}, {Key: "multi:b:" + name}}
			keys, args := scriptArgs(checks, []calc.Params{p, p}, now, modeDecide, 0)
			vals := run(script, keys, args)
			expect("multi script, check 1", r, vals)
			expect("multi script, check 2", r, vals[4:])

			if id == calc.Calendar {
				continue // never batched
			}
			var cs []*call
			for i := range 8 {
				checks := []algorithms.Check{{Key: fmt.Sprintf("batch:%d:a:%s", i, name)}}
				if i%3 == 2 {
					checks = append(checks, algorithms.Check{Key: fmt.Sprintf("batch:%d:b:%s", i, name)})
				}
				ps := make([]calc.Params, len(checks))
				for j := range ps {
					ps[j] = p
				}
				s, keys, args := decideRequest(checks, ps, now, markers{})
				c := &call{script: s, keys: keys, args: args}
				c.batch, c.n = batchKind(s, keys, args)
				cs = append(cs, c)
			}
			us := units(cs)
			if len(us) != 1 || us[0].script != batchScripts[id] {
				t.Fatalf("%s: %d calls make %d scripts, want their batch script", name, len(cs), len(us))
			}
			vals = run(us[0].script, us[0].keys, us[0].args)
			o := 0
			for i, c := range cs {
				for j := range c.n {
					expect(fmt.Sprintf("batch script, call %d check %d", i, j+1), r, vals[o+4*j:])
				}
				o += c.replied()
			}
		}
	}
}

// allScripts returns every script the store runs, sorted.
func allScripts() []string {
	var out []string
	for _, s := range sources {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
