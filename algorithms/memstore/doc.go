// Package memstore is redlimit's in-process backend: a [Store] keeps every
// key's state in memory and decides with the same arithmetic as the Redis
// scripts, field for field, so that it answers exactly as
// redisstore.Store does (the conformance vectors and a differential test
// check it). It serves single-instance services, tests, and a fallback
// while Redis is unreachable.
//
// # Concurrency
//
// Keys are spread over 64 shards, each with its own mutex; a call locks the
// shards of its keys in a fixed order, so the checks of one call are
// decided in one critical section, all-or-nothing. A call never waits for
// I/O ([Store.InProcess]).
//
// # Time and expiry
//
// The clock is [Config].Now (time.Now by default), in microseconds. As with
// Redis TTLs, a key expires when it is back to full capacity, by the
// store's own time, which never goes back: a key that expired stays
// expired even if the clock steps back.
//
// A calendar quota's windows ([algorithms.PerDayIn]) are computed around
// the same clock, in the quota's time zone.
//
// # Memory
//
// [Config].MaxKeys bounds the keys held. A full Store holds at most 128
// bytes per key besides the key's own bytes (a test checks this bound); a
// sliding log key also holds its log, one entry per unit up to its
// capacity. Memory, once taken, is kept for reuse rather than returned.
//
// Expired keys are swept a few at a time as new keys arrive (a pass over
// every key at most once a second). At the cap, a new key takes the place
// of an expired key if it finds one among a few sampled at random, else of
// the live key among them that would return to full capacity soonest: an
// evicted key starts again at full capacity. A call never evicts its own
// keys (so MaxKeys may be exceeded by the keys of one call). Admitting a
// new key examines a bounded number of keys, however many are held.
//
// A check on an existing key does not allocate.
package memstore
