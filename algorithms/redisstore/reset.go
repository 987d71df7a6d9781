package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

var _ algorithms.Resetter = (*Store)(nil)

// deleter is implemented by every go-redis client (redis.Cmdable).
type deleter interface {
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Reset implements [algorithms.Resetter]: one DEL per key, so that keys of
// different hash slots are fine on a cluster and a Ring. The markers of a
// cluster (see the package doc, "Redis Cluster") stay until they expire: a
// denial within their window may report Provisional. It returns the first
// error, after trying every key; a client that cannot DEL (a Scripter that
// is no go-redis client) is an error matching [errors.ErrUnsupported].
func (b *Store) Reset(ctx context.Context, keys []string) error {
	c, ok := b.client.(deleter)
	if !ok {
		return &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("%w: the client has no DEL", errors.ErrUnsupported)}
	}
	var first error
	for _, k := range keys {
		if k == "" {
			continue
		}
		if err := c.Del(ctx, k).Err(); err != nil && first == nil {
			first = &algorithms.BackendError{Backend: "redis", Err: err}
		}
	}
	return first
}
