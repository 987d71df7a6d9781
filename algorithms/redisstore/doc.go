// Package redisstore is redlimit's Redis backend: a [Store] decides the
// checks of a call with Lua scripts run by EVALSHA, on a single node, a
// Sentinel (failover) client, a Redis Cluster or a Ring.
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(client, redisstore.Config{})
//
// Every check runs on the Redis server's clock (TIME), reads and writes its
// key inside one script, and gives the key a TTL equal to the time until it
// is back to full capacity. The scripts are in package [lua]; go-redis
// falls back to EVAL on NOSCRIPT, so SCRIPT FLUSH, a restart or a failover
// to a replica with an empty script cache is invisible to callers.
//
// # Single node, Sentinel
//
// With a *redis.Client (a failover client is one) every call is one
// EVALSHA, and all-or-nothing is atomic. A fixed window or GCRA check on
// the server's clock goes as its algorithm's lean script (lean_gcra,
// lean_fixed_window: [lua.Script]), sent with only the numbers its common
// case reads (every argument costs Redis on every call); a lean script that finds a state it leaves to the
// one-check script (a layout of an earlier version, a value written under
// another limit) writes nothing, and the call goes on as the one-check
// script: two EVALSHAs, once per such key.
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
// Concurrent calls share round trips: a call that finds fewer than
// [Config].Pipelines round trips in flight sends its script at once (a lone
// caller pays nothing); the others queue and go as one pipeline, in which
// the calls of one server (on a cluster, of one hash slot) are decided by
// one batch script, each exactly as its own script would. The store
// pipelines on a *redis.Client, a *redis.ClusterClient, and a
// rueidisclient.Client (a module of its own, which adapts rueidis through
// an internal seam): on rueidis, the calls sent at once go as the
// library's own command, without go-redis's command types. A client of
// another library plugs in as a [redis.Scripter] and is not pipelined.
//
// The queue is bounded: at most 4096 calls wait (per Ring shard on a
// Ring), and a call that finds that many fails at once with a
// *[algorithms.BackendError], for the engine's error policy. A queued
// call whose context ends leaves the queue: it is neither sent nor waited
// for. A pipeline goes with none of its callers' context values, and with
// the earliest deadline among the callers still waiting.
//
// # Client options and deadlines
//
// Any client works with any options: the store sends each of its scripts
// (decisions, refunds, cancels, blocks, lease releases and renewals) at
// most once, whatever MaxRetries, or a cluster's MaxRedirects, says. A
// script that go-redis sent again after its reply was lost would run
// twice, charging its keys twice for one success; so each goes as a
// command whose NoRetry is true, which go-redis honours alone, in
// pipelines and on every node of a cluster or a Ring (a cluster still
// follows MOVED and ASK: the script did not run). A script that fails is
// an error for the caller; only one the server did not run (NOSCRIPT) is
// sent again, as EVAL. The client's other commands (DEL of [Store.Reset])
// keep its retries. A [redis.Scripter] of another type (a type of your
// own, one that embeds a client included) is called through its EvalSha
// and Eval, whose retries are its own: give its client MaxRetries -1. A
// rueidisclient.Client sends the commands of its own library (rueidis
// sends a script once).
//
// Set ContextTimeoutEnabled, so that a call returns by its context's
// deadline and the limiter calls the store directly (a rueidisclient
// Client always does). Without it, a call that sends its own script waits for its
// reply up to the client's ReadTimeout, and the engine bounds it with a
// goroutine of its own. A queued call returns by its deadline whatever the
// options. docs/redis.md says what each costs.
//
// # Redis Cluster
//
// A script may only touch keys of one hash slot (CLUSTER KEYSLOT: CRC16
// of the key, or of its hash tag, modulo 16384). The checks of
// a call are grouped by slot (on a Ring, by shard); each slot decides its
// own checks atomically, and when one slot denies, the slots that
// committed are refunded, at most once and within [RefundWindow]. A denial
// a refund may still undo is [algorithms.Result].Provisional. When a slot
// fails, or every slot allowed after the caller's context ended (the
// caller has given up: Allow returns the context's error), the call's
// refunds and cancels go on in the background, at most
// 256 at once per Store; one more is not started and goes to
// [Config].OnRefundError, its units charged until its keys' state expires.
//
// # Errors
//
// A failed script is a *[algorithms.BackendError] with Backend "redis";
// one about the state under its keys (WRONGTYPE, a Lua runtime error)
// also names the keys and matches [algorithms.ErrKeyState].
//
// The guides docs/redis.md and docs/redis-cluster.md describe pipelining,
// batches, the cluster protocol, calendar quotas, concurrency leases and
// late refunds in full.
package redisstore
