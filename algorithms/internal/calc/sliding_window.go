package calc

// slidingWindow mirrors lua/sliding_window.lua: the sliding window counter.
// The estimate at elapsed e into the current window is
//
//	prev·(period−e)/period + cur
//
// computed in float64 with the same operations, in the same order, as the
// Lua script (Redis Lua numbers are float64 too), so both backends agree bit
// for bit.
//
// The state is the stored window's start and end instants (a and d, µs),
// its count (b) and the previous window's count (c). Under an unchanged
// period the stored window is the current one, the previous one, or older.
// When the period changed (end−start differs from it), each stored window's
// count goes to the window of the new period in which that stored window
// started: the current one, the previous one, or none; and the stored
// counts are forgotten when the stored state would have expired, at the
// stored end, plus the old period if the stored window had a count (the
// key's TTL): no claim is made beyond that. Under an unchanged period, a
// window that starts in the future (the clock went back) is held.
func (s *State) slidingWindow(p *Params, now int64, exists, commit bool) Outcome {
	start := floorDiv(now, p.Period) * p.Period
	var cur, prev int64
	life := int64(-1) // the instant the stored counts are forgotten; -1: not before the state's own expiry
	if exists {
		old := s.d - s.a
		switch {
		case old == p.Period && s.a > start:
			start, cur, prev = s.a, s.b, s.c
		case old == p.Period:
			switch s.a {
			case start:
				cur, prev = s.b, s.c
			case start - p.Period:
				prev = s.b
			}
		default:
			life = s.d
			if s.b > 0 {
				life += old
			}
			if now < life {
				cur, prev = swMap(s.a, s.b, start, p.Period, cur, prev)
				cur, prev = swMap(s.a-old, s.c, start, p.Period, cur, prev)
			}
		}
	}
	e := max(now-start, 0)
	est := swEstimate(prev, p.Period, e)
	remaining := int64(float64(p.Cap) - est - float64(cur))
	reset := swClamp(swReset(start, p.Period, now, cur, prev), life, now)
	switch {
	case p.Cost > p.Cap:
		return Outcome{Remaining: remaining, Reset: reset}
	case !swPass(prev, cur, p.Cost, p.Cap, p.Period, e):
		retry := swClamp(swWait(prev, cur, p.Cost, p.Cap, p.Period, start, e)-now, life, now)
		return Outcome{Remaining: remaining, Retry: retry, Reset: reset}
	}
	cur += p.Cost
	reset = swClamp(swReset(start, p.Period, now, cur, prev), -1, now)
	if commit {
		s.a, s.b, s.c, s.d = start, cur, prev, start+p.Period
	}
	return Outcome{Allowed: true, Remaining: int64(float64(p.Cap) - est - float64(cur)), Reset: reset}
}

// swMap adds n units counted in a window that started at from to the
// current (cur) or previous (prev) window of period that starts at start.
func swMap(from, n, start, period, cur, prev int64) (int64, int64) {
	switch {
	case from >= start:
		cur += n
	case from >= start-period:
		prev += n
	}
	return cur, prev
}

// swClamp bounds a claim d (µs from now), when life is not -1, by the
// instant life at which the stored counts are forgotten.
func swClamp(d, life, now int64) int64 {
	if life >= 0 {
		d = min(d, life-now)
	}
	return max(d, 0)
}

// swEstimate returns prev·(period−e)/period. The explicit conversions keep
// each operation rounded on its own, as in Lua (no fused multiply-add).
func swEstimate(prev, period, e int64) float64 {
	x := float64(float64(prev) * float64(period-e))
	return float64(x / float64(period))
}

func swPass(prev, cur, cost, capacity, period, e int64) bool {
	return float64(swEstimate(prev, period, e)+float64(cur+cost)) <= float64(capacity)
}

// swWait returns the first instant (µs) at which a check of cost passes when
// no other traffic arrives: later in this window as the previous window's
// weight fades, or in the next window, where cur becomes the previous count.
func swWait(prev, cur, cost, capacity, period, start, e int64) int64 {
	if cur+cost > capacity {
		// Not in this window: in the next one cur weighs as prev.
		prev, cur, start, e = cur, 0, start+period, 0
	}
	// prev·(period−x)/period <= capacity−cur−cost, first guess by algebra,
	// then corrected by the exact predicate (float rounding).
	slack := float64(capacity - cur - cost)
	x := int64(float64(period) - float64(float64(slack*float64(period))/float64(prev)))
	x = min(max(x, e), period)
	for x < period && !swPass(prev, cur, cost, capacity, period, x) {
		x++
	}
	for x > e && swPass(prev, cur, cost, capacity, period, x-1) {
		x--
	}
	return start + x
}

func swReset(start, period, now, cur, prev int64) int64 {
	switch {
	case cur > 0:
		return start + 2*period - now
	case prev > 0:
		return start + period - now
	}
	return 0
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
