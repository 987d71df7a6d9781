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
// as the algorithm's lean script ([lua.Lean]) with only the numbers that
// script's flat path reads: 2 ARGV for a fixed window of cost 1, 3 for
// GCRA, against 6 for the one-check script. Redis pays for every ARGV of
// every call (parsing it, a Lua string, a slot of the ARGV table: on Redis
// 7.0 about as much as an INCRBY), so the fixed window's lean script costs
// Redis about a quarter less per check than the one-check script, and less
// than ulule/limiter's counter; GCRA's about a tenth less, and less than
// redis_rate's (docs/performance.md, "Lean scripts"). A lean script that
// meets a state its flat path leaves to the general code (an older layout,
// another limit's value) writes nothing and replies empty, and the call
// goes on as the one-check script, as it would without lean scripts: one
// more round trip, once per key after a redeploy or a change of limit.
// A call that would queue for a round trip goes as the one-check script,
// which the pipeline batches.

// leanScripts, indexed by Algorithm, holds the lean scripts; nil for the
// algorithms without one.
var leanScripts = func() (s [algorithms.Concurrency + 1]*redis.Script) {
	for _, a := range algorithms.Algorithms {
		if src := lua.Lean(a.String()); src != "" {
			s[a] = redis.NewScript(src)
		}
	}
	return s
}()

// maxExact is 2^53: Lua's numbers, doubles, hold every integer below it.
const maxExact = 1 << 53

// newLeanArgs returns the ARGV of p's lean script (lua/fixed_window_lean.lua,
// lua/gcra_lean.lua), as strings (cached by argsFor, so that no client
// formats them again per call), or nil when p has none or its flat path does not
// apply: a fixed window's period not a whole number of ms or cost above
// the capacity; a GCRA emission interval that is no whole number of µs
// (r > 1, whose TATs carry a fraction the flat path leaves to the general
// code), or numbers Lua would not hold exactly.
func newLeanArgs(p *calc.Params) []any {
	var args []any
	switch algorithms.Algorithm(p.Alg) {
	case algorithms.FixedWindow:
		if p.Period <= 0 || p.Period%1000 != 0 || p.Cost > p.Cap {
			return nil
		}
		args = []any{itoa(p.Cap), itoa(p.Period)}
	case algorithms.GCRA:
		if p.R != 1 || p.U <= 0 || p.Cap > maxExact/p.U || p.Cost > maxExact/p.U {
			return nil
		}
		args = []any{itoa(p.Cap), itoa(p.U), "/" + itoa(p.Cap*p.U)}
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
// empty reply (see decideLean).
func decodeLean(vals []int64, p *calc.Params, r *algorithms.Result) (bool, error) {
	if len(vals) == 0 {
		return false, nil
	}
	if algorithms.Algorithm(p.Alg) == algorithms.FixedWindow {
		if len(vals) != 2 || vals[1] < 0 {
			return false, &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("malformed lean script reply %v", vals)}
		}
		c, reset := vals[0], vals[1]
		*r = algorithms.Result{Allowed: c <= p.Cap, Limit: p.Cap, Remaining: max(p.Cap-c, 0), ResetAfter: time.Duration(reset) * time.Microsecond}
		if !r.Allowed {
			// the script took the cost back: the count without this check
			r.Remaining = max(p.Cap-c+p.Cost, 0)
			r.RetryAfter = r.ResetAfter
		}
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
