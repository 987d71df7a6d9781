package keyfunc

import (
	"net/http"
	"strings"
)

// Route returns a Func whose key is the request's method and matched route
// pattern, such as "GET /users/{id}": one bucket per endpoint rather than per
// URL, so "/users/1" and "/users/2" share a limit and a client cannot mint
// buckets by varying the path.
//
// Route reads [http.Request.Pattern], which a router sets after matching:
//
//   - [http.ServeMux] (Go 1.22+) sets it before calling the handler it
//     matched, so wrap that handler: mux.Handle("GET /users/{id}",
//     mw.Handler(h)). Its patterns may already carry a method ("GET
//     /users/{id}") and are then used as they are, with runs of blanks after
//     the method folded into one space; a pattern without a method ("/static/")
//     is prefixed with the request's method.
//   - chi (v5.5+) sets it before calling the endpoint's handler chain, which
//     includes middlewares added with r.With and with r.Use inside r.Group.
//     Middlewares added with r.Use on a router run before that router has
//     routed: on the top-level router the pattern is still empty, and inside
//     r.Route or a mounted sub-router it is only the mount point
//     ("/users/*"), so every route below it would share one key. Use r.With
//     there. chi patterns never carry a method, so the request's method is
//     prefixed.
//
// Since ServeMux's "GET" patterns also match HEAD, a HEAD request to a
// "GET /x" route is keyed "GET /x" and shares the GET bucket.
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
		return method(r) + " " + p, nil
	}
	if p[i] == ' ' && i+1 < len(p) && p[i+1] != ' ' && p[i+1] != '\t' {
		return p, nil // already canonical: no allocation
	}
	return p[:i] + " " + strings.TrimLeft(p[i+1:], " \t"), nil
}

// Method returns a Func whose key is the request's method ("GET" when empty,
// as net/http reads it). On its own it makes a bucket per method; it is
// meant for [Join].
//
// Unless a router has restricted the methods a route accepts, the method is
// chosen by the client, which can then spread its requests over arbitrary
// made-up methods; join it with a key the client cannot vary.
func Method() Func {
	return func(r *http.Request) (string, error) { return method(r), nil }
}

func method(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}
