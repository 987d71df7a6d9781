package ginlimit

import (
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit/middleware"
)

// Handler returns mw as a Gin middleware: for each request it runs
// mw.Handler around the rest of the chain, so the request is decided,
// answered and settled exactly as on net/http, and aborts the chain when
// mw does not let the request through. See the package documentation for
// what Gin adds (route keys, the Decision in the context, the response
// writer).
//
// Handler panics when mw is nil: a programmer error, found when the
// routes are built rather than at request time. Several Handlers (on
// groups and routes) may share one Middleware; build one Middleware with
// every rule of a route ([middleware.Middleware.With]) rather than stacking
// two, which makes two independent decisions.
func Handler(mw *middleware.Middleware) gin.HandlerFunc {
	if mw == nil {
		panic("redlimit: ginlimit.Handler: nil *middleware.Middleware")
	}
	l := &limiter{}
	l.pool.New = func() any {
		k := &call{}
		k.h = mw.Handler(k)
		return k
	}
	return l.serve
}

// limiter is a Handler's state: calls, pooled so that a request costs no
// allocation for the handler it hands the Middleware.
type limiter struct {
	pool sync.Pool // of *call
}

// call is one request through the Middleware: k.h is mw.Handler(k), and
// k.ServeHTTP, the next handler the Middleware calls for a request it
// lets through, runs the rest of the gin chain.
type call struct {
	h      http.Handler
	c      *gin.Context
	req    *http.Request // what the Middleware was given
	called bool          // the Middleware let the request through
	w      settleWriter  // c.Writer while a ResponseCost rule watches the response
}

func (l *limiter) serve(c *gin.Context) {
	if c.Request == nil {
		// Only a Context built by hand (gin.CreateTestContext) has none:
		// nothing to decide on, so nothing is let through.
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	k := l.pool.Get().(*call)
	k.c, k.req, k.called = c, withRoute(c), false
	k.h.ServeHTTP(c.Writer, k.req)
	if !k.called {
		c.Abort()
	}
	// Not reached when a later handler panicked: k is then dropped, not
	// pooled, and nothing can reuse what the panicking request still holds.
	*k = call{h: k.h}
	l.pool.Put(k)
}

// withRoute returns c.Request, or a shallow copy of it whose Pattern is
// c's Gin route, for keyfunc.Route. c.Request itself is not modified.
func withRoute(c *gin.Context) *http.Request {
	r := c.Request
	if p := c.FullPath(); p != "" && p != r.Pattern {
		r = r.WithContext(r.Context())
		r.Pattern = p
	}
	return r
}

// ServeHTTP runs the rest of the gin chain for a request the Middleware
// let through. r is k.req, or a copy of it carrying the Decision in its
// context (Config.DecisionInContext); w is c.Writer, or the Middleware's
// wrapper of it when a ResponseCost rule watches the response.
func (k *call) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.called = true
	c := k.c
	if r != k.req {
		// The handlers get their own Request back, with the Middleware's
		// context: the Decision, not the route Pattern set for the key.
		c.Request = c.Request.WithContext(r.Context())
	}
	if _, ok := w.(gin.ResponseWriter); ok {
		c.Next() // w is c.Writer: the handlers write to it as they would without the limiter
		return
	}
	gw := c.Writer
	k.w = settleWriter{ResponseWriter: gw, rec: w}
	c.Writer = &k.w
	defer func() { c.Writer = gw }() // also when a handler panics: gin.Recovery writes to gw
	c.Next()
	k.w.tell() // a status set without a body (c.Status(401)) is sent when the chain ends
}
