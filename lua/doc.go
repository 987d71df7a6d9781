// Package lua holds redlimit's Lua sources, embedded with go:embed, and
// assembles from them every script package redisstore runs with EVALSHA.
// It has no other logic.
//
// # The scripts
//
// [Scripts] lists them all, for SCRIPT LOAD ahead of traffic (optional:
// go-redis sends a script itself after NOSCRIPT):
//
//   - [Single] (one per algorithm, and "calendar"): one check, the common
//     call; it holds only that algorithm.
//   - [Lean] (fixed window, GCRA): one check on the server's clock with no
//     marker keys, its flat fast path alone, sent with only the numbers
//     that path reads; it replies empty for what it leaves to [Single].
//   - [Multi]: several checks of one call, all-or-nothing, and the refunds
//     of a call spanning Redis Cluster slots.
//   - [Batch] (one per algorithm) and [BatchAll]: several queued calls,
//     one after another, each decided as its own script would alone.
//   - [Refund]: gives back, after the response, what a refundable call
//     reserved and did not use.
//   - [Cancel]: settles a part of a call spanning Cluster slots whose
//     caller never learned whether it committed (its deadline ended).
//   - [Release], [Renew]: free or extend concurrency leases.
//
// Each script, assembled, is checked in under docs/scripts/ with a header
// saying what it is for, its KEYS, ARGV and reply, its SHA1 (as SCRIPT and
// SLOWLOG show it) and the sources it is built from. A test fails when a
// file differs from what the code sends; go test ./lua -run
// TestScriptFiles -update rewrites them. Read those files to see a script
// top to bottom; edit the sources below.
//
// # How a script is built
//
// A script is source files joined in order, with a few glue lines:
//
//	now.lua                        reads now (ARGV[1], or TIME when it is 0)
//	fast.lua + <alg>_one.lua       a flat fast path for the common case (gcra, fixed_window,
//	                               sliding_window, token_bucket); GCRA's is gcra_one.lua
//	                               around gcra_flat.lua; the fixed window's starts with
//	                               fixed_window_flat.lua around fixed_window_count.lua (INCRBY
//	                               and PTTL of its string counter, on the server's clock)
//	prelude.lua                    helpers every algorithm uses
//	<alg>.lua (one, or all)        the algorithm: <alg>, <alg>_write, <alg>_refund
//	entry point                    one.lua, dispatch.lua, batch.lua, refund.lua,
//	                               cancel.lua (both after unknown.lua), release.lua
//	                               or renew.lua
//
// The common case of the fixed window and of GCRA is written once, in
// fixed_window_count.lua and gcra_flat.lua, which read their numbers from
// locals: the one-check script's head (fixed_window_flat.lua, gcra_one.lua)
// sets them from its ARGV, a lean script's head (fixed_window_lean.lua,
// gcra_lean.lua) from its own, shorter ARGV, and a glue line after the
// common case replies empty for what it leaves. TestLeanScripts in package
// redisstore checks that each lean script decides as the one-check script
// does from the same state.
//
// An integer a script writes goes through string.format: '%d' where Lua's
// C long holds it (64 bits), '%.0f' otherwise ('%d' costs Redis about
// 2,000 instructions less, and a Lua number passed to redis.call, written
// with %.17g, more still). fast.lua asks once per call, as intf, by
// formatting 2^53 (1,200–3,000 instructions a call, measured without it
// on GCRA's, the token bucket's and the sliding window's scripts in
// docs/performance.md). The common cases of the fixed window and of GCRA
// ask the value they write instead, for free: a ms or a µs on the
// server's clock has 13 or 16 digits, and a 32-bit long writes at most
// 11 characters, so a result of 12 or more is exact and a shorter one is
// written again with '%.0f'. TestLeanSmallClock in package redisstore
// writes both ways.
//
// A batch script starts with batch_state.lua and a flat loop
// (batch_gcra.lua, or batch_fast.lua around an algorithm's fast function)
// that decides the one-check calls at its head before any function is
// defined; batch.lua goes on from the first call they left. Defining a
// function costs a script on every call, which is why a one-check script
// holds one algorithm and the fast paths are flat.
//
// prelude.lua documents what every algorithm file defines; each entry
// point's header its calling convention (KEYS, ARGV, reply). Algorithms
// are numbered in ARGV as algorithms.Algorithm numbers them (1
// fixed_window ... 5 gcra, 6 concurrency; 7 a calendar check: [ID]). One
// list in lua.go numbers them, and the tables through which an entry point
// calls an algorithm's functions by number (checks, writes, refunds, late,
// undo, fasts) are lines the Go side generates from it before the entry
// point, never written in a .lua file; TestScriptNumbers in package
// redisstore checks the numbers against the model's and runs each through
// every script.
//
// Scripts never call redis.replicate_commands() (effects replication is the
// default since Redis 5) and never build code from request data: keys travel
// as KEYS, numbers as ARGV.
package lua
