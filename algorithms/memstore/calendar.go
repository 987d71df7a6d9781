package memstore

import (
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// prepareCalendars replaces the Params of the calendar quotas of checks
// (FixedWindow Limits with Calendar set) with their calendar windows
// around now (µs), the store's clock: the same arithmetic as the Redis
// backend's, on the boundaries it computes the same way.
func prepareCalendars(checks []algorithms.Check, ps []calc.Params, now int64) {
	for i := range checks {
		if l := &checks[i].Limit; l.Calendar != 0 {
			ps[i] = calc.PrepareCalendar(uint8(l.Calendar), l.Location, l.Rate, checks[i].Cost, now)
		}
	}
}
