package calc

// tokenBucket mirrors lua/token_bucket.lua. The state is the tokens missing
// from a full bucket, kept as the time they take to refill: a = missing in
// scaled units of 1/b µs, where b is the refill r of the limit that wrote
// them, and c = the instant (µs) they were counted at. One token is p.U
// units and the bucket refills p.R units per µs, so the refill is exact (no
// float, no whole-second rounding). The bucket is full at c + a/b µs: the
// same instant GCRA stores as its TAT, read by the same [bucketDebt], so the
// two algorithms make the same decisions, across changes of limit and
// clocks that go back too (d is the [Tau] of the limit that wrote the
// state). A denied check stores nothing (but a cut debt), so the refill
// accrued since the last allowed check is never lost.
func (s *State) tokenBucket(p *Params, now int64, exists, commit bool) Outcome {
	tau := Tau(p)
	diff, cut := s.bucketDebt(p, now, exists, tau)
	if cut {
		s.a, s.b, s.c, s.d = diff, p.R, now, tau
	}
	o, next := bucket(p, diff)
	if o.Allowed && commit {
		s.a, s.b, s.c, s.d = next, p.R, now, tau
	} else if cut {
		o.TTL = CeilDiv(diff, p.R)
	}
	return o
}

// tokenBucketRefund puts cost tokens back at now (reset: the commit's
// horizon less what refunds gave back since): the time-debt at now less
// what refundDebt gives back, at least nothing (a full bucket: the key is
// deleted).
func (s *State) tokenBucketRefund(p *Params, at, reset, now int64) RefundOutcome {
	if s.b <= 0 {
		return RefundOutcome{}
	}
	tau := Tau(p)
	diff, _ := bucketDebt(s.c+s.a/s.b, s.a%s.b, s.b, now, p.R, p.Cap*p.U, s.d == tau)
	give := refundDebt(p.Cost*p.U, at, reset, now, p.R)
	diff -= give
	if diff <= 0 {
		return RefundOutcome{Gone: true, Gave: CeilDiv(give, p.R)}
	}
	s.a, s.b, s.c, s.d = diff, p.R, now, tau
	return RefundOutcome{TTL: CeilDiv(diff, p.R), Gave: CeilDiv(give, p.R)}
}
