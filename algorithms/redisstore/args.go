package redisstore

import "github.com/redlimit/redlimit/algorithms/internal/calc"

// The numbers of one check in a script's ARGV, at these offsets from the
// check's first: the one layout every script reads a check in. The
// scripts of several checks (lua/dispatch.lua, batch.lua, cancel.lua)
// send checkArgs numbers per check after the call's own (callArgs of
// them); lua/refund.lua sends refundArgs, the units to give back in the
// cost's place and then the reset_after its commit replied; lua/one.lua
// sends one check after now, without its algorithm (the script is the
// algorithm's), so that now takes argAlg's place. TestScriptArgs runs
// every script on ARGV laid out here and checks its reply against calc.
const (
	argAlg     = iota // the algorithm, as algorithms.Algorithm numbers it (calc.Calendar: a calendar check)
	argCap            // capacity in units
	argPeriod         // period in µs; a calendar check: its window's start s0
	argR              // r (see calc.Params); a concurrency check: its lease; a calendar check: s1
	argU              // u; a calendar check: s2, the next window's end
	argCost           // cost in units; lua/refund.lua: the units to give back
	checkArgs         // numbers per check
	argReset   = checkArgs
	refundArgs = checkArgs + 1 // numbers per check of lua/refund.lua
)

// callArgs is the number of ARGV before the first check of a script of
// several checks: now (0: the server's clock) and the mode
// (lua/dispatch.lua; lua/refund.lua: the now its commit replied;
// lua/cancel.lua: the commit marker's TTL in ms).
const callArgs = 2

// putCheck writes the numbers of p, with cost, at dst[:checkArgs].
func putCheck(dst []any, p *calc.Params, cost int64) {
	_ = dst[checkArgs-1]
	dst[argAlg], dst[argCap], dst[argPeriod] = int64(p.Alg), p.Cap, p.Period
	dst[argR], dst[argU], dst[argCost] = p.R, p.U, cost
}

// newOneArgs returns lua/one.lua's ARGV of p at now: a check's numbers,
// now in the place of the algorithm.
func newOneArgs(p *calc.Params, now int64) []any {
	args := make([]any, checkArgs)
	putCheck(args, p, p.Cost)
	args[argAlg] = now
	return args
}
