package algorithms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/lua"
)

// RedisConfig configures a [Redis] backend. The zero value is ready to use.
type RedisConfig struct {
	// Now, when set, replaces the Redis server's clock (TIME) as the time of
	// every check. Leave it nil in production: the server's clock is the one
	// clock every application instance shares. Tests inject a fixed clock.
	Now func() time.Time
}

// Redis is the [Backend] of record: every check of a call is evaluated by one
// Lua script ([lua.Script]) in one EVALSHA round trip. go-redis's Script.Run
// falls back to EVAL when the server answers NOSCRIPT, which loads the script
// again, so SCRIPT FLUSH, a restart or a failover to a replica with an empty
// script cache is invisible to callers.
//
// Redis is safe for concurrent use; it holds no lock of its own.
type Redis struct {
	client redis.Scripter
	now    func() time.Time
}

var _ Backend = (*Redis)(nil)

// script is shared by every Redis backend: one SHA1, computed once.
var script = redis.NewScript(lua.Script)

// NewRedis returns a Redis backend using client, which may be any go-redis
// client: *redis.Client, *redis.ClusterClient, *redis.Ring, a failover
// (Sentinel) client or a redis.UniversalClient.
func NewRedis(client redis.Scripter, cfg RedisConfig) (*Redis, error) {
	if client == nil {
		return nil, &ConfigError{Field: "client", Reason: "must not be nil"}
	}
	return &Redis{client: client, now: cfg.Now}, nil
}

// Allow implements [Backend] with one EVALSHA.
func (b *Redis) Allow(ctx context.Context, checks []Check, results []Result) error {
	var pbuf [4]prepared
	ps, err := prepareAll(checks, results, pbuf[:0])
	if err != nil {
		return err
	}
	keys := make([]string, len(checks))
	args := make([]any, 1+6*len(checks))
	args[0] = int64(0)
	if b.now != nil {
		args[0] = b.now().UnixMicro()
	}
	for i := range checks {
		keys[i] = checks[i].Key
		p := &ps[i]
		o := 1 + 6*i
		args[o], args[o+1], args[o+2] = int64(p.alg), p.cap, p.period
		args[o+3], args[o+4], args[o+5] = p.r, p.u, p.cost
	}
	vals, err := script.Run(ctx, b.client, keys, args...).Int64Slice()
	if err != nil {
		return &BackendError{Backend: "redis", Err: err}
	}
	return decode(vals, ps, results)
}

// decode checks a script reply and turns it into Results.
func decode(vals []int64, ps []prepared, results []Result) error {
	if len(vals) != 4*len(ps) {
		return &BackendError{Backend: "redis", Err: fmt.Errorf("script reply has %d values, want %d", len(vals), 4*len(ps))}
	}
	for i := range ps {
		v := vals[4*i : 4*i+4]
		if v[0] != 0 && v[0] != 1 || v[2] < 0 || v[3] < 0 {
			return &BackendError{Backend: "redis", Err: errors.New("malformed script reply")}
		}
		results[i] = outcome{allowed: v[0] == 1, remaining: v[1], retry: v[2], reset: v[3]}.result(ps[i].cap)
	}
	return nil
}
