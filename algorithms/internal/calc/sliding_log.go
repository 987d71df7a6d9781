package calc

// slidingLog mirrors lua/sliding_log.lua. An entry at time s counts while
// s > now-period. New entries are stamped max(now, newest entry) so the log
// stays ordered and a clock that goes back cannot make entries expire early.
// Entries are instants, so they mean the same under any limit; a denial sets
// the key's TTL to what they need under the current one (Outcome.TTL), so
// that after a change to a longer period they do not expire before the
// RetryAfter it reports.
func (s *State) slidingLog(p *Params, now int64, exists, commit bool) Outcome {
	from := now - p.Period
	var empty timeLog
	var l *timeLog
	switch {
	case s.set != nil:
		l = &s.set.log
	case commit:
		s.set = new(sets)
		l = &s.set.log
	default:
		l = &empty
	}
	if !exists {
		l.reset()
	}
	old := l.countAtMost(from)
	count := l.len() - old
	reset := int64(0)
	newest, any := l.newest()
	if count > 0 {
		reset = newest + p.Period - now
	}
	switch {
	case p.Cost > p.Cap:
		return Outcome{Remaining: p.Cap - count, Reset: reset}
	case count+p.Cost > p.Cap:
		// The (count+cost-cap)-th oldest entry in the window must leave it.
		k := count + p.Cost - p.Cap
		oldest := l.at(old + k - 1)
		// The entries count until reset under this limit, and the key's TTL
		// is set to match: after a change to a longer period, the TTL the
		// last commit set would drop them before RetryAfter.
		return Outcome{Remaining: p.Cap - count, Retry: oldest + p.Period - now, Reset: reset, TTL: reset}
	}
	stamp := now
	if any && newest > stamp {
		stamp = newest
	}
	if commit {
		l.dropFirst(old)
		l.push(stamp, p.Cost, p.Cap)
	}
	return Outcome{Allowed: true, Remaining: p.Cap - count - p.Cost, Reset: stamp + p.Period - now}
}

// timeLog is an ordered log of µs timestamps, oldest first, stored as a slice
// with a moving head. Steady-state pushes reuse the slice: no allocation.
type timeLog struct {
	buf  []int64
	head int
}

func (l *timeLog) reset()           { l.buf, l.head = l.buf[:0], 0 }
func (l *timeLog) len() int64       { return int64(len(l.buf) - l.head) }
func (l *timeLog) at(i int64) int64 { return l.buf[l.head+int(i)] }

func (l *timeLog) newest() (int64, bool) {
	if l.len() == 0 {
		return 0, false
	}
	return l.buf[len(l.buf)-1], true
}

// countAtMost returns how many entries are <= t (binary search).
func (l *timeLog) countAtMost(t int64) int64 {
	lo, hi := l.head, len(l.buf)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.buf[mid] <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return int64(lo - l.head)
}

func (l *timeLog) dropFirst(n int64) { l.head += int(n) }

// push appends n entries stamped t, compacting in place when the slice is
// full and growing it up to capacity entries.
func (l *timeLog) push(t, n, capacity int64) {
	if l.head > 0 && len(l.buf)+int(n) > cap(l.buf) {
		k := copy(l.buf, l.buf[l.head:])
		l.buf, l.head = l.buf[:k], 0
	}
	if need := len(l.buf) + int(n); need > cap(l.buf) {
		grown := make([]int64, len(l.buf), max(need, min(2*cap(l.buf), int(capacity))))
		copy(grown, l.buf)
		l.buf = grown
	}
	for range n {
		l.buf = append(l.buf, t)
	}
}

// slidingLogRefund removes cost entries of the stamp the commit used
// (at + reset − period), while they are in the window at now; entries of
// one stamp are all alike. The key then lives as long as its newest entry
// counts.
func (s *State) slidingLogRefund(p *Params, at, reset, now int64) RefundOutcome {
	stamp := at + reset - p.Period
	if s.set == nil || stamp <= now-p.Period {
		return RefundOutcome{}
	}
	l := &s.set.log
	l.removeAt(stamp, p.Cost)
	newest, any := l.newest()
	if !any || newest+p.Period-now <= 0 {
		// no entry left, or none that counts: the TTL ends at once
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{TTL: newest + p.Period - now}
}

// removeAt removes up to n entries stamped t.
func (l *timeLog) removeAt(t, n int64) {
	hi := l.countAtMost(t)
	lo := max(l.countAtMost(t-1), hi-n)
	if lo >= hi {
		return
	}
	i, j := l.head+int(lo), l.head+int(hi)
	l.buf = append(l.buf[:i], l.buf[j:]...)
}
