package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// Calendar quotas (a FixedWindow Limit with Calendar set) are decided on
// the server's clock like every other check, but Lua knows no time zones:
// the store computes the boundaries of the calendar window around its own
// clock, and of the next window, and sends them with the check (see
// lua/calendar.lua). When the server's now lies outside them (the clocks
// disagree at a boundary), the script decides nothing and replies its now;
// the store computes the boundaries around that now and decides again
// with it: one more round trip, only then. A calendar call is never
// batched in a pipeline.

// calendarOne is the one-check script of a calendar quota.
var calendarOne = redis.NewScript(luaScript("one_calendar"))

func init() { sources[calendarOne] = luaScript("one_calendar") }

// oneScript returns the one-check script of the calc algorithm alg.
func oneScript(alg uint8) *redis.Script {
	if alg == calc.Calendar {
		return calendarOne
	}
	return oneScripts[alg]
}

// prepareCalendars replaces the Params of the calendar checks of checks
// with their windows around now (µs), or around the process's clock when
// now is 0 (the server's clock decides).
func (b *Store) prepareCalendars(checks []algorithms.Check, ps []calc.Params, now int64) {
	for i := range checks {
		if l := &checks[i].Limit; l.Calendar != 0 {
			if now == 0 {
				clock := b.calendarNow
				if clock == nil {
					clock = time.Now
				}
				now = clock().UnixMicro()
			}
			ps[i] = calc.PrepareCalendar(uint8(l.Calendar), l.Location, l.Rate, checks[i].Cost, now)
		}
	}
}

// skewed reports whether vals, a decide call's reply, says that the
// server's now was outside the calendar windows sent, and if so prepares
// the calendar checks again around that now, which it returns.
func (b *Store) skewed(vals []int64, checks []algorithms.Check, ps []calc.Params) (int64, bool) {
	if len(vals) != 4*len(ps)+1 || vals[0] != 3 {
		return 0, false
	}
	now := vals[len(vals)-1]
	b.prepareCalendars(checks, ps, now)
	return now, true
}
