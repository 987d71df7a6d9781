package algorithms

// fixedWindow mirrors lua/fixed_window.lua. Windows are aligned to the Unix
// epoch: window k covers [k·period, (k+1)·period). A clock that goes back into
// an earlier window is held at the stored window, so it never finds a fresh
// counter.
func (s *state) fixedWindow(p *prepared, now int64, exists, commit bool) outcome {
	win := floorDiv(now, p.period)
	var count int64
	if exists {
		win = max(win, s.a)
		if win == s.a {
			count = s.b
		}
	}
	end := (win+1)*p.period - now
	reset := int64(0)
	if count > 0 {
		reset = end
	}
	switch {
	case p.cost > p.cap:
		return outcome{remaining: p.cap - count, reset: reset}
	case count+p.cost > p.cap:
		return outcome{remaining: p.cap - count, retry: end, reset: reset}
	}
	count += p.cost
	if commit {
		s.a, s.b = win, count
	}
	return outcome{allowed: true, remaining: p.cap - count, reset: end}
}
