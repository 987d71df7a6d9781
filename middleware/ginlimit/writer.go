package ginlimit

import (
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// settleWriter is c.Writer for the handlers after the limiter while a
// Rule.ResponseCost rule watches the response: the Middleware's
// ResponseWriter (rec) sees the body bytes and the status, and Gin's
// (ResponseWriter) does the rest. Gin holds a status back (WriteHeader
// only records it) until the first body byte, WriteHeaderNow, Flush, or
// the end of the chain; settleWriter tells rec the status Gin then sends,
// so that a status changed before the body is counted as the one sent.
type settleWriter struct {
	gin.ResponseWriter
	rec  http.ResponseWriter
	told bool // rec has seen the status
}

// tell gives rec the status Gin sends, once. rec passes it on to Gin's
// writer, which already holds it: nothing is written yet.
func (w *settleWriter) tell() {
	if !w.told {
		w.told = true
		w.rec.WriteHeader(w.ResponseWriter.Status())
	}
}

// Write writes the body through rec, which counts the bytes.
func (w *settleWriter) Write(b []byte) (int, error) {
	w.tell()
	return w.rec.Write(b)
}

// WriteString writes the body through rec, which counts the bytes.
func (w *settleWriter) WriteString(s string) (int, error) {
	w.tell()
	return io.WriteString(w.rec, s)
}

// WriteHeaderNow sends the status and headers.
func (w *settleWriter) WriteHeaderNow() {
	w.tell()
	w.ResponseWriter.WriteHeaderNow()
}

// Flush sends what is buffered, the status first.
func (w *settleWriter) Flush() {
	w.tell()
	w.ResponseWriter.Flush()
}

// Unwrap returns the Middleware's ResponseWriter, for
// http.ResponseController (deadlines, full duplex), which reaches Gin's
// through it.
func (w *settleWriter) Unwrap() http.ResponseWriter { return w.rec }
