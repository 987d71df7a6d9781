package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// Mutation modes: a backend wrapper that breaks one promise, which the
// checker must catch.
const (
	MutateOveradmit = "overadmit" // admits one extra per key and period
	MutateLockout   = "lockout"   // never forgets a key it denied once
)

// mutate wraps store as mode asks ("" leaves it alone). The wrappers embed
// the store, so they forward its capabilities (deadlines, refunds, leases,
// resets).
func mutate(mode string, store *redisstore.Store) algorithms.Backend {
	switch mode {
	case MutateOveradmit:
		return &overadmit{Store: store, last: map[string]time.Time{}}
	case MutateLockout:
		return &lockout{Store: store, locked: map[string]bool{}}
	}
	return store
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
		if results[i].Never() {
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
		if results[i].Limit != 0 && !results[i].Allowed && !results[i].Never() {
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
