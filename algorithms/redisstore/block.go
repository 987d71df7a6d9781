package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/contract"
)

var _ algorithms.Blocker = (*Store)(nil)

// blockScript takes a quota block of a bucket key (lua/block.lua).
var blockScript = redis.NewScript(luaScript("block"))

// The pipeline sends a script's source on NOSCRIPT (see evalCmd).
func init() { sources[blockScript] = luaScript("block") }

// TakeBlock implements [algorithms.Blocker]: one EVALSHA of
// lua/block.lua, on the key's node, through the pipeline if there is one,
// followed by WAIT in the exact mode (Config.Replicas) as every decide
// call is.
func (b *Store) TakeBlock(ctx context.Context, c algorithms.Check, hold time.Duration) (algorithms.Result, error) {
	if err := contract.ValidateBlock(c, hold); err != nil {
		return algorithms.Result{}, err
	}
	p := calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost)
	var now int64
	if b.now != nil {
		now = b.now().UnixMicro()
	}
	args := append(newOneArgs(&p, now), int64(p.Alg), int64(hold/time.Microsecond))
	keys := []string{c.Key}
	var node *redis.Client
	if b.shards != nil {
		var err error
		if _, node, err = b.shards.shard(c.Key); err != nil {
			return algorithms.Result{}, &algorithms.BackendError{Backend: "redis", Err: err}
		}
	}
	vals, err := b.run(ctx, node, blockScript, keys, args)
	if err != nil {
		if b.shards != nil {
			b.shards.failed()
		}
		return algorithms.Result{}, err
	}
	var r [1]algorithms.Result
	if _, err := decode(vals, []calc.Params{p}, r[:]); err != nil {
		return algorithms.Result{}, err
	}
	return r[0], nil
}
