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
//
// # Entries
//
// When the wrapped Backend denies a check with a RetryAfter d > 0 (not
// [algorithms.Result.Never]) and not Provisional, the cache records for its
// Key: the Algorithm and Limit, the denied cost (0 counting as 1), and the
// denial's Limit, Remaining and reset instant t+ResetAfter, valid from t
// until t+d. t is the local time at which the call to the wrapped Backend
// began, so a slow round trip can only shorten an entry, never lengthen
// it.
//
// A later call is denied locally when any of its checks matches a live
// entry: same Key, same Algorithm and Limit (a changed limit, such as a
// user moving to a higher tier, bypasses the entry), a cost at least the
// denied cost and at most the capacity, at a local time now with
// t <= now < t+d (a clock that went back bypasses the entry).
//
// Each matching check's Result is Allowed false, Limit the capacity,
// Remaining as recorded, RetryAfter t+d-now (> 0) and ResetAfter the larger
// of reset-now and RetryAfter. Every other check of the call is not
// evaluated: its Result is the zero Result (Limit == 0 means "not
// evaluated"; callers writing headers skip it). Nothing is consumed
// anywhere, as when the wrapped Backend denies a call. A call answered
// locally does not look at its context; it is validated with
// [algorithms.ValidateCall], as every backend validates one. Any other call
// goes to the wrapped Backend unchanged, which validates it.
//
// When the wrapped Backend returns an error, Allow returns it and records
// nothing. An allowed check removes its key's entry unless the entry is
// live, under the same Algorithm and Limit, for a larger cost (which that
// check does not contradict).
//
// # Probes
//
// When an entry expires, the first call it would have decided goes to the
// wrapped Backend as the entry's probe, and the calls of that key arriving
// while the probe is under way wait for its answer, or for their context,
// whichever ends first (a context that ends fails the call with a
// *[algorithms.BackendError] whose Backend is "denycache"). If the probe is
// denied, its denial, recorded, decides them locally; if it is allowed, or
// fails, they go on as if there had been no entry, and each is decided by
// the wrapped Backend. Many instances competing for one key's refills thus
// cost about one call each per period while their probes are denied.
//
// # Why a local denial is safe
//
// The denial was final, so the key cannot be allowed that cost before t+d.
// Other instances sharing the store only consume capacity; the only thing
// that gives capacity back is a refund on Redis Cluster or a Ring, which
// undoes a commit of a call spanning slots. A refund of a commit made after
// the denial gives back at most what that commit took since. A refund of a
// commit made before it gives back only within redisstore.RefundWindow of
// that commit, while the key's pending marker exists, and a denial then is
// reported Provisional and never recorded.
//
// Only durations cross from the store to the cache: the store's clock
// measures d, the local clock measures t and now. Their offsets never
// matter. If the store loses a key's state (eviction, FLUSHALL, an
// unreplicated failover), the cache may keep denying that key for at most
// the RetryAfter last reported.
//
// # Reset
//
// [Cache.Reset] resets keys in the wrapped Backend, then forgets this
// cache's entries for them: the next call of each key on this process is
// decided by the wrapped Backend at once. A call to the wrapped Backend
// that began before a Reset records no denial. Other processes' caches in
// front of the same store are not told: each may keep denying a reset key
// locally until the entry it holds expires, at most the RetryAfter the
// store last reported to it for that key, measured from the start of that
// call (the same bound as for a store that lost a key's state, above).
//
// # Memory and concurrency
//
// While the cache holds no entry, a call reads one counter and goes to the
// wrapped Backend: a service whose clients stay within their limits pays
// no lookup. Otherwise keys are spread over up to 64 shards; looking a key
// up takes its shard's read lock only, recording a denial its write lock.
// Expired entries are ignored at once, replaced or removed when the
// wrapped Backend next denies or allows their key, swept from a shard at
// most once a second (when a denial is recorded there, or, once they have
// been expired for a second, by the lookups of any key), and preferred by
// eviction. [Config].MaxKeys bounds the entries; a shard
// full of live entries evicts the entry expiring soonest among 8 it
// samples at random. An evicted denial only costs one more call to the
// wrapped Backend.
//
// Allocations (tests check them): a call whose keys are not cached adds
// none to the wrapped Backend's; a call of up to 4 checks answered locally
// makes none; recording a new denial may allocate.
package denycache
