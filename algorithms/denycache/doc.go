// Package denycache remembers denials in process: a [Cache] in front of an
// [algorithms.Backend] answers further calls of a denied key itself, until
// the denial's RetryAfter has passed, without asking the Backend it wraps.
// A client far over its limit then costs about one call to that Backend
// (one EVALSHA for a redisstore.Store) per RetryAfter period and
// application instance, instead of one per request (a test against a real
// redis-server checks this).
//
// A Cache is not a rate limiter of its own: it never allows anything and
// never caches allowances; the wrapped Backend decides everything else.
// The engine puts one in front of a remote backend by default. How entries
// match, expire and are probed, and why a local denial is safe, is on
// [Cache]; the guide is docs/deny-cache.md.
package denycache
