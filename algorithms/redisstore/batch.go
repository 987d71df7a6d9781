package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/lua"
)

// Batched decisions. When calls queue behind the round trips in flight on
// one server, the pipeline that sends the queue carries, for the one-check
// calls of each algorithm, one EVALSHA of that algorithm's batch script
// ([lua.Batch]) instead of one EVALSHA per call. The script decides the
// calls one after another, each exactly as its own one-check script would
// decide it alone at that point: atomically, writing only when it is
// allowed, with the same Results, state and TTL. Redis then pays the fixed
// cost of a script (and of reading the clock) once per batch instead of
// once per call. Calls of several checks, and calls on a cluster or a Ring
// (which carry marker keys), keep one EVALSHA each in the same pipeline.
//
// A call whose check raises an error in the batch script (a key of another
// type, state it cannot read) does not fail the others: the script reports
// it, and the call then runs its own one-check script alone, which replies
// the error with the same classification as always ([algorithms.ErrKeyState]
// or not).

// maxBatchCalls bounds the calls one batch script decides, so that one
// script does not hold the server for long: a longer queue is cut into
// several batches, sent in the same pipeline.
const maxBatchCalls = 64

// batchScripts, indexed by Algorithm, decide several one-check calls.
var batchScripts = func() (s [algorithms.GCRA + 1]*redis.Script) {
	for _, a := range algorithms.Algorithms {
		s[a] = redis.NewScript(lua.Batch(a.String()))
	}
	return s
}()

// batchWidth is the reply of one call in a batch: a status, then the five
// integers of a one-check reply.
const batchWidth = 6

// errAlone answers a call that raised an error in a batch script: it is
// run again alone, to reply its own error.
var errAlone = errors.New("redlimit: call failed in a batch")

// batchable returns the index in batchScripts of the script that can decide
// a call of s with keys in a batch, or -1: a one-check script without
// marker keys.
func batchable(s *redis.Script, keys []string) int {
	if len(keys) != 1 {
		return -1
	}
	for i, one := range oneScripts {
		if one == s && one != nil {
			return i
		}
	}
	return -1
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
// calls of each algorithm into batches of up to maxBatchCalls (a batch of
// one is the call's own script), every other call alone, in queue order
// of each group's first call.
func units(live []*call) []unit {
	var open [algorithms.GCRA + 1]int // index+1 in us of the batch filling up
	us := make([]unit, 0, len(live))
	for _, c := range live {
		if c.batch < 0 {
			us = append(us, unit{script: c.script, keys: c.keys, args: c.args, calls: []*call{c}})
			continue
		}
		j := open[c.batch] - 1
		if j < 0 || len(us[j].calls) == maxBatchCalls {
			us = append(us, unit{calls: make([]*call, 0, 8)})
			j = len(us) - 1
			open[c.batch] = j + 1
		}
		us[j].calls = append(us[j].calls, c)
	}
	for i := range us {
		u := &us[i]
		if u.script != nil {
			continue
		}
		if len(u.calls) == 1 {
			c := u.calls[0]
			u.script, u.keys, u.args = c.script, c.keys, c.args
			continue
		}
		u.script = batchScripts[u.calls[0].batch]
		u.keys = make([]string, 0, len(u.calls))
		u.args = make([]any, 0, 6*len(u.calls))
		for _, c := range u.calls {
			u.keys = append(u.keys, c.keys[0])
			u.args = append(u.args, c.args...)
		}
	}
	return us
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
	if err == nil && len(vals) != batchWidth*len(u.calls) {
		err = fmt.Errorf("batch script reply has %d values, want %d", len(vals), batchWidth*len(u.calls))
	}
	for i, c := range u.calls {
		switch {
		case err != nil:
			c.err = err
		case vals[batchWidth*i] == 1:
			c.vals = vals[batchWidth*i+1 : batchWidth*(i+1)]
		default:
			c.err = errAlone
		}
		c.done <- struct{}{}
	}
}

// sources maps each script the backend runs to its source, which
// evalCmd sends when the server answers NOSCRIPT.
var sources = func() map[*redis.Script]string {
	m := map[*redis.Script]string{script: lua.Multi()}
	for _, a := range algorithms.Algorithms {
		m[oneScripts[a]] = lua.Single(a.String())
		m[batchScripts[a]] = lua.Batch(a.String())
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
		a = append(a, "evalsha", s.Hash(), len(keys))
	}
	for _, k := range keys {
		a = append(a, k)
	}
	return redis.NewIntSliceCmd(ctx, append(a, args...)...)
}

// runScript runs s on c as go-redis's Script.Run does (EVALSHA, then EVAL
// on NOSCRIPT), reading the reply as evalCmd does.
func runScript(ctx context.Context, c pipeClient, s *redis.Script, keys []string, args []any) ([]int64, error) {
	cmd := evalCmd(ctx, s, false, keys, args)
	_ = c.Process(ctx, cmd)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = evalCmd(ctx, s, true, keys, args)
		_ = c.Process(ctx, cmd)
	}
	return cmd.Result()
}
