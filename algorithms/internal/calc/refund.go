package calc

// Refund gives back p.Cost units that a commit at at (µs), which replied
// reset µs as its reset_after, took from s, at now: the late refund of
// lua/refund.lua, operation for operation. exists says whether s holds
// stored state. It reports what became of s: Gone (the key reads as full
// capacity: drop it), else TTL, the µs from now after which s expires,
// when the refund set it (0: unchanged).
func (s *State) Refund(p *Params, at, reset, now int64, exists bool) RefundOutcome {
	if !exists {
		return RefundOutcome{}
	}
	switch p.Alg {
	case FixedWindow, Calendar: // one state: the window's start, end and count
		return s.fixedWindowRefund(p, at, reset)
	case SlidingLog:
		return s.slidingLogRefund(p, at, reset, now)
	case SlidingWindow:
		return s.slidingWindowRefund(p, at, reset, now)
	case TokenBucket:
		return s.tokenBucketRefund(p, at, reset, now)
	default:
		return s.gcraRefund(p, at, reset, now)
	}
}

// RefundOutcome is what a refund did to a key's state.
type RefundOutcome struct {
	Gone bool  // the state is empty: the key is deleted
	TTL  int64 // when > 0, the state's new time to live, µs from now
}

// fixedWindowRefund takes cost back from the window the commit wrote, named
// by its end (at + reset), while the key holds that window; once another
// window has replaced it, the units no longer count. The TTL stays: the
// window still ends when it did.
func (s *State) fixedWindowRefund(p *Params, at, reset int64) RefundOutcome {
	if s.c != at+reset {
		return RefundOutcome{}
	}
	s.b -= p.Cost
	if s.b <= 0 {
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{}
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

// slidingWindowRefund takes cost back from the window the commit counted
// in (it started at at + reset − 2·period): the current count while the
// key is at that window, the previous count once it has moved to the
// next, nothing after that or once the period has changed. The key then
// lives until its counts no longer count at now.
func (s *State) slidingWindowRefund(p *Params, at, reset, now int64) RefundOutcome {
	start := at + reset - 2*p.Period
	if s.d-s.a != p.Period {
		return RefundOutcome{}
	}
	switch s.a {
	case start:
		s.b = max(s.b-p.Cost, 0)
	case start + p.Period:
		s.c = max(s.c-p.Cost, 0)
	default:
		return RefundOutcome{}
	}
	r := swReset(s.a, p.Period, now, s.b, s.c)
	if r <= 0 {
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{TTL: r}
}

// refundDebt is the time-debt (scaled by r, as bucketDebt's) that a late
// refund of a bucket's units takes back at now: their own, costDebt, but
// no more than what is left at now of the debt that the commit at at left
// (it replied reset µs to full): units the bucket refilled since are not
// given back again (that would create capacity). As token_bucket_refund
// and gcra_refund in lua/ compute it.
func refundDebt(costDebt, at, reset, now, r int64) int64 {
	left := (at + reset - now) * r
	if left <= 0 {
		return 0
	}
	return min(left, costDebt)
}

// tokenBucketRefund puts cost tokens back at now: the time-debt at now less
// what refundDebt gives back, at least nothing (a full bucket: the key is
// deleted).
func (s *State) tokenBucketRefund(p *Params, at, reset, now int64) RefundOutcome {
	if s.b <= 0 {
		return RefundOutcome{}
	}
	tau := Tau(p)
	diff, _ := bucketDebt(s.c+s.a/s.b, s.a%s.b, s.b, now, p.R, p.Cap*p.U, s.d == tau)
	diff -= refundDebt(p.Cost*p.U, at, reset, now, p.R)
	if diff <= 0 {
		return RefundOutcome{Gone: true}
	}
	s.a, s.b, s.c, s.d = diff, p.R, now, tau
	return RefundOutcome{TTL: CeilDiv(diff, p.R)}
}

// gcraRefund moves the TAT back by cost's emission time (at most what
// refundDebt gives back), from its value at now; a TAT at or before now is
// a full bucket: the key is deleted.
func (s *State) gcraRefund(p *Params, at, reset, now int64) RefundOutcome {
	tau := Tau(p)
	diff, _ := bucketDebt(s.a, s.b, s.c, now, p.R, p.Cap*p.U, s.d == tau)
	diff -= refundDebt(p.Cost*p.U, at, reset, now, p.R)
	if diff <= 0 {
		return RefundOutcome{Gone: true}
	}
	s.gcraSet(now, diff, p.R, tau)
	return RefundOutcome{TTL: CeilDiv(diff, p.R)}
}
