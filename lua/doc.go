// Package lua holds redlimit's Lua sources, embedded with go:embed, and
// builds from them every script package redisstore runs with EVALSHA. It
// exports one function, [Script], which returns a script by name.
//
// # The scripts
//
//   - one_<algorithm> (fixed_window, sliding_log, sliding_window,
//     token_bucket, gcra, concurrency) and one_calendar: one check, the
//     common call; each holds its own algorithm and no other.
//   - lean_fixed_window, lean_gcra: one check on the server's clock with
//     no marker keys, sent with only the numbers its common case reads;
//     they reply empty, having written nothing, for what they leave to the
//     one-check script.
//   - multi: several checks of one call, all-or-nothing, and the refunds
//     of a call spanning Redis Cluster slots.
//   - batch_<algorithm> and batch_all: several queued calls, one after
//     another, each decided as its own script would decide it alone.
//   - block: takes a quota block of a bucket key.
//   - refund: gives back, after the response, what a refundable call
//     reserved and did not use.
//   - cancel: settles a part of a call spanning Cluster slots whose caller
//     never learned whether it committed (its deadline ended).
//   - release, renew: free or extend concurrency slots.
//
// Each script is checked in under docs/scripts/<name>.lua with a header
// saying what it is for, its KEYS, ARGV and reply, its SHA1 (as SCRIPT
// and SLOWLOG show it) and the sections it is built from. A test fails
// when a file differs from what the code sends; go test ./lua -run
// TestScriptFiles -update rewrites them. Read those files to see a script
// top to bottom; edit the sources here.
//
// # One formula, one place
//
// Each algorithm's arithmetic is written once, in its own source file
// (fixed_window.lua, sliding_log.lua, sliding_window.lua, token_bucket.lua,
// gcra.lua, which also holds the bucket arithmetic the token bucket
// shares, concurrency.lua, calendar.lua), as formulas:
//
//	--@ formula bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
//	...Lua that computes the outputs from the inputs...
//	--@ end
//
// A formula names nothing but its inputs, its outputs, its own locals and
// Lua's standard library (no local of the script around it, no KEYS or
// ARGV), never assigns an input and never returns: package lua/internal/gen
// checks that when it reads the sources. Code that needs it says
//
//	--@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
//
// and the generator writes the formula's body there, in a do block, its
// inputs bound to the expressions and its outputs to the variables: the
// common case stays flat code, which costs Redis less than a function
// call, and every variant of a check (one check, lean, batch, block,
// multi) runs the same lines. algorithms/internal/calc holds the Go twin
// of each file, one file per algorithm; the conformance vectors and the
// differential tests hold the two to the same answers.
//
// A source file is documentation, formulas and sections (--@ section
// <name> ... --@ end); a file without any is one section named after it.
// A script is a list of sections, joined in order, some with values for
// the few ${var} they name (the tables through which an entry point
// calls an algorithm's functions by number): lua/internal/gen/scripts.go
// lists every script's sections. The sections that are not an
// algorithm's:
//
//	now.lua                        reads now (ARGV[1], or TIME when it is 0)
//	fast.lua                       intf, the format of an integer Lua's long holds
//	prelude.lua                    helpers every algorithm uses
//	one.lua, one_fast.lua          a one-check script's entry point and fast path call
//	dispatch.lua                   the multi script's entry point
//	batch_state.lua, batch_fast.lua, batch.lua
//	                               a batch script's state, flat loop and entry point
//	block.lua, refund.lua, cancel.lua (after unknown.lua), release.lua, renew.lua
//	                               the other entry points
//
// An integer a script writes goes through string.format: '%d' where Lua's
// C long holds it (64 bits), '%.0f' otherwise ('%d' costs Redis about
// 2,000 instructions less, and a Lua number passed to redis.call, written
// with %.17g, more still). fast.lua asks once per call, as intf, by
// formatting 2^53. The common cases of the fixed window and of GCRA ask
// the value they write instead, for free: a ms or a µs on the server's
// clock has 13 or 16 digits, and a 32-bit long writes at most 11
// characters, so a result of 12 or more is exact and a shorter one is
// written again with '%.0f'. TestLeanSmallClock in package redisstore
// writes both ways.
//
// Algorithms are numbered in ARGV as algorithms.Algorithm numbers them (1
// fixed_window ... 5 gcra, 6 concurrency; 7 a calendar check);
// TestScriptNumbers in package redisstore checks the numbers against the
// model's and runs each through every script.
//
// Scripts never call redis.replicate_commands() (effects replication is the
// default since Redis 5) and never build code from request data: keys travel
// as KEYS, numbers as ARGV.
package lua
