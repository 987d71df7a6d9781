package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/lua"
)

// Lean scripts. A call of one check on the server's clock with no marker
// keys (one server or Sentinel, not a refundable call) of a fixed window
// or a GCRA limit is sent, when the pipeline has a round trip free for it,
// as the algorithm's lean script (docs/scripts/lean_fixed_window.lua,
// lean_gcra.lua) with only the numbers that script reads: 2 ARGV for a
// fixed window of cost 1, 3 for GCRA (4 for an emission interval of no
// whole µs), against 6 for the one-check script. Redis pays for every
// ARGV of every call (parsing it, a Lua string, a slot of the ARGV table:
// on Redis 7.0 about as much as an INCRBY), so the fixed window's lean
// script costs Redis about a quarter less per check than the one-check
// script, and less than ulule/limiter's counter; GCRA's about a tenth
// less, and less than redis_rate's (docs/performance.md, "Lean scripts").
// A lean script that meets a state it leaves to the general code (an
// older layout, another limit's value) writes nothing and replies empty,
// and the call goes on as the one-check script, as it would without lean
// scripts: one more round trip, once per key after a redeploy or a change
// of limit. A call that would queue for a round trip goes as the
// one-check script, which the pipeline batches.

// leanScripts, indexed by Algorithm, holds the lean scripts; nil for the
// algorithms without one.
var leanScripts = func() (s [algorithms.Concurrency + 1]*redis.Script) {
	for _, a := range algorithms.Algorithms {
		if src, ok := lua.Script("lean_" + a.String()); ok {
			s[a] = redis.NewScript(src)
		}
	}
	return s
}()

// maxExact is 2^53: Lua's numbers, doubles, hold every integer below it.
const maxExact = 1 << 53

// newLeanArgs returns the ARGV of p's lean script, as strings (cached by
// argsFor, so that no client formats them again per call), or nil when p
// has none or it does not apply: a fixed window's cost above the
// capacity; GCRA numbers Lua would not hold exactly. A fixed window sends
// its capacity and period (µs), and for a period of no whole ms its cost
// and "h" (a hash), GCRA its capacity, u and the suffix of a
// value its limit writes ("/" and its full window, calc.Tau), then r
// when the emission interval is no whole number of µs (r > 1) or a cost
// follows; each then its cost, unless it is 1.
func newLeanArgs(p *calc.Params) []any {
	var args []any
	switch algorithms.Algorithm(p.Alg) {
	case algorithms.FixedWindow:
		if p.Period <= 0 || p.Cost > p.Cap {
			return nil
		}
		args = []any{itoa(p.Cap), itoa(p.Period)}
		if p.Period%1000 != 0 {
			// the hash layout: the cost, then "h"
			return append(args, itoa(p.Cost), "h")
		}
	case algorithms.GCRA:
		if p.U <= 0 || p.R <= 0 || p.Cap > maxExact/p.U || p.Cost > maxExact/p.U {
			return nil
		}
		args = []any{itoa(p.Cap), itoa(p.U), "/" + itoa(calc.Tau(p))}
		if p.R != 1 || p.Cost != 1 {
			args = append(args, itoa(p.R))
		}
	default:
		return nil
	}
	if p.Cost != 1 {
		args = append(args, itoa(p.Cost))
	}
	return args
}

// itoa formats n for a cached ARGV: formatted once per limit, not by
// the client on every call.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// decideLean decides the one check of p on key with its lean script, when
// p has one and a round trip is free for it, into r. It reports false,
// having decided nothing and written nothing, when the check goes on as
// the one-check script: no lean script for p, no free round trip, or a
// state the lean script leaves to the one-check script.
func (b *Store) decideLean(ctx context.Context, key string, p *calc.Params, r *algorithms.Result) (bool, error) {
	// before the ARGV cache, which the one-check script reads next: an
	// algorithm without a lean script, or a calendar check (calc.Calendar,
	// past the algorithms)
	if int(p.Alg) >= len(leanScripts) || leanScripts[p.Alg] == nil {
		return false, nil
	}
	s := leanScripts[p.Alg]
	args := argsFor(p).lean
	if args == nil {
		return false, nil
	}
	keys := []string{key}
	var vals []int64
	var err error
	if b.pipe != nil {
		var sent bool
		if vals, sent, err = b.pipe.runAlone(ctx, s, keys, args); !sent {
			return false, nil
		}
		err = backendErr(err, keys)
	} else {
		vals, err = b.run(ctx, nil, s, keys, args)
	}
	if err != nil {
		return false, err
	}
	return decodeLean(vals, p, r)
}

// decodeLean turns a lean script's reply for p into r; false for an
// empty reply (see decideLean). A fixed window of a period of whole ms
// (a string) replies its count and reset_after ({count, reset}:
// calc.CountOutcome makes the Result); every other reply is one.lua's
// fast paths' (four integers).
func decodeLean(vals []int64, p *calc.Params, r *algorithms.Result) (bool, error) {
	if len(vals) == 0 {
		return false, nil
	}
	if algorithms.Algorithm(p.Alg) == algorithms.FixedWindow && p.Period%1000 == 0 {
		if len(vals) != 2 || vals[1] < 0 {
			return false, &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("malformed lean script reply %v", vals)}
		}
		o := calc.CountOutcome(p, vals[0], vals[1])
		*r = algorithms.Result{Allowed: o.Allowed, Limit: p.Cap, Remaining: max(o.Remaining, 0),
			RetryAfter: time.Duration(o.Retry) * time.Microsecond, ResetAfter: time.Duration(o.Reset) * time.Microsecond}
		return true, nil
	}
	ps := [1]calc.Params{*p}
	var results [1]algorithms.Result
	if _, err := decode(vals, ps[:], results[:]); err != nil {
		return false, err
	}
	*r = results[0]
	return true, nil
}
