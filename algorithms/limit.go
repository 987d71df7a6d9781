package algorithms

import (
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// Limit is how much traffic a rule allows: Rate units per Period, with bursts
// of up to Burst units for the algorithms that have a bucket.
//
// For [FixedWindow], [SlidingLog] and [SlidingWindow] the capacity is Rate
// per Period and Burst must be zero. [SlidingLog] keeps one sorted-set
// member per unit and a check of cost n writes n members in one script,
// during which Redis serves no one else; its Rate is therefore at most
// 2000 (a full key then takes under 1 MB of Redis memory, which a test
// checks). For [TokenBucket] and [GCRA] the
// capacity (the largest burst) is Burst, or Rate when Burst is zero, and
// capacity refills continuously at Rate per Period. For [Concurrency], Rate
// is the slots a key may hold in flight (at most 10000), Period the lease
// of each slot, and Burst must be zero (see [InFlight]).
//
// A calendar quota ([PerDayIn], [PerWeekIn], [PerMonthIn], [PerYearIn])
// is a FixedWindow Limit whose windows are calendar periods in a time
// zone: Calendar and Location set, Period zero.
//
// Limit is a value type; its zero value is invalid. Build one with
// [PerSecond], [PerMinute], [PerHour] or a literal, and check it with
// [Limit.Validate].
type Limit struct {
	Rate   int64         // units per Period; must be > 0
	Period time.Duration // a whole number of microseconds, >= 1µs
	Burst  int64         // bucket size for TokenBucket and GCRA; 0 means Rate

	// Calendar, when set, makes the limit a calendar quota: Rate units per
	// calendar day, week, month or year in Location (nil means UTC), for
	// FixedWindow only, with Period 0. See [CalendarUnit] and [PerDayIn].
	Calendar CalendarUnit
	Location *time.Location
}

// PerSecond returns a Limit of rate units per second.
func PerSecond(rate int64) Limit { return Limit{Rate: rate, Period: time.Second} }

// PerMinute returns a Limit of rate units per minute.
func PerMinute(rate int64) Limit { return Limit{Rate: rate, Period: time.Minute} }

// PerHour returns a Limit of rate units per hour.
func PerHour(rate int64) Limit { return Limit{Rate: rate, Period: time.Hour} }

// WithBurst returns a copy of l with Burst set to burst.
func (l Limit) WithBurst(burst int64) Limit { l.Burst = burst; return l }

// Capacity returns the most units a key can hold under a: Burst (or Rate
// when Burst is 0) for TokenBucket and GCRA, Rate otherwise. It is the value
// reported as [Result].Limit.
func (l Limit) Capacity(a Algorithm) int64 {
	if (a == TokenBucket || a == GCRA) && l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// String formats l as "100/1m0s" or "100/1s burst 20", and a calendar
// quota as "10000/day Europe/Berlin".
func (l Limit) String() string {
	if l.Calendar != 0 {
		return l.calendarString()
	}
	s := strconv.FormatInt(l.Rate, 10) + "/" + l.Period.String()
	if l.Burst != 0 {
		s += " burst " + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

// Bounds that keep every computation exact in integer microseconds, in Go and
// in Redis Lua (whose numbers are float64: integers are exact below 2^53).
const (
	maxExact       = 1 << 52
	maxPeriod      = 366 * 24 * time.Hour
	maxSlidingLog  = 2_000
	maxConcurrency = 10_000
	maxCostOrLimit = 1 << 40
)

// Validate reports whether l can be enforced by a. The error is a
// *[ConfigError] naming the field, for example
// "redlimit: Limit.Rate must be > 0, got 0".
func (l Limit) Validate(a Algorithm) error {
	if !a.Valid() {
		return &ConfigError{Field: "Algorithm", Reason: "must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got " + a.String()}
	}
	if l.Calendar != 0 || l.Location != nil {
		return l.validateCalendar(a)
	}
	switch {
	case l.Rate <= 0:
		return fieldErr("Limit.Rate", "must be > 0, got ", l.Rate)
	case l.Rate > maxCostOrLimit:
		return fieldErr("Limit.Rate", "must be <= 2^40, got ", l.Rate)
	case l.Period < time.Microsecond:
		return &ConfigError{Field: "Limit.Period", Reason: "must be >= 1µs, got " + l.Period.String()}
	case l.Period%time.Microsecond != 0:
		return &ConfigError{Field: "Limit.Period", Reason: "must be a whole number of microseconds, got " + l.Period.String()}
	case l.Period > maxPeriod:
		return &ConfigError{Field: "Limit.Period", Reason: "must be <= 366 days, got " + l.Period.String()}
	case l.Burst < 0:
		return fieldErr("Limit.Burst", "must be >= 0, got ", l.Burst)
	case l.Burst > maxCostOrLimit:
		return fieldErr("Limit.Burst", "must be <= 2^40, got ", l.Burst)
	}
	switch a {
	case FixedWindow, SlidingWindow:
		if l.Burst != 0 {
			return fieldErr("Limit.Burst", "is not used by "+a.String()+" and must be 0, got ", l.Burst)
		}
	case Concurrency:
		if l.Burst != 0 {
			return fieldErr("Limit.Burst", "is not used by "+a.String()+" and must be 0, got ", l.Burst)
		}
		if l.Rate > maxConcurrency {
			return fieldErr("Limit.Rate", "must be <= 10000 for concurrency (slots in flight, one sorted-set member each), got ", l.Rate)
		}
	case SlidingLog:
		if l.Burst != 0 {
			return fieldErr("Limit.Burst", "is not used by "+a.String()+" and must be 0, got ", l.Burst)
		}
		if l.Rate > maxSlidingLog {
			return fieldErr("Limit.Rate", "must be <= 2000 for sliding_log (one sorted-set member per unit, all written by one script: use sliding_window, token_bucket or gcra for larger rates), got ", l.Rate)
		}
	case TokenBucket, GCRA:
		capacity := l.Capacity(a)
		if _, u := calc.Scale(l.Rate, int64(l.Period/time.Microsecond)); u > maxExact/capacity {
			return fieldErr("Limit.Burst", "× Period/Rate is too large to compute exactly (capacity × µs per unit must be < 2^52); lower Burst or raise Rate, got burst ", capacity)
		}
	}
	return nil
}

func fieldErr(field, reason string, v int64) error {
	return &ConfigError{Field: field, Reason: reason + strconv.FormatInt(v, 10)}
}
