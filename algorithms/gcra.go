package algorithms

// gcra mirrors lua/gcra.lua. The stored value is the theoretical arrival time
// TAT = a + b/r µs (b < r), so the emission interval u/r µs is exact. In scaled
// units (1/r µs) the key is diff = TAT−now ahead of the clock; a check of cost
// n passes when diff + n·u <= capacity·u.
func (s *state) gcra(p *prepared, now int64, exists, commit bool) outcome {
	full := p.cap * p.u
	a, f := now, int64(0)
	if exists && s.a >= now {
		a, f = s.a, s.b
	}
	// A clock far behind the stored TAT denies anyway; bounding the distance
	// keeps the arithmetic exact.
	d := min(a-now, maxExact/p.r)
	diff := d*p.r + f
	remaining := max(full-diff, 0) / p.u
	next := diff + p.cost*p.u
	switch {
	case p.cost > p.cap:
		return outcome{remaining: remaining, reset: ceilDiv(diff, p.r)}
	case next > full:
		return outcome{remaining: remaining, retry: ceilDiv(next-full, p.r), reset: ceilDiv(diff, p.r)}
	}
	if commit {
		s.a, s.b = now+next/p.r, next%p.r
	}
	return outcome{allowed: true, remaining: (full - next) / p.u, reset: ceilDiv(next, p.r)}
}
