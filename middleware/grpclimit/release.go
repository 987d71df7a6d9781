package grpclimit

import (
	"context"
	"log/slog"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/after"
)

// Releases after the call. Once a call's handler has returned, its
// concurrency rules' slots are to be released (redlimit.Limiter.Settle),
// a round trip to a remote backend that does not change the answer. The
// interceptors do not make it before returning: they queue it, as they
// return, on a queue shared with the HTTP middleware's kind
// (internal/after), and gRPC writes the reply (a unary call's message
// and status, a stream's status) while a worker makes the call. A unary
// interceptor can do nothing after gRPC has the reply but by another
// goroutine: the release is queued by a deferred call, so it also
// follows a handler that panics.
//
// Bounds: at most after.Workers (16) workers per Interceptor, gone after a
// second without work; at most after.Size (1024) releases waiting, each
// bounded by the engine's Timeout. When the queue is full, or after
// Close, the call releases its slots itself before its interceptor
// returns, as without a queue: nothing is dropped. Slots held by a
// backend that runs in process (redlimit.Status.InProcess: memstore; and
// the fallback) have no round trip to save: they are released at
// once.

// release is the work after one call: the release of the slots d holds,
// for the call of method with context ctx (done by then).
type release struct {
	ctx    context.Context
	method string
	d      *redlimit.Decision
}

// newAfter returns the queue of releases of l: at most workers workers,
// at most size releases waiting.
func newAfter(l *Interceptor, workers, size int) *after.Queue[release] {
	return after.New(workers, size, l.release)
}

// done hands the release of the slots d holds to a worker, or makes it
// at once when the backend holding them runs in process, the queue is
// full or l is closed.
func (l *Interceptor) done(ctx context.Context, method string, d *redlimit.Decision) {
	r := release{ctx: ctx, method: method, d: d}
	if !l.local && d.Source != redlimit.SourceFallback { // the fallback runs in process
		if l.after.Enqueue(r) {
			return
		}
		if n := l.after.Full(); n > 0 {
			l.logger().Warn("redlimit: the queue of releases after gRPC calls is full: calls release their own slots before their interceptor returns", "calls", n, "queue", l.after.Size())
		}
	}
	l.release(r)
}

// release releases r's slots and reports what failed to
// Config.OnReleaseError. The call is over: the engine's Timeout bounds
// the release, whatever r.ctx says.
func (l *Interceptor) release(r release) {
	if err := after.Guard(func() error { return l.engine.Settle(r.ctx, r.d) }); err != nil {
		l.reportRelease(r, err)
	}
}

// reportRelease gives err, r's failed release, to Config.OnReleaseError,
// if set; a panic of the hook is logged.
func (l *Interceptor) reportRelease(r release, err error) {
	if l.cfg.OnReleaseError == nil {
		return
	}
	if perr := after.Guard(func() error { l.cfg.OnReleaseError(r.ctx, r.method, err); return nil }); perr != nil {
		l.logger().Error("redlimit: grpclimit.Config.OnReleaseError panicked", "err", perr)
	}
}

// logger is Config.Logger, or slog.Default.
func (l *Interceptor) logger() *slog.Logger {
	if l.cfg.Logger != nil {
		return l.cfg.Logger
	}
	return slog.Default()
}

// Close waits until the releases queued after calls are made: every slot
// of a concurrency rule released, or its error given to
// Config.OnReleaseError. That takes at most the time of the queued
// releases, each bounded by the engine's Timeout (with the Timeout
// disabled, as long as the backend takes). The interceptors keep
// working: after Close, a call releases its own slots before its
// interceptor returns. Close an Interceptor after the server that runs it
// has stopped (grpc.Server.GracefulStop), so that every call's release
// is made, and before closing its Engine, which it does not close. It
// returns nil.
func (l *Interceptor) Close() error {
	l.after.Close()
	return nil
}
