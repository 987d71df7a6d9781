package memstore

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/contract"
)

var _ algorithms.Leaser = (*Store)(nil)

// Release implements [algorithms.Leaser], as lua/release.lua does on
// Redis: it drops each lease's slots (and the expired ones of its key).
// It never fails but for an invalid lease or a context that has ended.
func (m *Store) Release(ctx context.Context, leases []algorithms.Lease) error {
	if err := contract.ValidateLeases(leases, nil); err != nil {
		return err
	}
	return m.leases(ctx, leases, func(st *slot, l *algorithms.Lease, now int64, exists bool) (bool, int64) {
		_, ttl := st.Release(l.ID, l.Cost, now, exists)
		return false, ttl
	})
}

// Renew implements [algorithms.Leaser], as lua/renew.lua does on Redis.
func (m *Store) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	if err := contract.ValidateLeases(leases, held); err != nil {
		return err
	}
	clear(held[:len(leases)])
	i := 0
	return m.leases(ctx, leases, func(st *slot, l *algorithms.Lease, now int64, exists bool) (bool, int64) {
		h, ttl := st.Renew(l.ID, l.Cost, int64(l.Period/time.Microsecond), now, exists)
		held[i] = h
		i++
		return h, ttl
	})
}

// leases runs fn on the state of each lease's key, in order, under its
// shard's lock, and sets the key's expiry to the TTL fn returns (the key
// is removed when it is 0, as Redis deletes an empty sorted set; left
// alone when it is negative: no slots there).
func (m *Store) leases(ctx context.Context, leases []algorithms.Lease, fn func(st *slot, l *algorithms.Lease, now int64, exists bool) (bool, int64)) error {
	if err := ctx.Err(); err != nil {
		return &algorithms.BackendError{Backend: "memory", Err: err}
	}
	now := m.now().UnixMicro()
	hw := m.expiryTime(now)
	var absent slot
	for i := range leases {
		l := &leases[i]
		h := maphash.String(m.seed, l.Key)
		sh := &m.shards[h%memoryShards]
		sh.mu.Lock()
		st := sh.lookup(h, l.Key)
		if st == nil {
			absent = slot{}
			fn(&absent, l, now, false)
			sh.mu.Unlock()
			continue
		}
		switch _, ttl := fn(st, l, now, st.expires > hw); {
		case ttl > 0:
			st.expires = hw + calc.CeilDiv(ttl, 1000)*1000
		case ttl == 0:
			sh.remove(h, l.Key)
		}
		sh.mu.Unlock()
	}
	return nil
}
