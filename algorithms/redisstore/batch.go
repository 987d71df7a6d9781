package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
)

// Batched decisions. When calls queue behind the round trips in flight,
// the pipeline that sends the queue decides the queued decide calls of one
// server (on a cluster, of one hash slot) with one EVALSHA of a batch
// script (batch_<algorithm> when every check of the batch is of one
// algorithm, batch_all otherwise: docs/scripts/) instead of one EVALSHA per call. The script
// decides the calls one after another, each exactly as its own script
// (one-check or dispatch) would decide it alone at that point: atomically
// and all-or-nothing, writing only when every check of the call passes,
// with the same Results, state, TTLs and marker keys. Redis then pays the
// fixed cost of a script (and of reading the clock) once per batch instead
// of once per call. Refunds keep one EVALSHA each.
//
// A call that raises an error in the batch script (a key of another type,
// state it cannot read) does not fail the others: the script reports it,
// and the call then runs its own script alone, which replies the error
// with the same classification as always ([algorithms.ErrKeyState] or
// not).

// maxBatchCalls bounds the calls one batch script decides, so that one
// script does not hold the server for long: a longer queue is cut into
// several batches, sent in the same pipeline.
const maxBatchCalls = 64

// minBatchCalls is the fewest calls that one batch script decides: a
// batch script defines the functions of a whole algorithm, which its
// calls share, so on Redis 7 a batch of 2 costs the server more per check
// than two one-check scripts, a batch of 4 about as much, and larger ones
// less (BenchmarkScripts). Smaller groups go as their own scripts, in the
// same pipeline: one round trip all the same. Calls whose checks are all
// of one algorithm with a flat batch loop (flatBatch) need only
// minFlatBatchCalls: lua/batch_gcra.lua (GCRA) and lua/batch_fast.lua
// (fixed window, sliding window, token bucket) decide their one-check
// calls before any other function is defined, and a batch of 2 already
// costs less per check than one-check scripts.
const (
	minBatchCalls     = 4
	minFlatBatchCalls = 2
)

// flatBatch, indexed by Algorithm, holds the algorithms whose batch
// script starts with a flat loop.
var flatBatch = [algorithms.Concurrency + 1]bool{
	algorithms.GCRA:          true,
	algorithms.FixedWindow:   true,
	algorithms.SlidingWindow: true,
	algorithms.TokenBucket:   true,
}

// minBatch returns the fewest calls a batch script decides for calls.
func minBatch(calls []*call) int {
	if k := kindOf(calls); k != mixed && flatBatch[k] {
		return minFlatBatchCalls
	}
	return minBatchCalls
}

// kindOf returns the batch kind of calls: that of each, when they all have
// one (their batch script is batchScripts[kind]), else mixed
// (batchAllScript).
func kindOf(calls []*call) int {
	k := calls[0].batch
	if slices.ContainsFunc(calls[1:], func(c *call) bool { return c.batch != k }) {
		return mixed
	}
	return k
}

// batchScripts, indexed by Algorithm, decide calls whose checks are all of
// that algorithm; batchAllScript decides calls of any algorithms.
var (
	batchScripts = func() (s [algorithms.Concurrency + 1]*redis.Script) {
		for _, a := range algorithms.Algorithms {
			s[a] = redis.NewScript(luaScript("batch_" + a.String()))
		}
		return s
	}()
	batchAllScript = redis.NewScript(luaScript("batch_all"))
)

// mixed is the batch kind of a call whose checks are of several algorithms.
const mixed = -1

// errAlone answers a call that raised an error in a batch script: it is
// run again alone, to reply its own error.
var errAlone = errors.New("redlimit: call failed in a batch")

// batchKind returns how a call of s with keys and args is decided in a
// batch: 0 if it is not (a refund), the Algorithm of its checks if they are
// all of one, else mixed; and its number of checks.
func batchKind(s *redis.Script, keys []string, args []any) (kind, n int) {
	if s == script {
		mode, _ := args[1].(int)
		switch mode {
		case modeDecide:
			n = len(keys)
		case modeDecideSharded:
			n = len(keys) / 2
		case modeDecidePart:
			n = (len(keys) - 1) / 2
		default:
			return 0, 0
		}
		for i := range n {
			a, _ := args[callArgs+checkArgs*i+argAlg].(int64)
			if a == int64(calc.Calendar) {
				return 0, 0 // calendar calls are not batched
			}
			switch {
			case i == 0:
				kind = int(a)
			case int(a) != kind:
				kind = mixed
			}
		}
		return kind, n
	}
	for a, one := range oneScripts {
		if one == s && one != nil {
			return a, 1
		}
	}
	return 0, 0
}

// unit is one script of a pipeline: a call alone, or a batch of calls.
type unit struct {
	script *redis.Script
	keys   []string
	args   []any
	calls  []*call // several: a batch
	cmd    *redis.IntSliceCmd
}

