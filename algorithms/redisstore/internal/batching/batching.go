// Package batching is the seam through which the Redis store pipelines
// and batches on a client of another Redis library (rueidisclient), as it
// does on a *redis.Client. It is internal: the clients that implement it
// are this module's, released with the store.
package batching

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A Batcher is a client on which the store pipelines (see redisstore's
// package doc, "Pipelining") as it does on a *redis.Client:
// rueidisclient.Client implements it to be batched too. The store gives
// Process and Batch EVALSHA and EVAL commands as *redis.IntSliceCmd.
type Batcher interface {
	// Process sends cmd and sets its reply or error.
	Process(ctx context.Context, cmd redis.Cmder) error
	// Batch returns an empty Batch.
	Batch() Batch
}

// A ScriptRunner is a Batcher that also runs one script call itself: the
// store sends a call that finds a round trip free (at low concurrency,
// most calls), and every call when it does not pipeline
// (redisstore.Config.Pipelines -1), through RunScript, without go-redis's
// command types, and batches the others through Batch as before.
type ScriptRunner interface {
	Batcher
	// RunScript sends EVALSHA of the digest script, or EVAL of the
	// source script when eval is set, with keys and args (strings,
	// int64 and int), and returns its reply, an array of integers. A
	// server's error reply (NOSCRIPT included) is returned as a
	// redis.Error, a nil reply as redis.Nil.
	RunScript(ctx context.Context, eval bool, script string, keys []string, args []any) ([]int64, error)
}

// A Batch is commands sent in one round trip: Exec sends those given to
// Process, in order, and sets each one's reply or error.
type Batch interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Exec(ctx context.Context) ([]redis.Cmder, error)
}
