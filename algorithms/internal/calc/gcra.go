package calc

// gcra mirrors lua/gcra.lua. The stored value is the theoretical arrival time
// TAT = a + b/c µs (b < c, where c is the refill r of the limit that wrote
// it; b is 0 whenever the emission interval u/r µs is a whole number), the
// instant at which the bucket is full again. In scaled units (1/r µs) the
// key is diff = TAT−now from full, its time-debt; a check of cost n passes
// when diff + n·u <= capacity·u.
//
// Across a change of limit the time-debt is what is kept: the bucket is full
// at the same instant as before, or sooner, since a debt of more than one
// full bucket of the new limit is cut to one full bucket (see [bucketDebt]).
// [TokenBucket] keeps the same, so the two make the same decisions.
func (s *State) gcra(p *Params, now int64, exists, commit bool) Outcome {
	var diff int64
	var cut bool
	if exists {
		diff, cut = bucketDebt(s.a, s.b, s.c, now, p.R, p.Cap*p.U)
		if cut {
			s.gcraSet(now, diff, p.R)
		}
	}
	o, next := bucket(p, diff)
	if o.Allowed && commit {
		s.gcraSet(now, next, p.R)
	} else if cut {
		o.TTL = CeilDiv(diff, p.R)
	}
	return o
}

func (s *State) gcraSet(now, diff, r int64) {
	s.a, s.b, s.c = now+diff/r, diff%r, 0
	if s.b != 0 {
		s.c = r
	}
}

// bucketDebt returns the time-debt at now, in 1/r µs, of a bucket that is
// full at the instant a + b/rs µs (b < rs), and whether it was cut to full
// (the capacity in scaled units).
//
// A debt counted in another refill (rs != r) with a fraction is rounded up
// to the next whole µs. A debt above full is cut to full, and the caller
// stores the cut, denial or not: this happens only when the limit changed
// (a debt of one full bucket of a longer or larger limit) or when the clock
// went back (the debt has grown by the step back). The bucket then reads as
// empty, as it did, and refills at the new limit's rate from now: a key that
// moves to a faster tier waits at most one emission interval of the new
// limit, and the time a key may be held is one full bucket of the new limit.
// When the clock goes back by d, a key that was empty waits from the step on
// as if the clock had stood still, rather than d longer.
func bucketDebt(a, b, rs, now, r, full int64) (int64, bool) {
	if b != 0 && rs != r {
		a, b = a+1, 0
	}
	if a < now {
		return 0, false
	}
	d := a - now
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
	remaining := (full - diff) / p.U
	if p.Cost > p.Cap {
		return Outcome{Remaining: remaining, Reset: CeilDiv(diff, p.R)}, 0
	}
	next := diff + p.Cost*p.U
	if next > full {
		return Outcome{Remaining: remaining, Retry: CeilDiv(next-full, p.R), Reset: CeilDiv(diff, p.R)}, 0
	}
	return Outcome{Allowed: true, Remaining: (full - next) / p.U, Reset: CeilDiv(next, p.R)}, next
}
