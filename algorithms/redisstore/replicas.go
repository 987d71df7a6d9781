package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
)

// ErrNotReplicated is the error of a decision that [Config.Replicas]
// replicas did not acknowledge within [Config.ReplicaTimeout]: it may be
// committed on the master, but a failover could lose it, so it does not
// count. It reaches the engine as a *[algorithms.BackendError], like any
// failure of Redis, and goes to the error policy.
var ErrNotReplicated = errors.New("redlimit: decision not acknowledged by enough replicas")

// DefaultReplicaTimeout is [Config.ReplicaTimeout] when it is 0.
const DefaultReplicaTimeout = 50 * time.Millisecond

// pipeliner is a go-redis client that can send several commands on one
// connection: *redis.Client (a failover client is one), and the master of
// a slot of a *redis.ClusterClient.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// masterForKey is implemented by *redis.ClusterClient.
type masterForKey interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

// runReplicated runs s as run does, followed in the same round trip, on
// the same connection, by WAIT replicas timeout: WAIT counts the writes of
// its own connection only, so the script and the WAIT must share one. A
// reply that fewer replicas acknowledged is [ErrNotReplicated].
func (b *Store) runReplicated(ctx context.Context, node *redis.Client, s *redis.Script, keys []string, args []any) ([]int64, error) {
	var c pipeliner = node
	if node == nil {
		switch cl := b.client.(type) {
		case masterForKey:
			m, err := cl.MasterForKey(ctx, keys[0])
			if err != nil {
				return nil, err
			}
			c = m
		default:
			c = cl.(pipeliner) // New checked it (validReplicas)
		}
	}
	// The script goes at most once (see once), and so does the pipeline
	// holding it.
	send := func(eval bool) (*redis.IntSliceCmd, *redis.Cmd) {
		pipe := c.Pipeline()
		ev := evalCmd(ctx, s, eval, keys, args)
		_ = pipe.Process(ctx, once(ev))
		w := pipe.Do(ctx, "wait", b.replicas, b.replicaTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		return ev, w
	}
	ev, w := send(false)
	if noScript(ev.Err()) {
		ev, w = send(true)
	}
	vals, err := ev.Result()
	if err != nil {
		return nil, err
	}
	n, err := w.Int64()
	if err != nil {
		return nil, err
	}
	if n < int64(b.replicas) {
		return nil, fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, b.replicas, b.replicaTimeout)
	}
	return vals, nil
}

// validReplicas checks the replication fields of cfg, and that with
// Replicas, client can send WAIT on each script's connection (see
// runReplicated).
func validReplicas(client redis.Scripter, cfg *Config) error {
	_, cluster := client.(masterForKey)
	_, pipelines := client.(pipeliner)
	switch {
	case cfg.Replicas < 0:
		return &algorithms.ConfigError{Field: "Replicas", Reason: fmt.Sprintf("must be >= 0, got %d", cfg.Replicas)}
	case cfg.Replicas > 0 && !cluster && !pipelines:
		return &algorithms.ConfigError{Field: "Replicas", Reason: fmt.Sprintf("needs a go-redis client that pipelines, to send WAIT on each script's connection (%T does not)", client)}
	case cfg.ReplicaTimeout < 0:
		return &algorithms.ConfigError{Field: "ReplicaTimeout", Reason: fmt.Sprintf("must be >= 0, got %v", cfg.ReplicaTimeout)}
	case cfg.ReplicaTimeout > 0 && cfg.ReplicaTimeout < time.Millisecond:
		return &algorithms.ConfigError{Field: "ReplicaTimeout", Reason: fmt.Sprintf("must be at least 1ms (WAIT counts in ms; 0 would wait forever), got %v", cfg.ReplicaTimeout)}
	}
	return nil
}
