// Package algorithms holds redlimit's rate-limiting model: the [Limit] a rule
// enforces, the [Algorithm] that enforces it, the [Result] of one check, and the
// [Backend] contract. Its implementations live in packages of their own:
// redisstore (Lua scripts run by EVALSHA), memstore (the same arithmetic in
// Go) and denycache (a deny cache in front of either).
//
// # Model
//
// A [Check] asks whether Cost units may be taken from the state stored under
// Key, limited by Limit with Algorithm. A Backend evaluates all the checks of
// one request together and all-or-nothing: if any check denies, no check
// consumes anything. This is what makes layered limits (per IP, per user, per
// endpoint) honest: a request denied by the endpoint rule has not been counted
// against the IP or user rule.
//
// Time is kept in integer microseconds. The Redis backend uses the Redis
// server's clock (TIME) unless a Now function is injected, so application
// instances with skewed clocks agree. Time going backwards never creates
// capacity.
//
// Every algorithm keeps its state in one key whose TTL is exactly the time
// until the key is back to full capacity ([Result].ResetAfter): a key that
// expires is indistinguishable from a key at full capacity, so expiry never
// changes a decision and nothing grows without bound.
//
// Both backends compute with the same integer arithmetic (the sliding window
// counter alone uses one float64 weight, computed identically), and the
// conformance vectors in testdata/ are played against both, against miniredis
// and against a real redis-server.
package algorithms
