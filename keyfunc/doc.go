// Package keyfunc turns an HTTP request into rate-limit key material: the
// part of a key that tells one client, route or tenant from another.
//
// A [Func] looks at a request and returns a string, one per place a key can
// come from: [IP] (the client's address, believing forwarding headers only
// from the proxies you trust, IPv6 grouped by /64), [Header] (an API key),
// [User] and [ContextValue] (an identity your authentication put in the
// context), [Route] and [Method] (the matched pattern, the standard
// method), [Const] (one global bucket); [Join] requires several parts and
// [Or] takes the first present (the user, else the IP):
//
//	ip, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: proxies})
//	key := keyfunc.Or(keyfunc.Header("X-API-Key"), ip)
//
// A Func that finds no key returns an error wrapping [ErrNoKey], never an
// empty key that would put every such request in one shared bucket; the
// rule's MissingKey policy decides what the request gets. A key func that
// could never find a key is refused when it is built: every constructor
// that takes an argument that can be wrong ([IP], [ParseTrustedProxies],
// [Header], [User], [ContextValue], [Join], [Or]) returns an
// *[algorithms.ConfigError] naming it, and none panics. Every
// configuration error matches [algorithms.ErrInvalidConfig].
//
// Key material is untrusted input: the limiter sanitises it, bounding
// and escaping it so that a client can neither pick
// a Redis Cluster hash slot nor grow keys without bound. The guide is
// docs/keys.md.
package keyfunc
