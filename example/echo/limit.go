package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redlimit/redlimit/middleware"
)

// limit returns mw as Echo v4 middleware. It is what
// echo.WrapMiddleware(mw.Handler) does (the Middleware decides, writes
// the headers, answers 429 or 503 itself and then does not call the rest
// of the chain, and settles and releases after it), with the two things
// WrapMiddleware loses:
//
//   - The route. Echo v4 does not set http.Request.Pattern, so
//     keyfunc.Route finds no route behind WrapMiddleware (the rule's
//     MissingKey applies: by default every request is refused). limit
//     gives the Middleware a copy of the Request whose Pattern is Echo's
//     route, c.Path() ("/users/:id"); the handlers keep their own
//     Request. (Echo v5's WrapMiddleware sets the Pattern itself.)
//   - The status of a returned error. An Echo handler that fails returns
//     an error (echo.ErrUnauthorized) and Echo's HTTPErrorHandler writes
//     the answer after the chain has returned: behind WrapMiddleware, after
//     the Middleware has settled its Rule.ResponseCost rules with the
//     status it saw, 200 ("count only failed logins" would count none).
//     limit calls the error handler (c.Error) inside the Middleware, as
//     Echo's RequestLogger does with HandleError, and still returns the
//     error to the middlewares before it; Echo's default error handler
//     ignores it then, the response being committed. A custom
//     HTTPErrorHandler must do the same (return when
//     c.Response().Committed).
//
// Mount it with e.Use, on a group or on a route, never with e.Pre (which
// runs before routing, without a route). With three rules on memstore it
// allocates 6 times per request over Echo's own 2 (BenchmarkMount): the
// Middleware's 2, the Request copy, and the closures of the call, which
// ginlimit in this repository pools (3 in all there); WrapMiddleware
// allocates 7.
func limit(mw *middleware.Middleware) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			own := c.Request()
			decided := own
			if p := c.Path(); p != "" && p != own.Pattern {
				decided = own.WithContext(own.Context())
				decided.Pattern = p
			}
			mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r != decided { // the Decision in the context (Config.DecisionInContext)
					c.SetRequest(own.WithContext(r.Context()))
				}
				if res := c.Response(); w != http.ResponseWriter(res) {
					// A ResponseCost rule watches the response: the handlers
					// write through the Middleware's writer, which writes to
					// res. res is c's again once the chain has returned.
					c.SetResponse(echo.NewResponse(w, c.Echo()))
					defer c.SetResponse(res)
				}
				if err = next(c); err != nil && !c.Response().Committed {
					c.Error(err)
				}
			})).ServeHTTP(c.Response(), decided)
			return err
		}
	}
}
