package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/internal/receipt"
)

var _ algorithms.Refunder = (*Store)(nil)

// commitBook holds the commit markers of refundable calls (see
// [algorithms.Check.RefundWindow]): marker -> the instant (µs, store
// time) it expires. A refund gives back only if it removes its marker.
// Expired markers are swept when the book has doubled since the last
// sweep, so it holds at most about twice the commits of the last refund
// window.
type commitBook struct {
	mu      sync.Mutex
	live    map[string]int64
	next    uint64
	sweepAt int
}

// add records a marker that expires at until and returns its name.
func (b *commitBook) add(until, hw int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = make(map[string]int64)
	}
	if len(b.live) >= b.sweepAt {
		for k, e := range b.live {
			if e <= hw {
				delete(b.live, k)
			}
		}
		b.sweepAt = 2*len(b.live) + 64
	}
	b.next++
	name := "m" + strconv.FormatUint(b.next, 36)
	b.live[name] = until
	return name
}

// take removes marker and reports whether it was live at hw.
func (b *commitBook) take(marker string, hw int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.live[marker]
	delete(b.live, marker)
	return ok && e > hw
}

// commitRefundable, for a refundable call whose checks have all been
// committed (with every involved shard locked), records its
// commit marker, marks its keys pending for the call's refund window, and
// gives its Results their Receipt.
func (m *Store) commitRefundable(checks []algorithms.Check, hashes []uint64, shards []uint8, results []algorithms.Result, now, hw int64) {
	w := receipt.Window(checks)
	if w <= 0 {
		return
	}
	// the TTL of the markers Redis sets: whole milliseconds
	until := hw + calc.CeilDiv(int64(w/time.Microsecond), 1000)*1000
	marker := m.book.add(until, hw)
	for i := range checks {
		// looked up again: inserting a later check's key may have moved
		// the slot of an earlier one
		if st := m.shards[shards[i]].lookup(hashes[i], checks[i].Key); st != nil {
			st.pending = max(st.pending, until)
		}
		results[i].Receipt = algorithms.Receipt{Marker: marker, At: now}
	}
}

// Refund implements [algorithms.Refunder]: the refunds of each commit
// marker are made together, with their keys' shards locked, at the
// store's current time; a marker that is gone (refunded already) or
// expired gives nothing back. It never fails but for a context that has
// ended.
func (m *Store) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	if err := algorithms.ValidateRefunds(refunds); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &algorithms.BackendError{Backend: "memory", Err: err}
	}
	now := m.now().UnixMicro()
	hw := m.expiryTime(now)
	var err error
	for group, units := range receipt.Groups(refunds) {
		if units && !m.refundGroup(refunds, group, now, hw) && err == nil {
			err = fmt.Errorf("%w (commit %s)", algorithms.ErrNotRefunded, refunds[group[0]].Result.Receipt.Marker)
		}
	}
	return err
}

// refundGroup makes the refunds in group, which share one commit marker,
// with their shards locked, if it takes the marker; it reports whether it
// did.
func (m *Store) refundGroup(refunds []algorithms.Refund, group []int, now, hw int64) bool {
	hashes := make([]uint64, len(group))
	order := make([]uint8, len(group))
	for k, j := range group {
		hashes[k] = maphash.String(m.seed, refunds[j].Check.Key)
		order[k] = uint8(hashes[k] % memoryShards)
	}
	locks := slices.Compact(slices.Sorted(slices.Values(order)))
	for _, s := range locks {
		m.shards[s].mu.Lock()
	}
	defer func() {
		for _, s := range locks {
			m.shards[s].mu.Unlock()
		}
	}()
	marker := refunds[group[0]].Result.Receipt.Marker
	if !m.book.take(marker, hw) {
		return false
	}
	for k, j := range group {
		r := &refunds[j]
		if r.Units == 0 {
			continue
		}
		c := &r.Check
		p := calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, r.Units)
		sh := &m.shards[order[k]]
		st := sh.lookup(hashes[k], c.Key)
		if st == nil {
			continue
		}
		o := st.Refund(&p, r.Result.Receipt.At, int64(r.Result.ResetAfter/time.Microsecond), now, st.expires > hw)
		switch {
		case o.Gone && st.pending > hw:
			// the key's pending marker outlives its state, as in Redis
			st.State, st.expires = calc.State{}, 0
		case o.Gone:
			sh.remove(hashes[k], c.Key)
		case o.TTL > 0:
			st.expires = hw + calc.CeilDiv(o.TTL, 1000)*1000
		}
	}
	return true
}