// units groups live calls into the scripts of one pipeline: the batchable
// calls of each hash slot (of the server, when not on a cluster) into
// batches of minBatch to maxBatchCalls (a smaller group is sent as its
// calls' own scripts), every other call alone, in queue order of each
// group's first call.
func units(live []*call) []unit {
	open := map[int]int{} // slot -> index+1 in us of the batch filling up
	us := make([]unit, 0, len(live))
	for _, c := range live {
		if c.batch == 0 {
			us = append(us, unit{script: c.script, keys: c.keys, args: c.args, calls: []*call{c}})
			continue
		}
		j := open[c.slot] - 1
		if j < 0 || len(us[j].calls) == maxBatchCalls {
			us = append(us, unit{calls: make([]*call, 0, 8)})
			j = len(us) - 1
			open[c.slot] = j + 1
		}
		us[j].calls = append(us[j].calls, c)
	}
	if slices.ContainsFunc(us, func(u unit) bool { return u.script == nil && len(u.calls) < minBatch(u.calls) }) {
		alone := make([]unit, 0, len(live))
		for _, u := range us {
			if u.script != nil || len(u.calls) >= minBatch(u.calls) {
				alone = append(alone, u)
				continue
			}
			for _, c := range u.calls {
				alone = append(alone, unit{script: c.script, keys: c.keys, args: c.args, calls: []*call{c}})
			}
		}
		us = alone
	}
	for i := range us {
		u := &us[i]
		if u.script != nil {
			continue
		}
		u.script = batchAllScript
		if k := kindOf(u.calls); k != mixed {
			u.script = batchScripts[k]
		}
		var nk, na int
		for _, c := range u.calls {
			nk += len(c.keys)
			na += 3 + len(c.args)
		}
		u.keys = make([]string, 0, nk)
		u.args = make([]any, 0, na)
		var last *call // the last call of one check
		for _, c := range u.calls {
			u.keys = append(u.keys, c.keys...)
			if c.script == script {
				// now, mode, checks[, window]: dispatch's ARGV
				u.args = append(append(u.args, c.n), c.args...)
				continue
			}
			// now, checks[, window]: one.lua's ARGV; its keys say its mode
			mode := modeDecide
			switch len(c.keys) {
			case 2:
				mode = modeDecideSharded
			case 3:
				mode = modeDecidePart
			}
			if mode != modeDecidePart && last != nil && last.batch == c.batch && slices.Equal(last.args[argAlg+1:checkArgs], c.args[argAlg+1:checkArgs]) {
				// the check of the last one: its numbers are not sent again
				u.args = append(u.args, 0, c.args[0], mode)
				continue
			}
			last = c
			u.args = append(append(u.args, 1, c.args[0], mode, c.batch), c.args[1:]...)
		}
	}
	return us
}

// replied is how many values a batch script replies for c: 4 per check,
// and the now for a call of several checks or one part of a call spanning
// slots (a commit marker), which alone use it (see lua/batch.lua).
func (c *call) replied() int {
	if c.n > 1 || len(c.keys) == 3 {
		return 4*c.n + 1
	}
	return 4
}

// answer gives each call of u its reply.
func (u *unit) answer() {
	vals, err := u.cmd.Result()
	if len(u.calls) == 1 {
		c := u.calls[0]
		c.vals, c.err = vals, err
		c.done <- struct{}{}
		return
	}
	want := 0
	for _, c := range u.calls {
		want += c.replied()
	}
	if err == nil && len(vals) != want {
		err = fmt.Errorf("batch script reply has %d values, want %d", len(vals), want)
	}
	o := 0
	for _, c := range u.calls {
		w := c.replied()
		switch {
		case err != nil:
			c.err = err
		case vals[o] == -1: // see lua/batch.lua
			c.err = errAlone
		default:
			c.vals = vals[o : o+w]
		}
		o += w
		c.done <- struct{}{}
	}
}

// sources maps each script the backend runs to its source, which
// evalCmd sends when the server answers NOSCRIPT.
var sources = func() map[*redis.Script]string {
	m := map[*redis.Script]string{script: luaScript("multi"), batchAllScript: luaScript("batch_all")}
	for _, a := range algorithms.Algorithms {
		m[oneScripts[a]] = luaScript("one_" + a.String())
		m[batchScripts[a]] = luaScript("batch_" + a.String())
		if leanScripts[a] != nil {
			m[leanScripts[a]] = luaScript("lean_" + a.String())
		}
	}
	return m
}()

// evalCmd is an EVALSHA of s (an EVAL of its source if eval) whose reply,
// an array of integers, is read straight into an []int64, without the
// interface values a *redis.Cmd holds.
func evalCmd(ctx context.Context, s *redis.Script, eval bool, keys []string, args []any) *redis.IntSliceCmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	if eval {
		a = append(a, "eval", sources[s], len(keys))
	} else {
		a = append(a, "evalsha", boxedHash(s), len(keys))
	}
	for _, k := range keys {
		a = append(a, k)
	}
	return redis.NewIntSliceCmd(ctx, append(a, args...)...)
}

// hashes holds each script's SHA1 boxed in an interface value once, so
// that an EVALSHA's arguments do not box it again on every call.
var hashes sync.Map // *redis.Script -> any (string)

func boxedHash(s *redis.Script) any {
	if h, ok := hashes.Load(s); ok {
		return h
	}
	h, _ := hashes.LoadOrStore(s, any(s.Hash()))
	return h
}

// noScript reports whether err is the server's NOSCRIPT (checked for nil
// first: redis.HasErrorPrefix allocates on every call).
func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// runScript runs s on c as go-redis's Script.Run does (EVALSHA, then EVAL
// on NOSCRIPT: the server did not run the EVALSHA, so the EVAL is the
// script's first run), reading the reply as evalCmd does.
func runScript(ctx context.Context, c processor, s *redis.Script, keys []string, args []any) ([]int64, error) {
	if r, ok := c.(batching.ScriptRunner); ok {
		vals, err := r.RunScript(ctx, false, s.Hash(), keys, args)
		if noScript(err) {
			vals, err = r.RunScript(ctx, true, sources[s], keys, args)
		}
		return vals, err
	}
	cmd := evalCmd(ctx, s, false, keys, args)
	_ = c.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		cmd = evalCmd(ctx, s, true, keys, args)
		_ = c.Process(ctx, cmd)
	}
	return cmd.Result()
}
