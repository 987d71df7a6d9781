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
// denying, and calls [Config].OnDecision.
//
// # The key-first API
//
// Code that is not an HTTP handler keys every rule by one string:
//
//	d := e.Allow(ctx, "tenant:acme") // decide and consume
//	err := e.Wait(ctx, "api.partner.example")
//
// [Engine.Allow], [Engine.Wait], [Engine.Peek] and [Engine.Reset] (and
// their N and Inputs forms) run the same path as [Engine.Decide]. An
// allowed Decision of a concurrency rule holds slots until
// [Decision.Release]; a Refundable rule's charge is settled by
// [Engine.Refund] or [Engine.Settle].
//
// # Backends as they describe themselves
//
// The engine treats every backend by the capability interfaces it
// implements, never by its type: [algorithms.InProcess] gets no timeout
// and no deny cache, [algorithms.DenialCacher] no second deny cache, and
// [algorithms.DeadlineHonourer] is called directly with the timeout's
// context; any other backend is called from a goroutine that Decide stops
// waiting for at the timeout. A wrapper should forward these methods.
//
// The guides docs/outside-http.md, docs/failure-policies.md and
// docs/backend.md show each in use.
package engine
