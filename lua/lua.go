// Package lua holds redlimit's Lua sources, one file per algorithm, embedded
// with go:embed. It has no logic: package algorithms runs [GCRAOne] and its
// siblings (one check) and [Script] (several checks, refunds) through
// EVALSHA.
//
// The sources are meant to be read: prelude.lua documents what every
// algorithm file defines, one.lua and dispatch.lua their calling convention
// (KEYS, ARGV, reply), each algorithm file its state.
// Scripts never call redis.replicate_commands() (effects replication is the
// default since Redis 5) and never build code from request data: keys travel
// as KEYS, numbers as ARGV.
package lua

import _ "embed"

// Sources of the parts of [Script], in the order they are joined.
var (
	//go:embed prelude.lua
	Prelude string
	//go:embed fixed_window.lua
	FixedWindow string
	//go:embed sliding_log.lua
	SlidingLog string
	//go:embed sliding_window.lua
	SlidingWindow string
	//go:embed token_bucket.lua
	TokenBucket string
	//go:embed gcra.lua
	GCRA string
	//go:embed dispatch.lua
	Dispatch string
	//go:embed one.lua
	One string
)

// Script decides several checks all-or-nothing, or refunds them: the
// prelude, the five algorithms and the dispatch, joined.
var Script = Prelude + FixedWindow + SlidingLog + SlidingWindow + TokenBucket + GCRA + Dispatch

// Scripts that decide one check, one per algorithm: the prelude, that
// algorithm alone and the entry point One. A script's cost in Redis grows
// with its size (each call creates every function it defines), so one check
// runs only the code it needs.
var (
	FixedWindowOne   = one(FixedWindow, "fixed_window")
	SlidingLogOne    = one(SlidingLog, "sliding_log")
	SlidingWindowOne = one(SlidingWindow, "sliding_window")
	TokenBucketOne   = one(TokenBucket, "token_bucket")
	GCRAOne          = one(GCRA, "gcra")
)

func one(algorithm, function string) string {
	return Prelude + algorithm + "local check = " + function + "\n" + One
}

// Scripts lists every script redlimit runs, for SCRIPT LOAD ahead of
// traffic; preloading is optional, since a NOSCRIPT answer makes go-redis
// send the script itself.
func Scripts() []string {
	return []string{Script, FixedWindowOne, SlidingLogOne, SlidingWindowOne, TokenBucketOne, GCRAOne}
}
