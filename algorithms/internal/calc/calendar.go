package calc

import "time"

// Calendar is the algorithm number of a calendar quota: a fixed window
// whose windows are calendar periods in a time zone (algorithms.FixedWindow
// with Limit.Calendar set). It is not an algorithms.Algorithm: the number
// tells the scripts and the stores that the window's boundaries travel with
// the check, so that no fast path or batch takes it for the epoch-aligned
// fixed window.
const Calendar uint8 = 7

// The calendar units, numbered as algorithms.CalendarUnit numbers them (a
// test of package algorithms checks it).
const (
	Day uint8 = iota + 1
	Week
	Month
	Year
)

// PrepareCalendar returns the Params of a calendar quota of rate units per
// unit in loc (nil: UTC), for a check of cost (0 means 1) decided around
// now (µs). A calendar check's Params carry, instead of a period and a
// refill, the boundaries of two calendar windows: the one holding now,
// [Period, R), and the next, [R, U), so that a store whose clock is ahead
// of now by less than the rest of the window decides it too.
func PrepareCalendar(unit uint8, loc *time.Location, rate, cost, now int64) Params {
	p := Params{Alg: Calendar, Cap: rate, Cost: max(cost, 1)}
	p.Period, p.R, p.U = Bounds(unit, loc, now)
	return p
}

// Covers reports whether a calendar check's Params place now: whether now
// is in [p.Period, p.U). A script whose clock is outside says so, and the
// caller prepares the check again around the script's now.
func (p *Params) Covers(now int64) bool { return p.Period <= now && now < p.U }

// Bounds returns, in µs, the start s0 of the calendar window of unit in loc
// (nil: UTC) that holds the instant now (µs), its end s1 and the next
// window's end s2. A window starts at its first day's midnight in loc, or at
// that day's first instant when a change of clocks skips midnight; days
// last 23 or 25 hours across changes of clocks, and months and years have
// their calendar lengths.
func Bounds(unit uint8, loc *time.Location, now int64) (s0, s1, s2 int64) {
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMicro(now).In(loc)
	y, m, d := t.Date()
	var dm, dd int // one window: dm months and dd days
	switch unit {
	case Week:
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
		dd = 7
	case Month:
		d, dm = 1, 1
	case Year:
		m, d, dm = time.January, 1, 12
	default:
		dd = 1
	}
	s0 = dayStart(y, m, d, loc)
	s1 = dayStart(y, m+time.Month(dm), d+dd, loc)
	s2 = dayStart(y, m+time.Month(2*dm), d+2*dd, loc)
	return s0, s1, s2
}

// dayStart returns the first instant (µs) of the day y-m-d in loc: its
// midnight, or, when a change of clocks skips midnight, the instant of the
// change. time.Date normalises the date (day 32 of January is February 1st).
func dayStart(y int, m time.Month, d int, loc *time.Location) int64 {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, loc).Date() // the date, normalised
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		// Midnight does not exist: time.Date read it with the offset after
		// the change, an instant of the day before; the day starts where
		// that offset begins.
		_, end := t.ZoneBounds()
		t = end
	}
	return t.UnixMicro()
}

// calendar mirrors lua/calendar.lua: a fixed window whose window is
// [p.Period, p.R) when now is before p.R, else [p.R, p.U) (now must be in
// [p.Period, p.U): see [Params.Covers]). The state is the fixed window's:
// the stored window's start and end instants (a and c, µs) and its count
// (b), so that a key moving between an epoch-aligned fixed window and a
// calendar quota is read as a fixed window reads a change of period.
//
// The stored count still counts at now when the stored window is not over
// (now < end) and started in the current window (or later). It counts
// until the earlier of the stored end and the current window's end, or,
// when the stored window starts at or after the current window's end (the
// clock went back, or the time zone changed), until the stored end: a key
// is never held beyond its stored end (its TTL), nor, once the clock has
// caught up, beyond the end of the window it is in.
func (s *State) calendar(p *Params, now int64, exists, commit bool) Outcome {
	start, end := p.Period, p.R
	if now >= p.R {
		start, end = p.R, p.U
	}
	var count int64
	if exists && now < s.c && s.a >= start {
		count = s.b
		if s.a >= end || s.c < end {
			end = s.c
		}
		start = s.a
	}
	return s.window(p, count, start, end, now, commit)
}
