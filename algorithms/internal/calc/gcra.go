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
