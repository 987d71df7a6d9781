package middleware

import (
	"context"
	"net/http"

	"github.com/redlimit/redlimit/middleware/engine"
)

// settles reports whether a rule of rules charges after the response.
func settles(rules []Rule) bool {
	for i := range rules {
		if rules[i].ResponseCost != nil {
			return true
		}
	}
	return false
}

// serveSettled serves an allowed request whose rules include ResponseCost
// rules, then settles them, also when next panics (the panic goes on).
func (m *Middleware) serveSettled(w http.ResponseWriter, r *http.Request, next http.Handler, d *engine.Decision) {
	rec := &recorder{ResponseWriter: w}
	done := false
	defer func() {
		status := rec.status
		switch {
		case status != 0:
		case done:
			status = http.StatusOK
		default:
			status = http.StatusInternalServerError
		}
		m.settle(r, d, status, rec.written)
	}()
	next.ServeHTTP(rec, r)
	done = true
}

// Settle charges the ResponseCost rules of d, a Decision that Check
// returned and allowed, what the response cost (status and written, the
// body bytes): what Handler does after the next handler returns (see
// Rule.ResponseCost). Call it once per Decision, after the response.
// Config.OnSettleError hears of its error too.
func (m *Middleware) Settle(r *http.Request, d *engine.Decision, status int, written int64) error {
	return m.settle(r, d, status, written)
}

func (m *Middleware) settle(r *http.Request, d *engine.Decision, status int, written int64) error {
	var buf [4]int64
	costs := buf[:0]
	for i := range m.cfg.Rules {
		c := int64(0)
		if i < len(d.Rules) {
			c = d.Rules[i].Cost
		}
		if f := m.cfg.Rules[i].ResponseCost; f != nil && i < len(d.Rules) && d.Rules[i].Key != "" {
			c = f(status, written)
		}
		costs = append(costs, c)
	}
	// The client may be gone: the refund is the service's, not the
	// request's; Config.Timeout bounds it.
	err := m.engine.Settle(context.WithoutCancel(r.Context()), d, costs)
	if err != nil && m.cfg.OnSettleError != nil {
		m.cfg.OnSettleError(r, err)
	}
	return err
}

// recorder sees the status and the body bytes of a response.
type recorder struct {
	http.ResponseWriter
	status  int   // the final status written, 0 before
	written int64 // body bytes
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	return n, err
}

// Flush flushes the response, if the ResponseWriter can.
func (w *recorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the ResponseWriter, for http.ResponseController.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
