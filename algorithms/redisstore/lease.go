package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

var _ algorithms.Leaser = (*Store)(nil)

// The scripts that release and renew concurrency leases.
var (
	releaseScript = redis.NewScript(luaScript("release"))
	renewScript   = redis.NewScript(luaScript("renew"))
)

// The store sends a script's source on NOSCRIPT (see evalCmd).
func init() {
	sources[releaseScript] = luaScript("release")
	sources[renewScript] = luaScript("renew")
}

// Release implements [algorithms.Leaser]: one EVALSHA of lua/release.lua
// for all leases on a single server or Sentinel, one per lease on a
// cluster or a Ring (each in its key's hash slot). It returns the first
// error after trying every lease.
func (b *Store) Release(ctx context.Context, leases []algorithms.Lease) error {
	if err := contract.ValidateLeases(leases, nil); err != nil {
		return err
	}
	return b.leases(ctx, releaseScript, leases, func(l *algorithms.Lease) []any {
		return []any{l.ID, max(l.Cost, 1)}
	}, nil)
}

// Renew implements [algorithms.Leaser], as Release calls lua/renew.lua.
// A lease on a store that failed is reported not held.
func (b *Store) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	if err := contract.ValidateLeases(leases, held); err != nil {
		return err
	}
	clear(held[:len(leases)])
	return b.leases(ctx, renewScript, leases, func(l *algorithms.Lease) []any {
		return []any{l.ID, max(l.Cost, 1), int64(l.Period / time.Microsecond)}
	}, held)
}

// leases runs s for leases, each lease's ARGV given by args, and sets
// held[i] (when held is not nil) to whether the script replied 1 for
// lease i.
func (b *Store) leases(ctx context.Context, s *redis.Script, leases []algorithms.Lease, args func(*algorithms.Lease) []any, held []bool) error {
	if len(leases) == 0 {
		return nil
	}
	var now int64
	if b.now != nil {
		now = b.now().UnixMicro()
	}
	// each script sent at most once, on node (nil: the client), as every
	// script of the store (see once)
	run := func(node *redis.Client, ls []algorithms.Lease, out []bool) error {
		keys := make([]string, len(ls))
		argv := []any{now}
		for i := range ls {
			keys[i] = ls[i].Key
			argv = append(argv, args(&ls[i])...)
		}
		vals, err := b.runDirect(ctx, node, s, keys, argv)
		if err == nil && len(vals) != len(ls)+1 {
			err = fmt.Errorf("script reply has %d values, want %d", len(vals), len(ls)+1)
		}
		if err != nil {
			if keyState(err) {
				return &algorithms.BackendError{Backend: "redis", Err: err, Keys: keys}
			}
			return &algorithms.BackendError{Backend: "redis", Err: err}
		}
		for i := range out {
			out[i] = vals[i] == 1
		}
		return nil
	}
	part := func(i, j int) []bool {
		if held == nil {
			return nil
		}
		return held[i:j]
	}
	if b.shards == nil {
		return run(nil, leases, part(0, len(leases)))
	}
	var first error
	for i := range leases {
		_, node, err := b.shards.shard(leases[i].Key)
		if err == nil {
			err = run(node, leases[i:i+1], part(i, i+1))
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}
