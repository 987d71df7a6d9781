package keyfunc

import "net/http"

// Func returns the key material for a request: the part of a rate-limit key
// that tells one client (or route, or tenant) from another. The middleware
// sanitises it (see docs/keys.md) and stores it under
// `<prefix>:<rule>:<algorithm>:{<material>}`.
//
// A Func that cannot find its key returns an error wrapping [ErrNoKey] (and,
// for detail, an [*Error] naming the Func and the reason); it never returns
// "" with a nil error, because an empty key would put every such request in
// one shared bucket. A Func that meets a request holding something it was
// not built for returns an error wrapping [algorithms.ErrInvalidConfig].
//
// A Func must not modify the request and must be safe for concurrent use;
// every Func in this package is.
type Func func(*http.Request) (string, error)

// Const returns a Func whose key is s for every request: one bucket shared
// by everyone, which makes the rule a global limit (for example, "at most 100
// signups per minute across all clients"). Combined with [Join] it names a
// bucket explicitly, as in Join(Const("export"), IP(...)).
//
// Const does not check s; an empty s is a legal, if unreadable, key.
func Const(s string) Func {
	return func(*http.Request) (string, error) { return s, nil }
}
