package calc

// gcra mirrors lua/gcra.lua. The stored value is the theoretical arrival time
// TAT = a + b/c µs (b < c, where c is the refill r of the limit that wrote
// it; b is 0 whenever the emission interval u/r µs is a whole number), the
// instant at which the bucket is full again, and d, the [Tau] of the limit
// that wrote it. In scaled units (1/r µs) the key is diff = TAT−now from
// full, its time-debt; a check of cost n passes when diff + n·u <=
// capacity·u.
//
// Across a change of limit the time-debt is what is kept: the bucket is full
// at the same instant as before, or sooner, since a debt of more than one
// full bucket of the new limit is cut to one full bucket (see [bucketDebt]).
// Under the limit that wrote it a debt is never cut: more than a full bucket
// of debt then means that the clock went back, and the key waits for the
// clock to come back rather than refilling twice. [TokenBucket] keeps the
// same, so the two make the same decisions.
func (s *State) gcra(p *Params, now int64, exists, commit bool) Outcome {
	tau := Tau(p)
	diff, cut := s.bucketDebt(p, now, exists, tau)
	if cut {
		s.gcraSet(now, diff, p.R, tau)
	}
	o, next := bucket(p, diff)
	if o.Allowed && commit {
		s.gcraSet(now, next, p.R, tau)
	} else if cut {
		o.TTL = CeilDiv(diff, p.R)
	}
	return o
}

func (s *State) gcraSet(now, diff, r, tau int64) {
	s.a, s.b, s.c, s.d = now+diff/r, diff%r, 0, tau
	if s.b != 0 {
		s.c = r
	}
}

// Tau is the full window of a bucket limit (TokenBucket, GCRA), ⌈cap·u/r⌉
// µs: the time its empty bucket takes to refill. Every bucket key stores the
// Tau of the limit that wrote it, which tells a limit that changed from a
// clock that went back (see [bucketDebt]).
func Tau(p *Params) int64 { return CeilDiv(p.Cap*p.U, p.R) }

// bucketDebt returns the time-debt at now, in 1/r µs, of a bucket that is
// full at the instant a + b/rs µs (b < rs), and whether it was cut to full
// (the capacity in scaled units). same says that the key was written under
// a limit of the same [Tau] as the one it is read under.
//
// A debt counted in another refill (rs != r) with a fraction is rounded up
// to the next whole µs.
//
// Under the same limit a debt is never cut: a writer leaves at most one full
// bucket of debt, so more than that means the clock went back (a failover
// to a server whose clock is behind, an injected clock that stepped back).
// Such a key reads as more than empty: it is denied, with the honest
// RetryAfter, until the clock has caught up, and nothing is stored, so the
// clock coming back forward (a failback) finds the debt where it was. A
// clock going back never creates capacity.
//
// Under another limit (or a key written before the Tau was stored) a debt
// above full is cut to full, and the caller stores the cut, denial or not:
// the key then reads as empty, as it did, and refills at the new limit's
// rate from now, so a key that moves to a faster tier waits at most one
// emission interval of the new limit, and the time a key may be held is one
// full bucket of the new limit. A clock that goes back at the same moment
// as the limit changes is forgiven its step, up to the old limit's full
// bucket, once.
func bucketDebt(a, b, rs, now, r, full int64, same bool) (int64, bool) {
	if b != 0 && rs != r {
		a, b = a+1, 0
	}
	if a < now {
		return 0, false
	}
	d := a - now
	if same {
		return d*r + b, false
	}
	if d > full/r {
		return full, true
	}
	if diff := d*r + b; diff <= full {
		return diff, false
	}
	return full, true
}

