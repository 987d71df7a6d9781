// Package keyfunc turns an HTTP request into rate-limit key material: the
// part of a key that tells one client, route or tenant from another.
//
// # Key funcs
//
// A [Func] looks at a request and returns a string. The package offers one
// per place a key can come from, and two ways to combine them:
//
//   - [IP]: the client's address, trusted-proxy aware, IPv6 grouped by /64;
//   - [Header]: a header's value, such as an API key;
//   - [User] and [ContextValue]: an identity an authentication middleware
//     put in the request's context;
//   - [Route] and [Method]: the matched route pattern ("GET /users/{id}",
//     "/static/"), never the method the client sent; the method, bounded to
//     the standard ones (any other is one bucket);
//   - [Const]: one bucket for everyone, a global limit;
//   - [Join]: several parts, all required ("GET /login:203.0.113.7");
//   - [Or]: the first part that is present (the user, else the IP).
//
// The middleware calls a rule's Func on every request, passes the result
// through [Sanitize] and checks the limit stored under
// `<prefix>:<rule>:<algorithm tag>:{<material>}`.
//
// # Missing keys
//
// A Func that finds no key, such as [User] on an anonymous request or
// [Header] when the header is absent, returns an error wrapping [ErrNoKey]; it
// never returns an empty key, which would silently put all those requests in
// one shared bucket. What happens next is the rule's choice in the
// middleware: skip the rule, deny the request, or avoid the question with a
// fallback, Or(User(...), ipFunc). Errors name the Func and the reason:
//
//	redlimit: keyfunc Header("X-API-Key"): header absent
//
// # Configuration errors
//
// A key func that could never find a key is refused when it is built, not
// on every request, where the middleware's error policy might let requests
// through unlimited. [IP] and [ParseTrustedProxies] return an
// [*algorithms.ConfigError] naming the field, such as
//
//	redlimit: IPConfig.IPv6Prefix must be in 1..128, got 200
//
// The constructors that return a bare Func, so that they compose as in
// Or(Header("X-API-Key"), ip), take arguments written in code; like
// [regexp.MustCompile] and [context.WithValue], they panic on an argument
// that cannot work: [Header] with an empty or invalid name, [User] with a
// nil function, [ContextValue] with a nil or non-comparable key, [Join] and
// [Or] with no Func or a nil one. The panic value is an
// [*algorithms.ConfigError] naming the constructor and the argument:
//
//	redlimit: keyfunc.Header name must not be empty
//
// Every configuration error matches [algorithms.ErrInvalidConfig], the
// module's one category for them. The one such mistake only a request can
// reveal, a context value of a type [ContextValue] cannot use, is reported
// on that request as an [*Error] of that category.
//
// # Client addresses and proxies
//
// Behind a load balancer, a request's TCP peer (RemoteAddr) is the balancer,
// and the client's address travels in a header the balancer adds:
// X-Forwarded-For, Forwarded or X-Real-IP. Those headers are also what any
// client can write, so [IP] believes them only as far as the chain of proxies
// you declare in [IPConfig].TrustedProxies:
//
//   - With no trusted proxy, the key is RemoteAddr and headers are ignored.
//     This is right for a service that faces the Internet directly.
//   - A header is read only when the peer is a trusted proxy, and list
//     headers are walked from the right, the end the proxies append to: each
//     trusted address is skipped and the first untrusted one is the client.
//     The leftmost entries are whatever the client sent and are never
//     believed just for being first.
//   - An entry that is not an address stops the walk at the last trusted hop.
//
// So configure TrustedProxies to exactly your load balancers and reverse
// proxies (their published ranges for a CDN), no wider: a trusted range that
// also holds clients lets those clients choose their key. To check a setup,
// send a request from a known address and look at the key.
//
// # IPv6
//
// An IPv6 client is usually given a whole /64 and can pick any address in
// it, so by default [IP] keys IPv6 clients by their /64 ("2001:db8:1:2::/64")
// and IPv4 clients by their address ("203.0.113.7"). [IPConfig] sets both
// prefix lengths. IPv4-mapped IPv6 addresses count as IPv4, and zones are
// dropped.
//
// # Key hygiene
//
// Key material is untrusted input. [Sanitize] bounds it to 128 bytes of
// printable ASCII without "{" or "}", so a client cannot pick a Redis Cluster
// hash slot or grow keys without bound, and does so injectively: escaping a
// value never makes it equal to another value's key. Key funcs do not
// sanitise; the middleware does, once, on the final material.
package keyfunc
