// Package grpclimit limits the rate of gRPC calls on a server: unary and
// stream server interceptors over a redlimit [redlimit.Limiter], keyed per
// rule by the method, the client's address or a metadata value. It is a
// module of its own (github.com/redlimit/redlimit/middleware/grpclimit),
// so that the redlimit module does not require gRPC.
//
// # Mounting
//
// Build an [Interceptor] with [New] and pass its method values to the server:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(limiter.Unary),
//		grpc.ChainStreamInterceptor(limiter.Stream),
//	)
//
// Put it after authentication interceptors when a rule is keyed by what
// they establish, before the ones that do costly work.
//
// # Keys
//
// An [Interceptor] takes one [Func] per rule of its engine, in rule order:
//
//   - [Method]: the full method name, "/pkg.Service/Method";
//   - [Peer]: the client's IP address, trusted-proxy aware exactly as
//     keyfunc.IP is for HTTP, the forwarding header read from the incoming
//     metadata ("x-forwarded-for") only when the TCP peer is a trusted
//     proxy;
//   - [Metadata]: a metadata value, such as an API key;
//   - [Const], [Join] and [Or] to name and combine them, as in keyfunc.
//
// A Func that finds no key reports keyfunc.ErrNoKey and the rule's
// MissingKey applies: skipped, or the call denied. Every rule of one call
// is decided together, in one backend call, all-or-nothing, with the
// engine's timeout, error policy, fallback, deny cache, shadow rules and
// hook. An Interceptor and an HTTP middleware (or the engine's key-first API)
// with the same backend, prefix and rule count in the same buckets.
//
// # Answers
//
//   - Allowed: the handler runs; the rate-limit state of the decided rules
//     is sent as header metadata, as HTTP headers are (Config.Metadata,
//     default x-ratelimit-limit, x-ratelimit-remaining,
//     x-ratelimit-reset).
//   - Denied by a rule: codes.ResourceExhausted, the message naming the
//     rules; the state, with retry-after (whole seconds, rounded up; left
//     out when the call can never pass), is sent as trailer metadata: a
//     refused call is a trailers-only response, one frame. A client reads
//     it with grpc.Trailer.
//   - Denied for a missing key (redlimit.DenyMissingKey):
//     Config.MissingKeyCode, codes.ResourceExhausted by default; set
//     codes.Unauthenticated for rules keyed by a credential. No metadata:
//     no rule was decided.
//   - Not decided under redlimit.FailClosed (the backend failed):
//     codes.Unavailable, no metadata. The backend's error is not sent to
//     the client; the engine logs it and passes it to its hook.
//
// A stream is decided once, when it opens, as one call; the messages on it
// are not counted.
//
// # Concurrency rules
//
// The slots of an engine rule with algorithms.Concurrency are held while
// the handler runs (a stream's while it is open) and released after it
// returns, off the reply's path: the interceptor queues the release as it
// returns, and a worker sends it while gRPC sends the reply. At most 16
// workers run per Interceptor and at most 1024 releases wait; a call that
// finds the queue full, or a closed Interceptor, releases its own slots
// before its interceptor returns. Slots on memstore are released at once.
// A failed release goes to Config.OnReleaseError. Close the Interceptor after
// the server has stopped, to wait for the queued releases.
package grpclimit
