package rueidisclient

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
)

// Persisting returns c with every script run in MULTI/EXEC followed by
// PERSIST of its keys, as backendtest.Persisting does on go-redis: a
// workload on a clock of its own must not see the server's clock expire
// its keys between steps. It is a batching.Batcher as c is, so the
// store pipelines on it as on c.
func Persisting(c *Client) interface {
	redis.Scripter
	batching.Batcher
	Del(ctx context.Context, keys ...string) *redis.IntCmd
} {
	return persisting{c}
}

type persisting struct{ *Client }

func (p persisting) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := scriptCmd(ctx, "evalsha", sha1, keys, args)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (p persisting) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := scriptCmd(ctx, "eval", script, keys, args)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (p persisting) Process(ctx context.Context, cmd redis.Cmder) error {
	b := p.Batch()
	_ = b.Process(ctx, cmd)
	_, err := b.Exec(ctx)
	return err
}

func (p persisting) Batch() batching.Batch { return &persistingBatch{c: p.Client} }

// persistingBatch sends each command in MULTI/EXEC with PERSIST of its
// keys, all in one round trip.
type persistingBatch struct {
	c    *Client
	cmds []redis.Cmder
}

func (b *persistingBatch) Process(_ context.Context, cmd redis.Cmder) error {
	b.cmds = append(b.cmds, cmd)
	return nil
}

func (b *persistingBatch) Exec(ctx context.Context) ([]redis.Cmder, error) {
	var all rueidis.Commands
	var execs []int
	for _, cmd := range b.cmds {
		all = append(all, b.c.c.B().Multi().Build(), b.c.build(cmd))
		args := cmd.Args()
		n := args[2].(int)
		for _, k := range args[3 : 3+n] {
			all = append(all, b.c.c.B().Persist().Key(k.(string)).Build())
		}
		execs = append(execs, len(all))
		all = append(all, b.c.c.B().Exec().Build())
	}
	res := b.c.c.DoMulti(ctx, all...)
	var first error
	for i, cmd := range b.cmds {
		ms, err := res[execs[i]].ToArray()
		if err != nil {
			setReply(cmd, rueidis.RedisMessage{}, err)
		} else {
			setReply(cmd, ms[0], nil)
		}
		if err := cmd.Err(); err != nil && first == nil {
			first = err
		}
	}
	return b.cmds, first
}
