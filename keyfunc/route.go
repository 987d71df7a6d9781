package keyfunc

import (
	"net/http"
	"strings"
)

// Route returns a Func whose key is the request's matched route pattern,
// such as "GET /users/{id}": one bucket per endpoint rather than per URL, so
// "/users/1" and "/users/2" share a limit and a client cannot mint buckets by
// varying the path. The key comes from the route alone, never from what the
// client sent:
//
//   - a pattern that carries a method ("GET /users/{id}", ServeMux or chi's
//     Handle) is used as it is, with runs of blanks after the method folded
//     into one space. Since ServeMux's "GET" patterns also match HEAD, a
//     HEAD request to a "GET /x" route is keyed "GET /x" and shares the GET
//     bucket.
//   - a pattern without a method ("/static/", chi's r.Get("/users/{id}"),
//     whose patterns never carry one) is keyed by the pattern alone: every
//     method that reaches the route shares one bucket. A route that accepts
//     any method would otherwise let a client choose its bucket by sending
//     made-up methods.
//
// For a bucket per method on routes registered without one, join Route with
// [Method], which keys the standard methods as themselves and folds every
// other method into one bucket: Join(Route(), Method()). Or register one
// pattern per method ("GET /x", "POST /x") and use Route alone.
//
// Route reads [http.Request.Pattern], which a router sets after matching:
//
//   - [http.ServeMux] (Go 1.22+) sets it before calling the handler it
//     matched, so wrap that handler: mux.Handle("GET /users/{id}",
//     mw.Handler(h)).
//   - chi (v5.5+) sets it before calling the endpoint's handler chain, which
//     includes middlewares added with r.With and with r.Use inside r.Group.
//     Middlewares added with r.Use on a router run before that router has
//     routed: on the top-level router the pattern is still empty, and inside
//     r.Route or a mounted sub-router it is only the mount point
//     ("/users/*"), so every route below it would share one key. Use r.With
//     there.
//
// A request with no pattern reports [ErrNoKey], with a reason that says where
// to mount the limiter.
func Route() Func {
	return route
}

var errNoPattern = noKey("Route", "request has no route pattern "+
	"(mount the limiter after routing: in chi with r.With, inside r.Group or on the route, "+
	"not with a top-level r.Use; with http.ServeMux, wrap the handler you register)")

func route(r *http.Request) (string, error) {
	p := r.Pattern
	if p == "" {
		return "", errNoPattern
	}
	// ServeMux patterns are "[METHOD ][HOST]/[PATH]": a blank can only
	// follow a method (paths and hosts hold none).
	i := strings.IndexAny(p, " \t")
	if i < 0 {
		return p, nil // no method: every method shares the route's bucket
	}
	if p[i] == ' ' && i+1 < len(p) && p[i+1] != ' ' && p[i+1] != '\t' {
		return p, nil // already canonical: no allocation
	}
	return p[:i] + " " + strings.TrimLeft(p[i+1:], " \t"), nil
}

// Method returns a Func whose key is the request's method, bounded: the
// standard methods of net/http (GET, HEAD, POST, PUT, PATCH, DELETE,
// CONNECT, OPTIONS, TRACE; "GET" when empty, as net/http reads it) are keyed
// as themselves, and every other method, which only the client chose, is
// keyed "OTHER". A client sending made-up methods therefore reaches at
// most ten buckets, not one per method.
//
// On its own it makes a bucket per method; it is meant for [Join]:
// Join(Route(), Method()) limits each method of each route apart.
func Method() Func {
	return func(r *http.Request) (string, error) { return method(r), nil }
}

// otherMethod is the key Method gives every non-standard method.
const otherMethod = "OTHER"

func method(r *http.Request) string {
	switch r.Method {
	case "":
		return http.MethodGet
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return r.Method
	}
	return otherMethod
}
