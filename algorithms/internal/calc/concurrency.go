package calc

import "slices"

// concurrency mirrors lua/concurrency.lua. The state is the set of slots
// held: one member per slot, named by its lease id and its number within
// the lease (0 to cost-1), scored with the instant (µs) its lease expires.
// A slot counts while its expiry is after now; every evaluation first
// drops the slots that have expired (ZREMRANGEBYSCORE), which changes no
// decision. p.R is the check's lease id.
//
// A denial's retry is when enough leases have expired for the cost to fit
// (the earliest expiry for a cost of one): an upper bound, since a slot
// is usually released sooner. Reset is when the last lease expires.
func (s *State) concurrency(p *Params, now int64, exists, commit bool) Outcome {
	var empty slotSet
	var set *slotSet
	switch {
	case s.set != nil:
		set = &s.set.slots
	case commit:
		s.set = new(sets)
		set = &s.set.slots
	default:
		set = &empty
	}
	if !exists {
		set.s = set.s[:0]
	}
	set.expire(now)
	count := int64(len(set.s))
	reset := int64(0)
	if count > 0 {
		reset = set.last() - now
	}
	if p.Cost > p.Cap {
		return Outcome{Remaining: p.Cap - count, Reset: reset}
	}
	if lease := uint64(p.R); set.has(lease, 0) {
		// the lease acquires again (a call retried after its reply was
		// lost): its own slots are not taken from others, and are taken
		// again
		for n := range p.Cost {
			if set.has(lease, n) {
				count--
			}
		}
	}
	switch {
	case count+p.Cost > p.Cap:
		k := count + p.Cost - p.Cap
		return Outcome{Remaining: p.Cap - count, Retry: set.s[k-1].exp - now, Reset: reset}
	}
	expiry := now + p.Period
	reset = max(reset, p.Period)
	if commit {
		set.add(uint64(p.R), p.Cost, expiry)
	}
	// count+cost, not the set's size after the commit: a lease id given
	// twice re-scores its members, as ZADD does, and Lua replies the same.
	return Outcome{Allowed: true, Remaining: p.Cap - count - p.Cost, Reset: reset}
}

// slotSet is the slots held on a key, ordered by expiry.
type slotSet struct{ s []slotEntry }

type slotEntry struct {
	exp   int64  // µs
	lease uint64 // lease id
	n     int64  // the slot's number within its lease
}

// expire drops the slots whose lease expired at or before now.
func (l *slotSet) expire(now int64) {
	i := 0
	for i < len(l.s) && l.s[i].exp <= now {
		i++
	}
	if i > 0 {
		l.s = append(l.s[:0], l.s[i:]...)
	}
}

func (l *slotSet) last() int64 { return l.s[len(l.s)-1].exp }

// add adds slots 0 to cost-1 of lease expiring at exp, or re-scores those
// already held (ZADD).
func (l *slotSet) add(lease uint64, cost, exp int64) {
	have := int64(0)
	for i := range l.s {
		if e := &l.s[i]; e.lease == lease && e.n < cost {
			e.exp = exp
			have++
		}
	}
	for n := int64(0); n < cost && have < cost; n++ {
		if !l.has(lease, n) {
			l.s = append(l.s, slotEntry{exp: exp, lease: lease, n: n})
			have++
		}
	}
	l.sort()
}

func (l *slotSet) has(lease uint64, n int64) bool {
	for i := range l.s {
		if l.s[i].lease == lease && l.s[i].n == n {
			return true
		}
	}
	return false
}

// sort orders the set by expiry, as Redis orders a sorted set by score
// (members of one score are in no order that matters here: only scores
// are read back).
func (l *slotSet) sort() {
	if !slices.IsSortedFunc(l.s, cmpSlot) {
		slices.SortStableFunc(l.s, cmpSlot)
	}
}

func cmpSlot(a, b slotEntry) int {
	switch {
	case a.exp < b.exp:
		return -1
	case a.exp > b.exp:
		return 1
	}
	return 0
}

// remove drops slots 0 to cost-1 of lease and returns how many it held.
func (l *slotSet) remove(lease uint64, cost int64) int64 {
	n := int64(0)
	l.s = slices.DeleteFunc(l.s, func(e slotEntry) bool {
		if e.lease == lease && e.n < cost {
			n++
			return true
		}
		return false
	})
	return n
}

// Release mirrors lua/release.lua for one lease of cost slots on a key
// whose state is s (exists: it has any). It drops the expired slots and
// the lease's, and returns how many of the lease's slots it held and the
// key's TTL in µs afterwards: 0 when the key is empty (Redis deletes an
// empty sorted set), -1 when s holds no slots to touch (an absent key, or
// another algorithm's state).
func (s *State) Release(lease uint64, cost, now int64, exists bool) (released, ttl int64) {
	if s.set == nil || !exists {
		return 0, -1
	}
	s.set.slots.expire(now)
	released = s.set.slots.remove(lease, max(cost, 1))
	return released, s.slotsTTL(now)
}

// Renew mirrors lua/renew.lua for one lease of cost slots on a key whose
// state is s: when the lease still holds its first slot after the expired
// slots are dropped, its slots expire at now+period, or later if they
// did already (a clock that went back never shortens a lease). It reports
// whether the lease was held, and returns the key's TTL in µs afterwards
// (as [State.Release] does).
func (s *State) Renew(lease uint64, cost, period, now int64, exists bool) (held bool, ttl int64) {
	if s.set == nil || !exists {
		return false, -1
	}
	l := &s.set.slots
	l.expire(now)
	held = l.has(lease, 0)
	if held {
		exp := now + period
		cost = max(cost, 1)
		for i := range l.s {
			if e := &l.s[i]; e.lease == lease && e.n < cost && e.exp < exp {
				e.exp = exp
			}
		}
		l.sort()
	}
	return held, s.slotsTTL(now)
}

// slotsTTL is the TTL in µs of a concurrency key at now: until its last
// slot expires, or 0 when it holds none.
func (s *State) slotsTTL(now int64) int64 {
	if len(s.set.slots.s) == 0 {
		return 0
	}
	return s.set.slots.last() - now
}
