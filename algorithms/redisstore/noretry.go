package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
)

// Scripts sent once. go-redis sends a command again after an error that
// may have come after the server ran it (a reply lost with its
// connection, a read timeout): up to MaxRetries times on a *redis.Client
// (3 by default), up to MaxRedirects times on a *redis.ClusterClient, up
// to MaxRetries times on a *redis.Ring. A decide script sent again after
// its reply was lost decides again: it charges its keys twice, and the
// caller sees one success. So the store never lets go-redis send its
// scripts again, whatever the client's options: every script it sends
// through a go-redis client is a command whose NoRetry is true, which
// go-redis honours on every path the store takes (a command's Process on
// a Client, a ClusterClient, a Ring and an AutoPipeliner; the Exec of
// their pipelines; the nodes of a cluster, which still follow MOVED and
// ASK, replies sent before the script ran). A script that fails is an
// error for the caller, and a script the server did not run (NOSCRIPT) is
// sent again by the store itself as EVAL (runScript).
//
// This covers the clients the store knows ([*redis.Client], Sentinel's
// failover client, [*redis.ClusterClient], [*redis.Ring],
// [*redis.AutoPipeliner], and a [redis.UniversalClient] holding one) and
// a batching.Batcher (rueidisclient), which sends the commands of its own library (rueidis sends
// none twice). Another [redis.Scripter] (a type of the caller's, one that
// embeds a client included) is called through its EvalSha and Eval, which
// may add to what they send (tests inject faults so) and build go-redis's
// own commands: its retries are its own.

// onceCmd is a store's EVALSHA or EVAL that go-redis sends at most once:
// a [*redis.IntSliceCmd] whose NoRetry is true. It holds the command by
// pointer, so that it is one word, and passing it as a [redis.Cmder]
// allocates nothing; the reply lands in the command it holds.
type onceCmd struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis never to send the command again.
func (onceCmd) NoRetry() bool { return true }

// once returns cmd as go-redis must send it: an IntSliceCmd of the store
// as an onceCmd, any other command as it is.
func once(cmd redis.Cmder) redis.Cmder {
	if c, ok := cmd.(*redis.IntSliceCmd); ok {
		return onceCmd{c}
	}
	return cmd
}

// processor sends one command: every go-redis client, and a batching.Batcher.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// goRedisProcessor sends the store's commands through a go-redis client,
// each at most once.
type goRedisProcessor struct{ c processor }

func (g goRedisProcessor) Process(ctx context.Context, cmd redis.Cmder) error {
	return g.c.Process(ctx, once(cmd))
}

// processorFor returns how the store sends a script to client outside a
// pipeline: through a batching.Batcher as it is, through a go-redis client it
// knows with every script sent once, or nil for another [redis.Scripter],
// which is called through its EvalSha and Eval.
func processorFor(client redis.Scripter) processor {
	switch c := client.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring, *redis.AutoPipeliner:
		return goRedisProcessor{c.(processor)}
	case batching.Batcher:
		return c
	}
	return nil
}
