package algorithms

import (
	"strconv"
	"time"
)

// CalendarUnit is the calendar period of a calendar quota: a [Limit] whose
// windows are the days, ISO weeks, months or years of a time zone rather
// than intervals of a fixed length. The zero value means no calendar: the
// Limit's windows are Period long.
type CalendarUnit uint8

const (
	// Day is a calendar day: from midnight to midnight in the Limit's
	// Location, 23 or 25 hours long on the days clocks change. On a day
	// whose midnight does not exist (a change at midnight), the day starts
	// at its first instant.
	Day CalendarUnit = iota + 1

	// Week is an ISO week: from Monday's midnight to the next Monday's.
	Week

	// Month is a calendar month, 28 to 31 days, from the first day's
	// midnight.
	Month

	// Year is a calendar year, from January 1st's midnight.
	Year
)

var calendarNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the unit's name: "day", "week", "month" or "year".
func (u CalendarUnit) String() string {
	if u.valid() {
		return calendarNames[u]
	}
	return "CalendarUnit(" + strconv.Itoa(int(u)) + ")"
}

func (u CalendarUnit) valid() bool { return u >= Day && u <= Year }

// PerDayIn returns a calendar quota of rate units per calendar day in loc
// (nil means UTC), for [FixedWindow]: the count starts afresh at each
// midnight of loc, and a denied request's RetryAfter (and every Result's
// ResetAfter) runs to the next one.
func PerDayIn(rate int64, loc *time.Location) Limit {
	return Limit{Rate: rate, Calendar: Day, Location: loc}
}

// PerWeekIn returns a calendar quota of rate units per ISO week (Monday
// to Sunday) in loc (nil means UTC), for [FixedWindow].
func PerWeekIn(rate int64, loc *time.Location) Limit {
	return Limit{Rate: rate, Calendar: Week, Location: loc}
}

// PerMonthIn returns a calendar quota of rate units per calendar month in
// loc (nil means UTC), for [FixedWindow].
func PerMonthIn(rate int64, loc *time.Location) Limit {
	return Limit{Rate: rate, Calendar: Month, Location: loc}
}

// PerYearIn returns a calendar quota of rate units per calendar year in
// loc (nil means UTC), for [FixedWindow].
func PerYearIn(rate int64, loc *time.Location) Limit {
	return Limit{Rate: rate, Calendar: Year, Location: loc}
}

// calendarString formats a calendar quota as "10000/day Europe/Berlin".
func (l Limit) calendarString() string {
	return strconv.FormatInt(l.Rate, 10) + "/" + l.Calendar.String() + " " + l.Location.String()
}

// validateCalendar validates a Limit with Calendar or Location set.
func (l Limit) validateCalendar(a Algorithm) error {
	switch {
	case !l.Calendar.valid():
		if l.Calendar == 0 {
			return &ConfigError{Field: "Limit.Location", Reason: "is used only by a calendar quota and must be nil when Limit.Calendar is not set, got " + l.Location.String()}
		}
		return fieldErr("Limit.Calendar", "must be Day, Week, Month or Year, got ", int64(l.Calendar))
	case a != FixedWindow:
		return &ConfigError{Field: "Limit.Calendar", Reason: "is a fixed window of calendar periods and needs Algorithm fixed_window, got " + a.String()}
	case l.Period != 0:
		return &ConfigError{Field: "Limit.Period", Reason: "must be 0 when Limit.Calendar is set (the calendar sets the windows), got " + l.Period.String()}
	case l.Rate <= 0:
		return fieldErr("Limit.Rate", "must be > 0, got ", l.Rate)
	case l.Rate > maxCostOrLimit:
		return fieldErr("Limit.Rate", "must be <= 2^40, got ", l.Rate)
	case l.Burst != 0:
		return fieldErr("Limit.Burst", "is not used by a calendar quota and must be 0, got ", l.Burst)
	}
	return nil
}
