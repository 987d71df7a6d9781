package backendtest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// CalendarZones are the time zones of the calendar workloads: UTC, two
// with daylight saving time at 02:00 or 03:00, one half an hour off the
// hour, one whose clocks change at midnight (the day starts at 01:00), and
// one whose clocks change by half an hour.
var CalendarZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "America/Havana", "Australia/Lord_Howe"}

// calendarStarts are instants near calendar boundaries that are hard to
// get right: a month end, leap days, changes of clocks, a year end.
var calendarStarts = []string{
	"2028-01-31T22:00:00Z", "2028-02-28T20:00:00Z", "2027-02-28T20:00:00Z",
	"2028-03-25T20:00:00Z", "2028-03-11T22:00:00Z", "2028-10-28T20:00:00Z",
	"2028-11-04T22:00:00Z", "2027-12-31T20:00:00Z", "2024-03-09T20:00:00Z",
	"2028-04-01T12:00:00Z", "2028-10-01T12:00:00Z",
}

// CalendarWorkload returns a random sequence of calls of one to three
// rules keyed on two keys, mostly calendar quotas (a random unit and zone
// of CalendarZones), and with changes, sometimes, on the same key, another
// limit (another calendar quota or an epoch-aligned fixed window: a change
// of tier or a redeploy). Time starts near a hard boundary and moves forward by up to
// three hours, sometimes by up to three days, and sometimes back by up to
// an hour; costs range from 0 to capacity+1.
func CalendarWorkload(seed uint64, steps int, changes bool) []Call {
	rng := rand.New(rand.NewPCG(seed, 7))
	units := []algorithms.CalendarUnit{algorithms.Day, algorithms.Day, algorithms.Week, algorithms.Month, algorithms.Year}
	limit := func() algorithms.Limit {
		if rng.IntN(6) == 0 {
			return algorithms.Limit{Rate: 1 + rng.Int64N(10), Period: []time.Duration{time.Hour, 24 * time.Hour}[rng.IntN(2)]}
		}
		loc, err := time.LoadLocation(CalendarZones[rng.IntN(len(CalendarZones))])
		if err != nil {
			panic(err) // the zones are in time/tzdata
		}
		return algorithms.Limit{Rate: 1 + rng.Int64N(10), Calendar: units[rng.IntN(len(units))], Location: loc}
	}
	type rule struct{ main, other algorithms.Limit }
	rules := make([]rule, 1+rng.IntN(3))
	for i := range rules {
		rules[i] = rule{limit(), limit()}
	}
	now, err := time.Parse(time.RFC3339, calendarStarts[rng.IntN(len(calendarStarts))])
	if err != nil {
		panic(err)
	}
	now = now.Add(time.Duration(rng.Int64N(int64(4 * time.Hour))))
	var out []Call
	for range steps {
		switch d := rng.IntN(20); {
		case d == 0:
			now = now.Add(-time.Duration(rng.Int64N(int64(time.Hour))))
		case d < 3:
			now = now.Add(time.Duration(rng.Int64N(int64(72 * time.Hour))))
		case d < 8:
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(3*time.Hour/time.Microsecond))) * time.Microsecond)
		}
		c := Call{At: now}
		for i, r := range rules {
			if i > 0 && rng.IntN(3) == 0 {
				continue
			}
			l := r.main
			if rng.IntN(5) == 0 && changes {
				l = r.other
			}
			c.Checks = append(c.Checks, algorithms.Check{
				Key:       fmt.Sprintf("c%d:{%c}", i, 'a'+rng.IntN(2)),
				Algorithm: algorithms.FixedWindow,
				Limit:     l,
				Cost:      rng.Int64N(l.Rate + 2),
			})
		}
		out = append(out, c)
	}
	return out
}
