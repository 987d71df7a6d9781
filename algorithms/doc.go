// Package algorithms is redlimit's model: the [Limit] a rule enforces, the
// [Algorithm] that enforces it, a [Check] and its [Result], the [Backend]
// contract, and the errors. It holds no storage and imports no client: a
// Backend is implemented elsewhere, by memstore (in process), redisstore
// (Redis, by Lua scripts run with EVALSHA), denycache (a cache of denials
// in front of another Backend), or by you.
//
// # Model
//
// A Check asks whether Cost units may be taken from the state stored under
// Key, limited by Limit with Algorithm. A Backend evaluates all the checks of
// one call together and all-or-nothing: if any check denies, no check
// consumes anything. This is what makes layered limits (per IP, per user, per
// endpoint) honest: a request denied by the endpoint rule has not been counted
// against the IP or user rule.
//
// Time is kept in integer microseconds. Time going backwards never creates
// capacity. Every algorithm keeps its state in one key whose TTL is exactly
// the time until the key is back to full capacity ([Result].ResetAfter): a
// key that expires is indistinguishable from a key at full capacity, so
// expiry never changes a decision and nothing grows without bound.
//
// Both built-in stores compute with the same integer arithmetic (the
// sliding window counter alone uses one float64 weight, computed
// identically), and the conformance vectors in testdata/vectors are played
// against memstore, against redisstore on miniredis, on a real
// redis-server and on a Redis Cluster, and through the engine.
//
// A [FixedWindow] Limit with Calendar set is a calendar quota: its windows
// are the calendar days, ISO weeks, months or years of a time zone
// ([PerDayIn], [PerMonthIn]), computed with the zone's rules by the stores
// in Go (month lengths, leap days, days of 23 or 25 hours), and decided on
// the store's clock like any other check. Its Result's ResetAfter, and a
// denial's RetryAfter, run to the next calendar boundary.
//
// # Writing a Backend
//
// A Backend validates each call with [ValidateCall] before it stores
// anything, fills one Result per Check, and reports store failures as a
// *[BackendError]. Wrappers (metrics, tracing, a circuit breaker) forward
// the capability interfaces of what they wrap when they keep its
// behaviour: [DeadlineHonourer] (returns by the context's deadline),
// [InProcess] (never waits for I/O) and [DenialCacher] (answers denied
// keys itself). Callers such as the engine decide from these alone what
// to add around a Backend (a guard goroutine, a timeout, a deny cache),
// so a user's Backend is treated exactly like a built-in one.
package algorithms
