// Package engine decides whether requests may proceed, free of any
// transport: the caller gives the key material of each rule (an [Input]),
// the engine asks an [algorithms.Backend] about every rule in one call and
// returns a [Decision]. The HTTP middleware is a thin adapter over it (key
// funcs in, headers and 429 out); other entry points (a key-first API, RPC
// interceptors) use it the same way.
//
// # What the engine adds to a backend
//
//   - Storage keys: "<prefix>:<rule>:<algorithm tag>:{<key material>}",
//     the material sanitised (printable ASCII, no braces, at most 128
//     bytes) so that untrusted input cannot pick a Redis Cluster slot.
//   - Tiers and cost per request; limits per key from a function
//     (Rule.LimitFunc), validated when returned.
//   - Exempt inputs (Input.Exempt): an allowlisted request skips a rule.
//   - A timeout per backend call (Config.Timeout), held even when the
//     backend ignores its context.
//   - An error policy (Config.OnError): fail open, fail closed, or fall
//     back to an in-process backend until a background probe finds the
//     primary healthy again.
//   - A local deny cache in front of a remote backend.
//   - Shadow rules, which report without denying.
//   - Quota blocks for hot keys (Rule.Blocks): most checks answered from
//     units already charged in the store, exactly.
//   - A decision hook (Config.OnDecision) and log/slog logging, with backend
//     errors logged at most once a second.
//
// # The key-first API
//
// Code that is not an HTTP handler (a worker, a queue consumer, an
// outbound client) keys every rule of an Engine by one key material:
//
//   - [Engine.Allow] and [Engine.AllowN] decide and consume (DecideKey
//     reuses a Decision);
//   - [Engine.Wait] and [Engine.WaitN] block until allowed, sleeping by
//     the exact RetryAfter, and fail at once when the cost can never fit
//     or the wait would outlast the context's deadline;
//   - [Engine.Peek] reports the state without consuming anything;
//   - [Engine.Reset] forgets the keys ("unblock this customer");
//   - for concurrency rules ([algorithms.Concurrency]), an allowed
//     Decision holds slots: [Decision.Release] frees them,
//     [Decision.KeepAlive] renews their leases while work runs, and
//     [Engine.Acquire] waits for a slot (Wait refuses such rules: it
//     returns no Decision to release).
//
// Each is Decide (or its peek or reset) with one Input per rule holding
// the material: the same storage keys, timeout, error policy, fallback,
// deny cache, shadow rules and hook. An HTTP middleware with the same
// backend, prefix and rule (name and algorithm) counts in the same
// buckets; middleware.Middleware.Engine returns its engine. Several
// materials per request (per IP and per user) go through Decide,
// [Engine.WaitInputs], [Engine.PeekInputs] and [Engine.ResetInputs].
//
// # Refunds
//
// A Rule that is Refundable reserves its cost when it is decided, and
// [Engine.Refund] (n units of each refundable rule) or [Engine.Settle]
// (the actual cost of each rule) gives back, later, what the work did not
// use: at most once, within Config.RefundWindow, on the backend that
// decided, an [algorithms.Refunder].
//
// # Quota blocks
//
// A Rule with Blocks set ("quota leasing"; not the leases of concurrency
// slots) lets an Engine take a hot key's units k at a time, in one atomic
// call that charges them in the store as k requests would, and answer up
// to k checks of the key from memory, without a call and without
// allocating ([RuleDecision].FromBlock). k follows the key's local arrival
// rate times [BlockConfig].Hold, capped by a share of what the key has
// left, so the last units of a window go request by request; the next
// block is taken in the background before the current one runs out. What
// a block has not used goes back at most once ([algorithms.Refunder]) when
// its time is up, when demand stops, and on [Engine.Close]; a request that
// another rule denies puts its unit back. The sum admitted by every
// instance never exceeds the limit: fixed window (calendar quotas
// included) and sliding window rules only. See docs/leasing.md for the
// exactness argument, the headers, Reset and crashes.
//
// # Backends as they describe themselves
//
// The engine treats every backend, the module's or the user's, by the
// capability interfaces it implements, never by its type: a backend that
// reports [algorithms.InProcess] gets no timeout and no deny cache; one
// that reports [algorithms.DenialCacher] gets no second deny cache; one
// that reports [algorithms.DeadlineHonourer] is called directly with the
// timeout's context, and is waited for; any other is called from a
// goroutine that Decide stops waiting for at the timeout. Reset needs a
// backend that is an [algorithms.Resetter]. A wrapper around a backend
// should forward these methods.
package engine
