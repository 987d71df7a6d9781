// Package middleware limits the rate of HTTP requests: a
// func(http.Handler) http.Handler that wraps a [redlimit.Limiter]. For
// each request it finds the key material of each of the Limiter's rules,
// has the Limiter decide all of them in one backend call, writes the
// rate-limit headers, and either calls the next handler or answers 429
// Too Many Requests. The limits, the error policy, the fallback, the
// timeout and the storage prefix are the Limiter's ([redlimit.Config]);
// the Middleware's [Config] holds what only HTTP needs: each rule's key
// func and request funcs, the headers, the handlers of 429/503/401.
//
// For one rule, one line ([PerIP], [PerHeader], [PerUser], [PerKey]) builds
// both:
//
//	mw, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(100))
//
// For several, a Limiter with its rules and [New] with a [Rule] per rule,
// naming it:
//
//	lim, err := redlimit.New(backend, redlimit.Config{Rules: []redlimit.Rule{
//		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
//		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(60), MissingKey: redlimit.SkipMissingKey},
//	}})
//	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{
//		{Name: "ip", Key: ip},
//		{Name: "user", Key: user},
//	}})
//
// The rules are decided together and all-or-nothing: a request denied by
// its endpoint rule is not counted against its IP or user rule. Put every
// rule that applies to a route into one Middleware ([Middleware.With] adds
// per-route rules, from redlimit.Limiter.With, to shared ones); stacking
// two Middlewares makes two independent decisions. A Middleware does not
// close a Limiter given to New: close it after the Middleware; one built
// by a shortcut closes its own.
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
// redlimit.Config.OnError chooses fail open, fail closed or the in-memory
// fallback; shadow rules report without denying; [Transport] paces an
// outbound client. gRPC servers are limited by the nested module
// github.com/redlimit/redlimit/middleware/grpclimit, on the same Limiter.
// The guides in docs/ (keys.md, rules.md, failure-policies.md, ...) show
// each in use.
package middleware
