package algorithms

// slidingWindow mirrors lua/sliding_window.lua: the sliding window counter.
// The estimate at elapsed e into window k is
//
//	prev·(period−e)/period + cur
//
// computed in float64 with the same operations, in the same order, as the
// Lua script (Redis Lua numbers are float64 too), so both backends agree bit
// for bit.
func (s *state) slidingWindow(p *prepared, now int64, exists, commit bool) outcome {
	win := floorDiv(now, p.period)
	var cur, prev int64
	if exists {
		win = max(win, s.a)
		switch win {
		case s.a:
			cur, prev = s.b, s.c
		case s.a + 1:
			prev = s.b
		}
	}
	e := max(now-win*p.period, 0)
	est := swEstimate(prev, p.period, e)
	remaining := int64(float64(p.cap) - est - float64(cur))
	reset := swReset(win, p.period, now, cur, prev)
	switch {
	case p.cost > p.cap:
		return outcome{remaining: remaining, reset: reset}
	case !swPass(prev, cur, p.cost, p.cap, p.period, e):
		return outcome{remaining: remaining, retry: swWait(prev, cur, p.cost, p.cap, p.period, win, e) - now, reset: reset}
	}
	cur += p.cost
	if commit {
		s.a, s.b, s.c = win, cur, prev
	}
	return outcome{allowed: true, remaining: int64(float64(p.cap) - est - float64(cur)), reset: swReset(win, p.period, now, cur, prev)}
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
func swWait(prev, cur, cost, capacity, period, win, e int64) int64 {
	start := win * period
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

func swReset(win, period, now, cur, prev int64) int64 {
	switch {
	case cur > 0:
		return (win+2)*period - now
	case prev > 0:
		return (win+1)*period - now
	}
	return 0
}
