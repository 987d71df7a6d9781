// Package middleware limits the rate of HTTP requests: a
// func(http.Handler) http.Handler that, for each request, builds the keys of
// its rules, asks an [algorithms.Backend] about all of them in one call,
// writes the rate-limit headers, and either calls the next handler or
// answers 429 Too Many Requests. The deciding is done by package
// [engine], which callers without HTTP can use directly.
//
// For one rule, one line ([PerIP], [PerHeader], [PerUser], [PerKey]):
//
//	mw, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(100))
//
// For several, [New] with a [Config] of [Rule]s, decided together and
// all-or-nothing: a request denied by its endpoint rule is not counted
// against its IP or user rule. Put every rule that applies to a route into
// one Middleware ([Middleware.With] adds per-route rules to shared ones);
// stacking two Middlewares makes two independent decisions.
//
// # Mounting
//
// Mount the Handler method value on the route:
//
//	r.With(mw.Handler).Post("/api/orders", orders)       // chi, per route
//	r.Group(func(r chi.Router) { r.Use(mw.Handler); ... }) // chi, per group
//	mux.Handle("POST /api/orders", mw.Handler(orders))   // net/http ServeMux
//
// A rule keyed by [keyfunc.Route] needs the matched pattern, which both
// routers set only once routing has matched: chi's top-level Use runs
// before routing (Route finds no pattern and the rule's MissingKey
// applies), and Use inside chi's Route or a mounted sub-router sees only
// the mount pattern ("/users/*"), one bucket for every route below; use
// With on each route there.
//
// # Beyond the rate
//
// [Rule].LimitFunc takes a rule's limit from the request (a customer's
// plan); [Rule].ResponseCost charges after the response ("count only
// failed logins"); [Config].Exempt and [ExemptCIDRs] let internal traffic
// through; [Unauthorized] answers 401 to a request without a credential;
// [Config].OnError chooses fail open, fail closed or the in-memory
// fallback; shadow rules report without denying; [Transport] paces an
// outbound client. gRPC servers are limited by the nested module
// github.com/redlimit/redlimit/middleware/grpclimit, on the same engine.
// The guides in docs/ (keys.md, rules.md, failure-policies.md, ...) show
// each in use.
package middleware
