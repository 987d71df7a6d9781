// Package algorithms is redlimit's model: the [Limit] a rule enforces, the
// [Algorithm] that enforces it, a [Check] and its [Result], the [Backend]
// contract, and the errors. It holds no storage and imports no client: a
// Backend is implemented elsewhere, by memstore (in process), redisstore
// (Redis, by Lua scripts run with EVALSHA), denycache (a cache of denials
// in front of another Backend), or by you.
//
// A Check asks whether Cost units may be taken from the state stored under
// Key, limited by Limit with Algorithm:
//
//	check := algorithms.Check{Key: "rate:login:{203.0.113.7}", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(5)}
//
// A Backend evaluates all the checks of one call together and
// all-or-nothing: if any check denies, no check consumes anything. This is
// what makes layered limits (per IP, per user, per endpoint) honest: a
// request denied by the endpoint rule has not been counted against the IP
// or user rule. See [Backend] for time, expiry and how to write one.
//
// A [FixedWindow] Limit with Calendar set is a calendar quota: its windows
// are the calendar days, ISO weeks, months or years of a time zone
// ([PerDayIn], [PerMonthIn]), decided on the store's clock like any other
// check. Choosing among the algorithms: docs/algorithms.md.
package algorithms
