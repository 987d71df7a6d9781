// Package lua holds redlimit's Lua sources, one file per algorithm, embedded
// with go:embed. It has no logic: package algorithms runs [Script] through
// EVALSHA.
//
// The sources are meant to be read: prelude.lua documents the calling
// convention (KEYS, ARGV, reply), each algorithm file documents its state.
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
)

// Script is the one script redlimit runs: the prelude, the five algorithms
// and the dispatch, joined.
var Script = Prelude + FixedWindow + SlidingLog + SlidingWindow + TokenBucket + GCRA + Dispatch
