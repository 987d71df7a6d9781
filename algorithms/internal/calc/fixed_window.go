package calc

// fixedWindow mirrors lua/fixed_window.lua. Windows are aligned to the Unix
// epoch: under period P, window k covers [k·P, (k+1)·P). The state is the
// stored window's start and end instants (a and c, µs) and its count (b):
// instants, not a window number, so they mean the same under any limit.
//
// The stored count still counts at now when the stored window is not over
// (now < end) and started in the current window of the current period (or
// later: the clock went back, and the key is held at the later window).
// Under the period it was written with, it counts until the stored end;
// under another (or a calendar quota's window, which may have the same
// length but is not aligned to the epoch), until the earlier of the stored
// end and the current window's end. Otherwise the key starts a fresh window. So a change of
// period never locks a key for longer than one period of the new limit, and
// never beyond the stored state's own end (its TTL): a longer period keeps
// the old count until the old window ends, a shorter one until the current
// window of the new period ends.
func (s *State) fixedWindow(p *Params, now int64, exists, commit bool) Outcome {
	start := floorDiv(now, p.Period) * p.Period
	end := start + p.Period
	var count int64
	if exists && now < s.c && s.a >= start {
		count, start = s.b, s.a
		if s.c-s.a != p.Period || s.a%p.Period != 0 { // another period, or a calendar window
			end = min(s.c, end)
		} else {
			end = s.c // the current window, or a later one: the clock went back
		}
	}
	return s.window(p, count, start, end, now, commit)
}

// window decides a check of a window algorithm (fixed window, calendar
// quota) whose key holds count units in the window [start, end) at now,
// and with commit stores the count the check leaves.
func (s *State) window(p *Params, count, start, end, now int64, commit bool) Outcome {
	reset := int64(0)
	if count > 0 {
		reset = end - now
	}
	switch {
	case p.Cost > p.Cap:
		return Outcome{Remaining: p.Cap - count, Reset: reset}
	case count+p.Cost > p.Cap:
		return Outcome{Remaining: p.Cap - count, Retry: end - now, Reset: reset}
	}
	count += p.Cost
	if commit {
		s.a, s.b, s.c = start, count, end
	}
	return Outcome{Allowed: true, Remaining: p.Cap - count, Reset: end - now}
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

// CountOutcome is the outcome of a check of p (a cost no larger than its
// capacity) on a fixed window's string on the server's clock, as
// lua/fixed_window.lua's fw_count leaves it: count is the key's count
// with the check's cost added, and reset the µs to its window's end. The
// check is allowed if count is at most the capacity; a denial took its
// cost back, and is decided on the count without it. It is window's
// decision on that count, the window ending in reset µs.
func CountOutcome(p *Params, count, reset int64) Outcome {
	var s State
	return s.window(p, count-p.Cost, 0, reset, 0, false)
}
