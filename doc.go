// Package engine decides whether requests may proceed, free of any
// transport: the caller gives the key material of each rule (an [Input]),
// the engine asks an [algorithms.Backend] about every rule in one call and
// returns a [Decision]. The HTTP middleware is a thin adapter over it (key
// funcs in, headers and 429 out); gRPC interceptors and workers use it the
// same way.
//
// Around the backend, the engine builds the storage keys
// ("<prefix>:<rule>:<algorithm tag>:{<key material>}", the material
// sanitised so that it cannot pick a Redis Cluster slot), applies tiers,
// cost and limits per key ([Rule]), bounds each call by [Config].Timeout,
// applies the error policy ([FailOpen], [FailClosed], [Fallback] to an
// in-process backend until a probe finds the primary again), puts a local
// deny cache in front of a remote backend, reports shadow rules without
// denying, answers hot keys from quota blocks ([Rule].Blocks), and calls
// [Config].OnDecision. Each rule keeps up to 16,384 of its storage keys,
// so that a client seen again costs no allocation, in a table a check
// reads without a lock: at most 5,963,776 bytes a rule with the default
// prefix and a 64-byte rule name, about 1 MB for IPv4 addresses, whatever
// the number of clients, and as much for the keys of Peek (see
// docs/performance.md, "Storage keys as clients grow").
//
// # The key-first API
//
// Code that is not an HTTP handler keys every rule by one string:
//
//	d := e.Allow(ctx, "tenant:acme") // decide and consume
//	err := e.Wait(ctx, "api.partner.example")
//
// [Limiter.Allow], [Limiter.Wait], [Limiter.Peek] and [Limiter.Reset] (and
// the N forms) run the same path as [Limiter.Decide], which takes one
// [Input] per rule, keyed by rule name, for requests whose rules have
// different key material. An allowed Decision of a concurrency rule holds
// slots, and a Refundable rule's charge may be given back in part, until
// [Limiter.Settle].
//
// # Quota blocks
//
// A Rule with Blocks set ("quota leasing"; not the leases of concurrency
// slots) lets an Limiter take a hot key's units k at a time, in one atomic
// call that charges them in the store as k requests would, and answer up
// to k checks of the key from memory, without a call and without
// allocating ([RuleDecision].FromBlock). k follows the key's local arrival
// rate times [BlockConfig].Hold, capped by a share of what the key has
// left, so the last units of a window go request by request; the next
// block is taken in the background before the current one runs out. What
// a block has not used goes back at most once ([algorithms.Refunder]) when
// its time is up, when demand stops, and on [Limiter.Close]; a request that
// another rule denies puts its unit back. The sum admitted by every
// instance never exceeds the limit: fixed window (calendar quotas
// included) and sliding window rules only. See docs/leasing.md for the
// exactness argument, the headers, Reset and crashes.
//
// # Backends as they describe themselves
//
// The built-in stores tell the engine what they need: memstore (in
// process) gets no timeout and no deny cache, a denycache.Cache no second
// deny cache, and a redisstore whose client honours deadlines is called
// directly with the timeout's context; any other backend, a user's
// included, is called from a goroutine that Decide stops waiting for at
// the timeout, behind a deny cache: the safe treatment. A wrapper that
// embeds a built-in store keeps its treatment.
//
// The guides docs/outside-http.md, docs/failure-policies.md and
// docs/backend.md show each in use.
package redlimit
