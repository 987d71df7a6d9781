// Package redisstore is redlimit's Redis backend: a [Store] decides the
// checks of a call with Lua scripts run by EVALSHA, on a single node, a
// Sentinel (failover) client, a Redis Cluster or a Ring.
//
// One check runs the script of its algorithm alone ([lua.Single]), several
// run [lua.Multi]; calls that queue are decided by batch scripts (see
// Pipelining). go-redis's Script.Run falls back to EVAL when the
// server answers NOSCRIPT, which loads the script again, so SCRIPT FLUSH,
// a restart or a failover to a replica with an empty script cache is
// invisible to callers.
//
// # Single node, Sentinel
//
// With a *redis.Client (a failover client from redis.NewFailoverClient is
// one) every call is one EVALSHA, and all-or-nothing is atomic: the script
// evaluates every check, then commits all of them only if all pass.
//
// # Stored state
//
// Each algorithm's key layout is documented at the top of its Lua file
// (see package lua). The fixed window has two: on the server's clock, for
// a period of whole milliseconds, a string counter whose TTL ends with its
// window (a check of an existing key is INCRBY and PTTL, and reads no
// clock), and with [Config].Now, or another period, a hash {s, e, c} that
// is exact to the µs. Each reads the other, and the hashes of earlier
// versions, and a write turns a key into its clock's layout with its count
// kept: a redeploy needs no migration.
//
// # Pipelining
//
// On a *redis.Client, a *redis.ClusterClient and each shard of a
// *redis.Ring, concurrent calls share round trips. A call that finds fewer
// than [Config].Pipelines round trips in flight ([DefaultPipelines] by
// default) sends its EVALSHA at once, from its own goroutine, exactly as
// without pipelining: a lone caller pays nothing. Calls that find them all
// in flight queue, and the first round trip to come back sends the whole
// queue (up to 256 calls) as one pipeline; on a cluster, go-redis splits
// it by node and writes to the nodes concurrently. Other clients (a type
// that embeds a client, an AutoPipeliner, a Pipeliner) are not pipelined.
//
// Queued calls are also batched: in the pipeline, the decide calls of one
// server (on a cluster, of one hash slot) go as one EVALSHA of a batch
// script ([lua.Batch] when all their checks are of one algorithm,
// [lua.BatchAll] otherwise), up to 64 calls each, which decides them in
// queue order, each exactly as its own script would at that point:
// atomically and all-or-nothing, writing only when all its checks pass,
// with the same Results, state, TTLs and marker keys. A denied call
// charges nothing and does not stop the calls after it. The server pays a
// script's fixed cost once per batch, and a run of GCRA calls on one key
// reads and writes that key once. Calls of the same limit send its numbers
// once. The one-check calls at the head of a batch are decided by a flat
// loop before the rest of the script is defined: GCRA's (in any batch)
// defines no function and parses a limit's numbers once; that of the
// fixed window, the sliding window and the token bucket (in a batch of
// the algorithm's own) defines only the algorithm's fast path. So two
// calls whose checks are all of one of these four algorithms already go
// as one batch; other batches from four calls (a smaller group goes as
// its calls' own scripts, in the same round trip). Refunds are not
// batched. A call whose
// check raises an error in the batch (a key of another type) is reported
// by the script and runs its own script alone, which replies its error: it
// fails alone, classified as before. A queued call returns by its
// context's deadline, and is dropped unsent if that deadline passed before
// the pipeline is written; after a SCRIPT FLUSH the batch is sent again as
// EVAL.
//
// # Client options and deadlines
//
// A queued call returns by its context's deadline whatever the client's
// options, and is dropped, unsent, if its deadline passes before its
// pipeline is written. A call that sends its own EVALSHA returns by its
// deadline only when the client honours deadlines (go-redis's
// ContextTimeoutEnabled option; see [Store.HonoursDeadline]). Set
// ContextTimeoutEnabled, short read and write timeouts, and MaxRetries -1:
// a decide script that go-redis sends again after a lost reply charges
// its keys twice.
//
// # Redis Cluster
//
// A script may only touch keys of one hash slot ([HashSlot]). With a
// *redis.ClusterClient, or a type that embeds one, the checks of a call are
// grouped by slot. Keys look like "<prefix>:<rule>:<algorithm>:{<key
// material>}", so the rules of one key material share a slot and rules of
// different materials (IP, user, ...) usually do not.
//
// A call whose keys share one slot is one EVALSHA, atomic as on a single
// node. A call spanning slots sends one EVALSHA per slot, concurrently,
// each deciding its own slot all-or-nothing. If every slot allows, the call
// is allowed. If some slot denies, the slots that committed are
// compensated by a second, concurrent round of EVALSHAs in refund mode,
// which give back exactly what each commit took, then report each check's
// state, so the Results read as on a single node.
//
// What is atomic: everything within one slot. What is compensated: the
// units that the other slots of a denied call committed. Between a commit
// and its refund the units are visible to concurrent calls, and a refund
// is not always an undo (a bucket that would have filled meanwhile gets
// back units it would have lost to the cap). If a slot fails, Allow
// returns the error and the slots that committed are refunded in the
// background; the failed slot is left alone.
//
// A refund gives back at most once and only within [RefundWindow] of its
// commit: each committing slot sets a commit marker that its refund
// deletes, and a pending marker per key it charged, so that a denial that
// a refund may still undo is reported [algorithms.Result].Provisional.
// Marker keys end in ":pending" and ":commit:<id>"; a storage key must not
// end that way. A refund that fails is reported to [Config].OnRefundError.
// The markers, what a refund gives back for each algorithm, and the memory
// the markers take are described in [the Redis Cluster protocol].
//
// After a failed script the Store asks the cluster client to reload its
// slot map (ReloadState): a crashed master sends no MOVED, and go-redis
// would otherwise route its slots to the dead address until its next
// periodic reload.
//
// # Ring
//
// With a *redis.Ring, or a type that embeds one, the checks are grouped by
// the shard that owns each key (one script on a Ring runs on its first
// key's shard), with the same protocol as on a cluster.
//
// # Calendar quotas
//
// A calendar quota ([algorithms.Limit].Calendar) is decided on the
// server's clock like every other check, but Lua knows no time zones: the
// Store computes, in Go, the calendar window around its own clock and the
// next one, and sends their boundaries with the check. The script decides
// with the window that holds the server's now. When the server's now lies
// outside both (the clocks disagree across a boundary by more than a
// window), the script decides nothing and replies its now; the Store then
// computes the windows around that now and decides again, with that now:
// one more round trip, in that case only. A calendar check runs a script
// of its own (one check) or the dispatch (several), and is never batched
// in a pipeline.
//
// # Concurrency leases
//
// A [algorithms.Concurrency] key is a sorted set: one member per slot
// held, "<lease id>:<n>", scored with the instant (server clock, µs) its
// lease expires; its TTL is until the last lease expires. Every script
// that touches it first removes the expired members, so it holds at most
// Limit.Rate members plus those that expired since. Its checks decide
// and layer like any other's (one call, all-or-nothing; on a cluster a
// committed slot is refunded by removing its members). [Store.Release]
// and [Store.Renew] run small scripts of their own (lua/release.lua,
// lua/renew.lua): one for all leases on a single node, one per lease on
// a cluster or a Ring, each atomic in its key's slot.
//
// # Late refunds
//
// A refundable check ([algorithms.Check].RefundWindow > 0, the checks of
// a rule that charges after the response) is decided with the same
// markers on every client, a single server included: the call (each slot
// of it on a cluster) sets its commit marker and its keys' pending
// markers for the RefundWindow, and its allowed Results carry a
// [algorithms.Receipt]. [Store.Refund] is then one EVALSHA of
// lua/refund.lua per commit marker, seconds later: it gives back only if
// it deletes the marker (at most once, within the window), exactly where
// the commit took the units, at the current time (see
// [algorithms.Refunder]). Until the marker expires, a denial of the key
// is Provisional. Redis holds, per refundable call committed within the
// window, one commit marker per slot, and one pending marker per key.
//
// # Errors
//
// A failed script is reported as a *[algorithms.BackendError] with Backend
// "redis". When the error concerns the state stored under the script's
// keys (a WRONGTYPE reply, a Lua runtime error) rather than the server, it
// also names those keys and matches [algorithms.ErrKeyState].
//
// [the Redis Cluster protocol]: https://github.com/redlimit/redlimit/blob/main/docs/redis-cluster.md
package redisstore
