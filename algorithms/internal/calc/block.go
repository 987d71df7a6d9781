package calc

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
