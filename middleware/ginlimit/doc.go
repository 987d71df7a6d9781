// Package ginlimit mounts a redlimit [middleware.Middleware] on a Gin
// engine: [Handler] turns it into a gin.HandlerFunc that decides exactly
// as the Middleware's net/http Handler does, because it runs that
// Handler. It is a module of its own
// (github.com/redlimit/redlimit/middleware/ginlimit), so that the redlimit
// module does not require Gin.
//
// # Mounting
//
// On the engine, a group or one route:
//
//	r.Use(ginlimit.Handler(mw))                         // every route
//	api.Use(ginlimit.Handler(mw))                       // a group
//	r.POST("/api/orders", ginlimit.Handler(mw), orders) // one route
//
// Gin routes a request before it runs any handler, middlewares included,
// so a limiter mounted with Use already knows the route: unlike chi's
// top-level Use, there is no wrong place to mount it for a
// [keyfunc.Route] key. Mounted on the engine, it also runs for the
// requests no route matched (Gin's 404 and 405 answers), which have no
// route: see below.
//
// # What is the same as net/http
//
// Everything the Middleware decides and writes: the rules and their key,
// tier, cost, limit and exempt funcs (called with the gin Context's
// Request), the rate-limit headers (X-RateLimit-*, the IETF fields,
// Retry-After on 429), the 429 and 503 answers (Config.Denied,
// Config.MissingKeyDenied, Config.ErrorHandler), the error policy and
// the fallback, shadow rules, Config.OnDecision, and what happens after
// the handlers: Rule.ResponseCost rules are settled with the response's
// status and body bytes, and concurrency slots are released, once every
// later handler has returned (or panicked).
//
// # What Gin adds
//
//   - A request the Middleware does not let through (denied, or refused
//     under redlimit.FailClosed) is aborted with c.Abort(): the later
//     handlers of the chain do not run. One it lets through runs them
//     with c.Next(), inside the Middleware.
//   - [keyfunc.Route] keys a request by its Gin route, c.FullPath()
//     ("/users/:id"): the Middleware sees a Request whose Pattern is the
//     route. Like chi's patterns, Gin's carry no method, so every method
//     of a path shares one bucket; join [keyfunc.Method] for a bucket per
//     method. A request no route matched has no route: Route reports
//     keyfunc.ErrNoKey and the rule's MissingKey applies, which by default
//     (redlimit.DenyMissingKey) answers 429 where Gin would answer 404. Key
//     such a rule with keyfunc.Or of keyfunc.Route() and keyfunc.Const("no-route")
//     to count every unmatched request in one bucket and let Gin answer.
//     The gin Context's Request is left as it was.
//   - With Config.DecisionInContext the later handlers find the Decision
//     in the context of c.Request: middleware.FromContext(c.Request.Context())
//     (or middleware.FromContext(c) when the engine's ContextWithFallback
//     is set). The deny and error handlers always find it there.
//   - While a Rule.ResponseCost rule watches a response, the later
//     handlers write through a gin.ResponseWriter that tells the
//     Middleware the status Gin sends (Gin holds a status back until the
//     first byte of the body, or until the chain ends) and counts the body
//     bytes; Status, Size, Written, Hijack, Flush and
//     http.ResponseController keep working.
//
// # Cost
//
// On top of what the Middleware costs on net/http, one allocation per
// request: the shallow copy of the Request that carries the route
// (BenchmarkHandler and TestHandlerAllocs in this module measure it).
package ginlimit
