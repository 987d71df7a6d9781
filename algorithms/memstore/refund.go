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
	"github.com/redlimit/redlimit/internal/contract"
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
	live    map[string]commitEntry
	next    uint64
	sweepAt int
}

// commitEntry is a live commit marker: when it expires, and the refund
// records of its token bucket and GCRA keys as the commit found them (the
// "|<g>,<R>" of a Redis commit marker; see lua/prelude.lua).
type commitEntry struct {
	until int64
	marks []keyMark
}

type keyMark struct {
	key  string
	mark calc.RefundMark
}

// mark returns what e noted of key's refund record (none: not Live).
func (e *commitEntry) mark(key string) calc.RefundMark {
	for i := range e.marks {
		if e.marks[i].key == key {
			return e.marks[i].mark
		}
	}
	return calc.RefundMark{}
}

// refundRecord is a key's refund record (as the sibling key
// "<key>:rf" Redis holds: see lua/prelude.lua), live until until (µs).
type refundRecord struct {
	calc.RefundRecord
	until int64
}

// record returns key's refund record, live at hw, or nil.
func (sh *memoryShard) record(key string, hw int64) *refundRecord {
	if r := sh.records[key]; r != nil && r.until > hw {
		return r
	}
	return nil
}

// newRecord returns a record for key, not Live, in place of an expired
// one; the expired records are swept when the shard's records have
// doubled since the last sweep.
func (sh *memoryShard) newRecord(key string, hw int64) *refundRecord {
	if r := sh.records[key]; r != nil {
		r.RefundRecord = calc.RefundRecord{}
		return r
	}
	if sh.records == nil {
		sh.records = make(map[string]*refundRecord)
	}
	if len(sh.records) >= sh.recSweep {
		for k, r := range sh.records {
			if r.until <= hw {
				delete(sh.records, k)
			}
		}
		sh.recSweep = 2*len(sh.records) + 64
	}
	r := new(refundRecord)
	sh.records[key] = r
	return r
}

// add records a marker that expires at until, with marks, and returns its
// name.
func (b *commitBook) add(until, hw int64, marks []keyMark) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = make(map[string]commitEntry)
	}
	if len(b.live) >= b.sweepAt {
		for k, e := range b.live {
			if e.until <= hw {
				delete(b.live, k)
			}
		}
		b.sweepAt = 2*len(b.live) + 64
	}
	b.next++
	name := "m" + strconv.FormatUint(b.next, 36)
	b.live[name] = commitEntry{until: until, marks: marks}
	return name
}

// take removes marker and reports whether it was live at hw, with its
// entry.
func (b *commitBook) take(marker string, hw int64) (commitEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.live[marker]
	delete(b.live, marker)
	return e, ok && e.until > hw
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
	var marks []keyMark
	for i := range checks {
		// looked up again: inserting a later check's key may have moved
		// the slot of an earlier one
		sh := &m.shards[shards[i]]
		if st := sh.lookup(hashes[i], checks[i].Key); st != nil {
			st.pending = max(st.pending, until)
		}
		if r := sh.record(checks[i].Key, hw); r != nil {
			marks = append(marks, keyMark{key: checks[i].Key, mark: r.Mark()})
		}
	}
	marker := m.book.add(until, hw, marks)
	for i := range checks {
		results[i].Receipt = algorithms.Receipt{Marker: marker, At: now}
	}
}

// Refund implements [algorithms.Refunder]: the refunds of each commit
// marker are made together, with their keys' shards locked, at the
// store's current time; a marker that is gone (refunded already) or
// expired gives nothing back. It never fails but for a context that has
// ended.
func (m *Store) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	if err := contract.ValidateRefunds(refunds); err != nil {
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
	entry, ok := m.book.take(marker, hw)
	if !ok {
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
		at, reset := r.Result.Receipt.At, int64(r.Result.ResetAfter/time.Microsecond)
		rr := sh.record(c.Key, hw)
		var rec calc.RefundRecord
		if rr != nil {
			rec = rr.RefundRecord
		}
		since, v := rec.Since(entry.mark(c.Key), at, reset)
		o := st.Refund(&p, at, reset, since, now, st.expires > hw)
		if o.Gave > 0 && calc.RecordsRefunds(c.Key) {
			if rr == nil {
				rr = sh.newRecord(c.Key, hw)
			}
			rr.Add(v, at+reset, o.Gave, now)
			// it lives a full bucket's time (ms, and 1 ms) after its last
			// refund, as the key Redis keeps
			rr.until = hw + (calc.CeilDiv(calc.Tau(&p), 1000)+1)*1000
		}
		switch {
		case o.Gone && st.pending > hw:
			// the key's pending marker outlives its state, as in Redis
			st.State, st.expires = calc.State{}, 0
		case o.Gone:
			sh.remove(hashes[k], c.Key)
		case o.TTL > 0:
			st.expires = hw + calc.KeyTTL(p.Alg, o.TTL)
		}
	}
	return true
}
