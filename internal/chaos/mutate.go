package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// Mutation modes: a backend wrapper (or, for nocompensate, a hook on the
// instance's go-redis client) that breaks one promise, which the checker
// must catch.
const (
	MutateOveradmit = "overadmit" // admits one extra per key and period
	MutateLockout   = "lockout"   // never forgets a key it denied once
	// MutateNoRefund: Refund (Settle's path) replies success and gives
	// nothing back.
	MutateNoRefund = "norefund"
	// MutateNoCompensate: on a cluster, the compensation of a call
	// spanning slots (lua/dispatch.lua's refund mode, which gives back
	// what a part committed when another part denied or failed) runs
	// against a commit marker that does not exist: it replies as usual,
	// without error, and gives nothing back. Elsewhere nothing changes (a
	// single node or Sentinel decides a call in one script, and
	// compensates nothing).
	MutateNoCompensate = "nocompensate"
)

// Mutations lists the mutation modes.
var Mutations = []string{MutateOveradmit, MutateLockout, MutateNoRefund, MutateNoCompensate}

// mutate wraps store as mode asks ("" leaves it alone), and hooks client
// for MutateNoCompensate (a store on another client, Options.StoreClient,
// is left alone). The wrappers embed the store, so they forward its
// capabilities (deadlines, refunds, leases, resets).
func mutate(mode string, client redis.UniversalClient, store *redisstore.Store) algorithms.Backend {
	switch mode {
	case MutateOveradmit:
		return &overadmit{Store: store, last: map[string]time.Time{}}
	case MutateLockout:
		return &lockout{Store: store, locked: map[string]bool{}}
	case MutateNoRefund:
		return noRefund{Store: store}
	case MutateNoCompensate:
		client.AddHook(dropCompensation{})
	}
	return store
}

// noRefund reports every refund as done and sends none.
type noRefund struct{ *redisstore.Store }

func (noRefund) Refund(context.Context, []algorithms.Refund) error { return nil }

// dropCompensation is a go-redis hook that points every compensation
// (an EVAL or EVALSHA whose ARGV[2], the mode, is 1 and whose last key is
// a commit marker) at a marker of the same slot that does not exist.
type dropCompensation struct{}

func (dropCompensation) DialHook(next redis.DialHook) redis.DialHook { return next }

func (dropCompensation) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		dropMarker(cmd.Args())
		return next(ctx, cmd)
	}
}

func (dropCompensation) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			dropMarker(cmd.Args())
		}
		return next(ctx, cmds)
	}
}

// dropMarker rewrites, in place, the commit marker of a compensation's
// arguments ("evalsha", sha, numkeys, keys..., argv...).
func dropMarker(args []any) {
	if len(args) < 3 {
		return
	}
	if name := fmt.Sprint(args[0]); name != "evalsha" && name != "eval" {
		return
	}
	n, ok := args[2].(int)
	if !ok || n < 2 || len(args) < 3+n+2 || fmt.Sprint(args[3+n+1]) != "1" {
		return
	}
	if marker, ok := args[2+n].(string); ok && strings.Contains(marker, ":commit:") {
		args[2+n] = marker + ":dropped"
	}
}

// overadmit turns the first denial of each key in each of its periods into
// an allow, without charging anything: one unit over the limit per key and
// period.
type overadmit struct {
	*redisstore.Store

	mu   sync.Mutex
	last map[string]time.Time // a key's last extra admission
}

func (o *overadmit) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if err := o.Store.Allow(ctx, checks, results); err != nil {
		return err
	}
	denied := false
	for i := range checks {
		if !results[i].Allowed && results[i].RetryAfter == 0 {
			return nil // a peek, or a cost that can never fit
		}
		if results[i].Limit != 0 && !results[i].Allowed {
			denied = true
		}
	}
	if !denied {
		return nil
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range checks {
		if t, ok := o.last[c.Key]; ok && now.Sub(t) < c.Limit.Period {
			return nil
		}
	}
	for i, c := range checks {
		o.last[c.Key] = now
		results[i].Allowed, results[i].RetryAfter = true, 0
	}
	return nil
}

// lockout denies, forever, every call on a key it has seen denied once,
// telling a short ResetAfter it never honours.
type lockout struct {
	*redisstore.Store

	mu     sync.Mutex
	locked map[string]bool
}

func (l *lockout) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	l.mu.Lock()
	hit := false
	for _, c := range checks {
		hit = hit || l.locked[c.Key]
	}
	l.mu.Unlock()
	if hit {
		for i, c := range checks {
			capacity := c.Limit.Capacity(c.Algorithm)
			results[i] = algorithms.Result{Allowed: true, Limit: capacity, Remaining: capacity}
			if l.isLocked(c.Key) {
				results[i] = algorithms.Result{Limit: capacity, RetryAfter: 100 * time.Millisecond, ResetAfter: 100 * time.Millisecond}
			}
		}
		return nil
	}
	if err := l.Store.Allow(ctx, checks, results); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range checks {
		if results[i].Limit != 0 && !results[i].Allowed && results[i].RetryAfter != 0 {
			l.locked[c.Key] = true
		}
	}
	return nil
}

func (l *lockout) isLocked(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.locked[key]
}