// bucket evaluates a check of cost p.Cost against a bucket (TokenBucket or
// GCRA) diff scaled units from full, and returns its outcome and, when it
// passes, the debt it leaves.
func bucket(p *Params, diff int64) (Outcome, int64) {
	full := p.Cap * p.U
	remaining := (full - diff) / p.U // negative after the clock went back: callers clamp
	if p.Cost > p.Cap {
		return Outcome{Remaining: remaining, Reset: CeilDiv(diff, p.R)}, 0
	}
	next := diff + p.Cost*p.U
	if next > full {
		return Outcome{Remaining: remaining, Retry: CeilDiv(next-full, p.R), Reset: CeilDiv(diff, p.R)}, 0
	}
	return Outcome{Allowed: true, Remaining: (full - next) / p.U, Reset: CeilDiv(next, p.R)}, next
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

// gcraRefund moves the TAT back by cost's emission time (at most what
// refundDebt gives back), from its value at now; a TAT at or before now is
// a full bucket: the key is deleted.
func (s *State) gcraRefund(p *Params, at, reset, now int64) RefundOutcome {
	tau := Tau(p)
	diff, _ := bucketDebt(s.a, s.b, s.c, now, p.R, p.Cap*p.U, s.d == tau)
	give := refundDebt(p.Cost*p.U, at, reset, now, p.R)
	diff -= give
	if diff <= 0 {
		return RefundOutcome{Gone: true, Gave: CeilDiv(give, p.R)}
	}
	s.gcraSet(now, diff, p.R, tau)
	return RefundOutcome{TTL: CeilDiv(diff, p.R), Gave: CeilDiv(give, p.R)}
}

// Block takes p.Cost units of a bucket key (TokenBucket, GCRA) as a quota
// block that its taker may use from now until now+hold µs, never later: it
// mirrors lua/block.lua.
//
// The block is checked at now, as a check of p.Cost units is (the units
// must be there at the first instant they may be used), and stored as if
// its units arrived at now+hold, the last instant they may be used: the
// key's time-debt becomes max(debt, hold·r) + p.Cost·u. A unit the taker
// uses at any instant in between is then one the bucket had, and every
// check after the block counts it as late as it may come, so the units
// admitted over any interval, the block's included, stay within burst +
// rate × interval. The debt may exceed one full bucket by up to hold: the
// key then waits for it, as a key whose clock went back does, under the
// same limit (see [bucketDebt]).
//
// A block's units are never given back: giving back exactly would need to
// know what was admitted after the block (see docs/leasing.md). A block
// not used up is capacity the bucket refills at its rate.
func (s *State) Block(p *Params, now, hold int64, exists bool) Outcome {
	tau := Tau(p)
	diff, cut := s.bucketDebt(p, now, exists, tau)
	o, _ := bucket(p, diff)
	if !o.Allowed {
		if cut {
			s.bucketSet(p, now, diff, tau)
			o.TTL = CeilDiv(diff, p.R)
		}
		return o
	}
	next := max(diff, hold*p.R) + p.Cost*p.U
	s.bucketSet(p, now, next, tau)
	o.Remaining = (p.Cap*p.U - next) / p.U // negative when the hold exceeds what was left: callers clamp
	o.Reset = CeilDiv(next, p.R)
	return o
}

// bucketDebt returns the time-debt at now of a bucket key (see
// [bucketDebt]), in scaled units, and whether it was cut.
func (s *State) bucketDebt(p *Params, now int64, exists bool, tau int64) (int64, bool) {
	if !exists {
		return 0, false
	}
	if p.Alg == TokenBucket {
		if s.b <= 0 { // b is 0 only in the state of another algorithm
			return 0, false
		}
		return bucketDebt(s.c+s.a/s.b, s.a%s.b, s.b, now, p.R, p.Cap*p.U, s.d == tau)
	}
	return bucketDebt(s.a, s.b, s.c, now, p.R, p.Cap*p.U, s.d == tau)
}

// bucketSet stores a bucket key's time-debt diff at now.
func (s *State) bucketSet(p *Params, now, diff, tau int64) {
	if p.Alg == TokenBucket {
		s.a, s.b, s.c, s.d = diff, p.R, now, tau
		return
	}
	s.gcraSet(now, diff, p.R, tau)
}
