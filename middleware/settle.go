package middleware

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"

	"github.com/redlimit/redlimit"
)

// serveOwing serves an allowed request that owes work after its
// response (slots to release; ResponseCost rules to settle when settle),
// then hands the work over (done), also when next panics (the panic goes
// on). The costs are computed here, on the request's goroutine, from
// what the recorder saw: the status and body bytes are final once next
// has returned. A ResponseCost that panics settles nothing (the
// reservation stays); the slots are released all the same.
func (m *Middleware) serveOwing(w http.ResponseWriter, r *http.Request, next http.Handler, s *scratch, settle bool) {
	var rec *recorder
	if settle {
		w, rec = newRecorder(w)
	}
	returned := false
	defer func() {
		defer m.done(r, s)
		if rec != nil {
			s.costs = m.costs(s.costs[:0], &s.dec, rec.final(returned), rec.written)
			s.settle = true
		}
	}()
	next.ServeHTTP(w, r)
	returned = true
}

// Settle ends d, a Decision that Check returned and allowed, once its
// work is done: it releases the slots of its concurrency rules and
// charges its ResponseCost rules what the response cost (status and
// written, the body bytes): what Handler does after the next handler
// returns (see Rule.ResponseCost and redlimit.Limiter.Settle). Call it
// once per Decision, after the response. It makes the backend calls
// before it returns (redlimit.Config.Timeout bounds each);
// to keep it off the response's path, call it once the response is
// written. Config.OnSettleError hears of its error too.
func (m *Middleware) Settle(r *http.Request, d *redlimit.Decision, status int, written int64) error {
	var buf [4]redlimit.Cost
	return m.settleCosts(context.WithoutCancel(r.Context()), r, d, m.costs(buf[:0], d, status, written))
}

// costs appends to buf the cost of each ResponseCost rule that d charged,
// from its func, keyed by rule name; the other rules keep what they
// charged.
func (m *Middleware) costs(buf []redlimit.Cost, d *redlimit.Decision, status int, written int64) []redlimit.Cost {
	for i := range m.rules {
		if f := m.rules[i].ResponseCost; f != nil && i < len(d.Rules) && d.Rules[i].Key != "" {
			buf = append(buf, redlimit.Cost{Rule: m.rules[i].Name, Units: f(status, written)})
		}
	}
	return buf
}

// settleCosts settles d with costs under ctx (releasing its slots), and
// gives its error to Config.OnSettleError.
func (m *Middleware) settleCosts(ctx context.Context, r *http.Request, d *redlimit.Decision, costs []redlimit.Cost) error {
	err := m.lim.Settle(ctx, d, costs...)
	if err != nil {
		m.reportSettle(r, err)
	}
	return err
}

// recorder sees the status and the body bytes of a response. It is
// wrapped in the type of newRecorder that has the optional interfaces
// of the ResponseWriter it records, and only those.
type recorder struct {
	w        http.ResponseWriter
	status   int   // the final status written, 0 before
	written  int64 // body bytes written through the recorder
	hijacked bool  // the handler took the connection over
}

// final is the status a ResponseCost sees: http.StatusSwitchingProtocols
// once the handler hijacked the connection (what it sent there is not
// seen); otherwise the status written, or, if none was, 200 when the
// handler returned (net/http sends that) and 500 when it panicked.
func (w *recorder) final(returned bool) int {
	switch {
	case w.hijacked:
		return http.StatusSwitchingProtocols
	case w.status != 0:
		return w.status
	case returned:
		return http.StatusOK
	}
	return http.StatusInternalServerError
}

// Header returns the header map of the ResponseWriter.
func (w *recorder) Header() http.Header { return w.w.Header() }

// WriteHeader records the first final status (a 1xx but 101 is not one)
// and writes it.
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.w.WriteHeader(code)
}

// Write writes b, counting the bytes written.
func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.w.Write(b)
	w.written += int64(n)
	return n, err
}

// WriteString writes s, counting the bytes written, without copying it
// when the ResponseWriter is an io.StringWriter.
func (w *recorder) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := io.WriteString(w.w, s)
	w.written += int64(n)
	return n, err
}

// Unwrap returns the ResponseWriter, for http.ResponseController.
func (w *recorder) Unwrap() http.ResponseWriter { return w.w }

func (w *recorder) flush() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.w).Flush()
}

func (w *recorder) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.w.(http.Hijacker).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

func (w *recorder) readFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.w.(io.ReaderFrom).ReadFrom(src)
	w.written += n
	return n, err
}

// The recorders with the optional interfaces of their ResponseWriter: F
// for http.Flusher (with FlushError, which http.ResponseController
// prefers), H for http.Hijacker, R for io.ReaderFrom.
type (
	recorderF   struct{ recorder }
	recorderH   struct{ recorder }
	recorderR   struct{ recorder }
	recorderFH  struct{ recorderF }
	recorderFR  struct{ recorderF }
	recorderHR  struct{ recorderH }
	recorderFHR struct{ recorderFH }
)

// Flush flushes the response.
func (w *recorderF) Flush() { _ = w.flush() }

// FlushError flushes the response and returns its error.
func (w *recorderF) FlushError() error { return w.flush() }

// Hijack takes the connection over; the response's status is then
// http.StatusSwitchingProtocols for a ResponseCost.
func (w *recorderH) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

// ReadFrom writes what src holds, counting the bytes.
func (w *recorderR) ReadFrom(src io.Reader) (int64, error) { return w.readFrom(src) }

// Hijack takes the connection over (see recorderH).
func (w *recorderFH) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

// ReadFrom writes what src holds, counting the bytes.
func (w *recorderFR) ReadFrom(src io.Reader) (int64, error) { return w.readFrom(src) }

// ReadFrom writes what src holds, counting the bytes.
func (w *recorderHR) ReadFrom(src io.Reader) (int64, error) { return w.readFrom(src) }

// ReadFrom writes what src holds, counting the bytes.
func (w *recorderFHR) ReadFrom(src io.Reader) (int64, error) { return w.readFrom(src) }

// newRecorder returns the recorder of w as a ResponseWriter with the
// optional interfaces w has (http.Flusher, http.Hijacker, io.ReaderFrom),
// and the recorder itself.
func newRecorder(w http.ResponseWriter) (http.ResponseWriter, *recorder) {
	var kind int
	if _, ok := w.(http.Flusher); ok {
		kind |= 1
	}
	if _, ok := w.(http.Hijacker); ok {
		kind |= 2
	}
	if _, ok := w.(io.ReaderFrom); ok {
		kind |= 4
	}
	rec := recorder{w: w} // copied into the one allocation of its kind
	switch kind {
	case 1:
		x := &recorderF{rec}
		return x, &x.recorder
	case 2:
		x := &recorderH{rec}
		return x, &x.recorder
	case 3:
		x := &recorderFH{recorderF{rec}}
		return x, &x.recorder
	case 4:
		x := &recorderR{rec}
		return x, &x.recorder
	case 5:
		x := &recorderFR{recorderF{rec}}
		return x, &x.recorder
	case 6:
		x := &recorderHR{recorderH{rec}}
		return x, &x.recorder
	case 7:
		x := &recorderFHR{recorderFH{recorderF{rec}}}
		return x, &x.recorder
	}
	x := &recorder{w: w}
	return x, x
}
