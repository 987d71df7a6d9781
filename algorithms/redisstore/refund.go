package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/internal/receipt"
	"github.com/redlimit/redlimit/internal/contract"
)

var _ algorithms.Refunder = (*Store)(nil)

// refundScript gives back, later, what a refundable decide call took (see
// lua/refund.lua).
var refundScript = redis.NewScript(luaScript("refund"))

// The pipeline sends a script's source on NOSCRIPT (see evalCmd).
func init() { sources[refundScript] = luaScript("refund") }

// windowMs is w in whole milliseconds, rounded up: the TTL of a
// refundable call's markers.
func windowMs(w time.Duration) int64 {
	return int64((w + time.Millisecond - 1) / time.Millisecond)
}

// decideRefundable decides checks that live on one server (in one hash
// slot on a cluster, one shard of a Ring) as a refundable call, on every
// client: with its commit marker and its keys' pending markers, for w,
// and, when allowed, the Receipt a later Refund needs in its Results.
func (b *Store) decideRefundable(ctx context.Context, node *redis.Client, checks []algorithms.Check, ps []calc.Params, results []algorithms.Result, now int64, w time.Duration) error {
	marker := commitKey(checks[0].Key, newCommitID())
	at, err := b.decide(ctx, node, checks, ps, results, now, markers{sharded: true, commit: marker, window: windowMs(w)})
	if err == nil {
		receipts(results[:len(checks)], marker, at)
	}
	return err
}

// receipts gives every Result of an allowed call the Receipt of its
// commit; a denied call gets none.
func receipts(results []algorithms.Result, marker string, at int64) {
	for i := range results {
		if !results[i].Allowed {
			return
		}
	}
	for i := range results {
		results[i].Receipt = algorithms.Receipt{Marker: marker, At: at}
	}
}

// Refund implements [algorithms.Refunder]: one EVALSHA of lua/refund.lua
// per commit marker (the call on one server; each hash slot or shard of
// it on a cluster or a Ring), one after another, at the store's current
// time. The script gives back only if it deletes the marker, so a refund
// sent again, by go-redis after a lost reply or by the caller, gives
// nothing back. Refunds whose Units are all 0 are not sent.
//
// A refund that took its marker but found a fixed window's count on the
// server's clock whose TTL (which names its window) was changed since the
// commit (a PEXPIRE of the key, a MIGRATE to a node whose clock is off)
// cannot tell the commit's units in it and gives that key nothing back,
// its window still current: Refund then returns a
// *[algorithms.BackendError] naming those keys, which matches
// [algorithms.ErrKeyState], after every other refund was made.
func (b *Store) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	if err := contract.ValidateRefunds(refunds); err != nil {
		return err
	}
	var now int64
	if b.now != nil {
		now = b.now().UnixMicro()
	}
	var first error
	for group, units := range receipt.Groups(refunds) {
		if !units {
			continue
		}
		if err := b.refundLate(ctx, refunds, group, now); err != nil && (first == nil || errors.Is(first, algorithms.ErrNotRefunded)) {
			first = err
		}
	}
	return first
}

// refundLate runs the refund script for the refunds in group, which share
// one commit marker.
func (b *Store) refundLate(ctx context.Context, refunds []algorithms.Refund, group []int, now int64) error {
	r0 := &refunds[group[0]]
	keys := make([]string, 0, len(group)+1)
	args := make([]any, callArgs+refundArgs*len(group))
	args[0], args[1] = now, r0.Result.Receipt.At
	for k, j := range group {
		r := &refunds[j]
		c := &r.Check
		p := calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost)
		keys = append(keys, c.Key)
		o := args[callArgs+refundArgs*k:]
		putCheck(o, &p, r.Units)
		o[argReset] = int64(r.Result.ResetAfter / time.Microsecond)
	}
	keys = append(keys, r0.Result.Receipt.Marker)
	var node *redis.Client
	if b.shards != nil {
		var err error
		if _, node, err = b.shards.shard(keys[0]); err != nil {
			return &algorithms.BackendError{Backend: "redis", Err: err}
		}
	}
	vals, err := b.run(ctx, node, refundScript, keys, args)
	if err != nil {
		if b.shards != nil {
			b.shards.failed()
		}
		return err
	}
	if len(vals) < 2 || vals[0] < 0 || vals[0] > 2 || (vals[0] == 2) != (len(vals) > 2) {
		return &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("refund script reply %v, want [0|1 now] or [2 now position...]", vals)}
	}
	switch vals[0] {
	case 0:
		return fmt.Errorf("%w (commit %s)", algorithms.ErrNotRefunded, r0.Result.Receipt.Marker)
	case 2:
		return notGiven(r0.Result.Receipt.Marker, keys[:len(group)], vals[2:])
	}
	return nil
}

// errNotGiven is the cause of the error of a refund (or cancel) that ran,
// taking its commit marker, and gave nothing back to some of its checks:
// each found its key holding a count it could not tell as its commit's
// while that count still counts (a fixed window's count on the server's
// clock whose TTL, which names its window, was changed since the commit:
// see fixed_window_refund in lua/fixed_window.lua). Their units stay
// charged until the key's window ends.
var errNotGiven = errors.New("refund found a count it could not tell as its commit's (the key's TTL changed since the commit): nothing given back")

// notGiven returns the error of a refund of commit whose script replied
// the positions (from 1) among keys of the checks that gave nothing
// back: a *[algorithms.BackendError] naming their keys, which matches
// [algorithms.ErrKeyState] and errNotGiven.
func notGiven(commit string, keys []string, positions []int64) error {
	named := make([]string, 0, len(positions))
	for _, p := range positions {
		if p < 1 || p > int64(len(keys)) {
			return &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("refund script reply names check %d of %d", p, len(keys))}
		}
		named = append(named, keys[p-1])
	}
	return &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("%w (commit %s)", errNotGiven, commit), Keys: named}
}
