// Package middleware limits the rate of HTTP requests: a
// func(http.Handler) http.Handler that, for each request, builds the keys of
// its rules, asks an [algorithms.Backend] about all of them in one call,
// writes the rate-limit headers, and either calls the next handler or
// answers 429 Too Many Requests. The deciding is done by package
// [engine], which callers without HTTP can use directly.
//
// # Mounting
//
// Build one [Middleware] per route (or group of routes sharing limits) with
// [New], and mount its Handler method value:
//
//	r.With(mw.Handler).Post("/api/orders", orders)       // chi, per route
//	r.Group(func(r chi.Router) { r.Use(mw.Handler); ... }) // chi, per group
//	mux.Handle("POST /api/orders", mw.Handler(orders))   // net/http ServeMux
//
// A rule keyed by [keyfunc.Route] needs the matched route pattern, which
// both routers set on the request (Request.Pattern) only once routing has
// matched: mount the middleware on the route (chi's With, Group, or
// wrapping the handler given to ServeMux), not around the whole router. chi's
// top-level Use runs before routing; there Route finds no pattern and the
// rule's MissingKey policy applies. Use inside chi's Route or on a mounted
// sub-router runs when only the mount point has matched: Route then sees
// its pattern ("/users/*") and every route below shares one bucket; use With
// on each route there.
//
// # One line for the common cases
//
// [PerIP], [PerHeader], [PerUser] and [PerKey] build a Middleware of one
// rule from an algorithm and a limit, returning an error, never panicking:
//
//	mw, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(100))
//
// Options name the rule, say which proxies to trust, and set the rest of
// the Config.
//
// # Limits per customer
//
// A rule's limit may come from the request (Rule.LimitFunc): the caller's
// plan, read from a database or from the request's context. What it
// returns is validated on every request; a failure is never replaced by a
// default limit (see Rule.LimitFunc for what the error policy does then).
//
// # Charging after the response
//
// Rule.ResponseCost decides what a request cost from its response: "count
// only failed logins" (a 401 costs 1, a 200 nothing), "refund on 5xx". The
// rule still reserves the request's cost before the handler, so a key at
// its limit is denied up front and requests in flight count; what the
// response did not use is given back after it, once (see
// Rule.ResponseCost for what is atomic).
//
// # Allowlists
//
// Config.Exempt exempts a request from every rule, Rule.Exempt from one:
// internal networks and health checkers ([ExemptCIDRs], which finds the
// client address as [keyfunc.IP] does), or an admin key. An exempt request
// reaches the next handler, uncharged and without the exempt rules'
// headers; one exempt from every rule costs no backend call.
//
// # Missing keys
//
// A request without a key for a rule whose MissingKey is
// engine.DenyMissingKey is denied by Config.Denied (429), or by
// Config.MissingKeyDenied when set: [Unauthorized] answers 401, for rules
// keyed by a credential.
//
// # Layered limits
//
// All rules of one Middleware are decided together in one backend call (one
// EVALSHA on Redis) and all-or-nothing: a request denied by its endpoint rule
// is not counted against its IP or user rules. Put every rule that applies
// to a route into the same Middleware (see [Middleware.With]); stacking two
// Middlewares makes two independent decisions.
//
// # Failures
//
// A backend call gets Config.Timeout (100ms by default), and the request
// waits no longer even when the backend's client ignores the deadline (see
// Config.Timeout for what that costs). When the call fails or times out,
// Config.OnError decides: [engine.FailOpen] lets the request through,
// [engine.FailClosed] answers 503, [engine.Fallback] (the default) switches to an
// in-process [memstore.Store] backend until a background probe finds the
// primary backend healthy again. Every error is reported to Config.OnDecision
// and logged with log/slog.
//
// # Shadow mode
//
// A rule (or, with Config.Shadow, every rule) in shadow mode is decided and
// reported, its headers are written, but it never denies: the request goes
// through and the Decision says it would have been denied. Roll out a new
// limit in shadow mode, watch the hook, then enforce it.
//
// # Outbound requests
//
// [Transport] is an http.RoundTripper that paces a client by an engine's
// rules: each request waits (engine.Engine.WaitInputs) until allowed, keyed
// by host by default, and a request that cannot be allowed in time is not
// sent. On a redisstore backend, every instance paces together.
//
// gRPC servers are limited by the interceptors of the nested module
// github.com/redlimit/redlimit/middleware/grpclimit, on the same engine.
package middleware
