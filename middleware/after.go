package middleware

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/after"
)

// Work after the response. Once the next handler has returned, an
// allowed request may still owe the backend the calls of
// redlimit.Limiter.Settle: the release of the slots its concurrency rules
// hold and the settling of its ResponseCost rules. Neither
// changes the response, so neither is made on the request's goroutine:
// Handler computes what the response cost (status and body bytes are
// final once the handler has returned), queues the calls, and returns,
// and net/http finishes and flushes the response at once, while a worker
// makes the calls. Handler does not Flush before queuing: a Flush turns a
// small response into a chunked one whose end still waits for the
// handler to return, and costs it its Content-Length.
//
// Bounds (the queue of internal/after, shared with grpclimit): at most
// after.Workers (16) workers, started when work arrives and gone after a
// second without any; at most after.Size (1024) requests' calls
// waiting. A job waits for about after.Size/after.Workers (64) jobs
// ahead of it, each two calls bounded by redlimit.Config.Timeout. When the queue
// is full, or after Close, the request's own goroutine makes the calls
// after its handler, as without a queue: nothing is dropped, and the
// client of that request waits for them (redlimit.Config.Timeout per call). A
// backend that runs in process (memstore) has no
// round trip to save: its calls are made at once on the request's
// goroutine.

// job is the work after one response: m's calls for the request r, whose
// scratch s (the Decision, which holds the slots, and the costs to
// settle) the job owns until it is done.
type job struct {
	m *Middleware
	r *http.Request
	s *scratch
}

// newAfter returns the queue of work after responses of a Middleware
// and those derived from it with With: at most workers workers, at most
// size requests waiting.
func newAfter(workers, size int) *after.Queue[job] {
	return after.New(workers, size, func(j job) { j.m.finish(j.r, j.s) })
}

// owes reports whether the allowed decision d owes work after its
// response: slots to release, or a ResponseCost rule's reservation to
// settle (the rules the Limiter settles: evaluated, allowed, with a
// Receipt).
func (m *Middleware) owes(d *redlimit.Decision) (release, settle bool) {
	release = m.holds && holds(d)
	if m.settles {
		for i := range m.rules {
			if m.rules[i].ResponseCost == nil || i >= len(d.Rules) {
				continue
			}
			if rd := &d.Rules[i]; rd.Key != "" && rd.Evaluated && rd.Result.Allowed && rd.Result.Receipt != (algorithms.Receipt{}) {
				settle = true
				break
			}
		}
	}
	return release, settle
}

// holds reports whether the allowed decision d may hold the slots of a
// concurrency rule: one was decided, and allowed, by a backend. Settle
// releases them (and does nothing for a decision that holds none).
func holds(d *redlimit.Decision) bool {
	if d.Source == redlimit.SourceNone {
		return false
	}
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.Algorithm == algorithms.Concurrency && rd.Evaluated && rd.Result.Allowed {
			return true
		}
	}
	return false
}

// local reports whether the backend that decided d runs in process: its
// calls after the response are made at once.
func (m *Middleware) local(d *redlimit.Decision) bool {
	switch d.Source {
	case redlimit.SourcePrimary:
		return m.localPrimary
	case redlimit.SourceFallback:
		return m.localFallback
	}
	return true
}

// done hands the work after r's response (s.dec's release, and the
// settle of s.costs when s.settle) to a worker, or does it at once when
// the backend runs in process, the queue is full or m is closed. s is
// the job's from here on: it goes back to the pool when done.
func (m *Middleware) done(r *http.Request, s *scratch) {
	if !m.local(&s.dec) {
		if m.after.Enqueue(job{m: m, r: r, s: s}) {
			return
		}
		if n := m.after.Full(); n > 0 {
			m.logger().Warn("redlimit: the queue of releases and refunds after responses is full: requests make their own after their handler", "requests", n, "queue", m.after.Size())
		}
	}
	m.finish(r, s)
}

// finish releases the slots of s.dec, settles its ResponseCost rules
// when s.settle, reports what failed to Config.OnSettleError, and puts s
// back in the pool. The client may be gone: the calls are the service's,
// not the request's; redlimit.Config.Timeout bounds each.
func (m *Middleware) finish(r *http.Request, s *scratch) {
	d := &s.dec
	ctx := r.Context() // Settle releases the slots whatever it says
	var costs []redlimit.Cost
	if s.settle {
		// the refunds ignore its cancellation too
		ctx, costs = context.WithoutCancel(ctx), s.costs
	}
	// settleCosts reports its error itself
	_ = after.Guard(func() error { return m.settleCosts(ctx, r, d, costs) })
	s.settle = false
	clear(s.costs)
	m.pool.Put(s)
}

// reportSettle gives err, a failed release or settle of r, to
// Config.OnSettleError, if set; a panic of the hook is logged.
func (m *Middleware) reportSettle(r *http.Request, err error) {
	if m.cfg.OnSettleError == nil {
		return
	}
	if perr := after.Guard(func() error { m.cfg.OnSettleError(r, err); return nil }); perr != nil {
		m.logger().Error("redlimit: Config.OnSettleError panicked", "err", perr)
	}
}

// logger is the Limiter's Logger.
func (m *Middleware) logger() *slog.Logger {
	if m.log != nil {
		return m.log
	}
	return slog.Default()
}
