package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/middleware/engine"
)

// Work after the response. Once the next handler has returned, an
// allowed request may still owe the backend two calls: the release of
// the slots its concurrency rules hold (engine.Decision.Release) and the
// settling of its ResponseCost rules (engine.Engine.Settle). Neither
// changes the response, so neither is made on the request's goroutine:
// Handler computes what the response cost (status and body bytes are
// final once the handler has returned), queues the calls, and returns,
// and net/http finishes and flushes the response at once, while a worker
// makes the calls. Handler does not Flush before queuing: a Flush turns a
// small response into a chunked one whose end still waits for the
// handler to return, and costs it its Content-Length.
//
// Bounds: at most afterWorkers (16) workers, started when work arrives
// and gone after a second without any; at most afterQueue (1024)
// requests' calls waiting. A job waits for about afterQueue/afterWorkers
// (64) jobs ahead of it, each two calls bounded by Config.Timeout. When
// the queue is full, or after Close, the request's own goroutine makes
// the calls after its handler, as without a queue: nothing is dropped,
// and the client of that request waits for them (Config.Timeout per
// call). A backend that runs in process (algorithms.InProcess, memstore)
// has no round trip to save: its calls are made at once on the request's
// goroutine.
const (
	// afterWorkers bounds the goroutines that release and settle after
	// responses, per Middleware and the Middlewares derived from it with
	// With.
	afterWorkers = 16
	// afterQueue bounds the requests whose releases and settles wait for
	// a worker; past it a request makes its own after its handler.
	afterQueue = 1024
	// afterIdle is how long a worker waits for work before it ends.
	afterIdle = time.Second
)

// after is the bounded queue of work after responses, shared by a
// Middleware and those derived from it with With.
type after struct {
	jobs    chan job
	workers int // at most this many
	quit    chan struct{}
	wg      sync.WaitGroup // the workers

	mu      sync.Mutex
	running int // workers
	closed  bool

	idle    atomic.Int64 // workers waiting for a job
	pending atomic.Int64 // jobs queued or being done by a worker
	full    atomic.Int64 // jobs done by their request because the queue was full, not logged yet
	logged  atomic.Int64 // when the last line about a full queue was logged (UnixNano)
}

// job is the work after one response: m's calls for the request r, whose
// scratch s (the Decision, which holds the slots, and the costs to
// settle) the job owns until it is done.
type job struct {
	m *Middleware
	r *http.Request
	s *scratch
}

func newAfter(workers, queue int) *after {
	return &after{jobs: make(chan job, queue), workers: workers, quit: make(chan struct{})}
}

// enqueue queues j for a worker, starting one when no idle worker is
// left for the jobs waiting. It returns false, queuing nothing, when the
// queue is full or closed.
func (a *after) enqueue(j job) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.pending.Add(1)
	select {
	case a.jobs <- j:
	default:
		a.pending.Add(-1)
		a.full.Add(1)
		return false
	}
	if a.running < a.workers && a.idle.Load() < int64(len(a.jobs)) {
		a.running++
		a.wg.Add(1)
		go a.work()
	}
	return true
}

// work does the queued jobs until none comes for afterIdle, or until
// close, when it does those left.
func (a *after) work() {
	defer a.wg.Done()
	t := time.NewTimer(afterIdle)
	defer t.Stop()
	for {
		a.idle.Add(1)
		select {
		case j := <-a.jobs:
			a.idle.Add(-1)
			j.m.finish(j.r, j.s)
			a.pending.Add(-1)
			t.Reset(afterIdle)
		case <-t.C:
			a.mu.Lock()
			a.idle.Add(-1)
			if len(a.jobs) == 0 {
				a.running--
				a.mu.Unlock()
				return
			}
			a.mu.Unlock()
			t.Reset(afterIdle)
		case <-a.quit:
			a.idle.Add(-1)
			for {
				select {
				case j := <-a.jobs:
					j.m.finish(j.r, j.s)
					a.pending.Add(-1)
				default:
					// closed: nothing is queued any more
					a.mu.Lock()
					a.running--
					a.mu.Unlock()
					return
				}
			}
		}
	}
}

// close stops queuing (later work is done by its request) and returns
// once every queued job is done.
func (a *after) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.quit)
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// logFull logs, at most once a second, how many requests made their own
// calls after their handler because the queue was full.
func (a *after) logFull(logger *slog.Logger) {
	if a.full.Load() == 0 {
		return // closed, not full
	}
	now := time.Now().UnixNano()
	last := a.logged.Load()
	if now-last < int64(time.Second) || !a.logged.CompareAndSwap(last, now) {
		return
	}
	if n := a.full.Swap(0); n > 0 {
		logger.Warn("redlimit: the queue of releases and refunds after responses is full: requests make their own after their handler", "requests", n, "queue", cap(a.jobs))
	}
}

// owes reports whether the allowed decision d owes work after its
// response: slots to release, or a ResponseCost rule's reservation to
// settle (the rules the engine settles: evaluated, allowed, with a
// Receipt).
func (m *Middleware) owes(d *engine.Decision) (release, settle bool) {
	release = d.Holds()
	if m.settles {
		for i := range m.cfg.Rules {
			if m.cfg.Rules[i].ResponseCost == nil || i >= len(d.Rules) {
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

// local reports whether the backend that decided d runs in process: its
// calls after the response are made at once.
func (m *Middleware) local(d *engine.Decision) bool {
	switch d.Source {
	case engine.SourcePrimary:
		return m.localPrimary
	case engine.SourceFallback:
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
		if m.after.enqueue(job{m: m, r: r, s: s}) {
			return
		}
		m.after.logFull(m.logger())
	}
	m.finish(r, s)
}

// finish releases the slots of s.dec, settles its ResponseCost rules
// when s.settle, reports what failed to Config.OnSettleError, and puts s
// back in the pool. The client may be gone: the calls are the service's,
// not the request's; Config.Timeout bounds each.
func (m *Middleware) finish(r *http.Request, s *scratch) {
	d := &s.dec
	// Release, like Settle here, ignores the cancellation of r's context
	if err := guard(func() error { return d.Release(r.Context()) }); err != nil {
		m.reportSettle(r, err)
	}
	if s.settle {
		// settleCosts reports its error itself
		_ = guard(func() error { return m.settleCosts(context.WithoutCancel(r.Context()), r, d, s.costs) })
	}
	s.settle = false
	m.pool.Put(s)
}

// guard runs f, turning a panic into an error: a worker's panic would
// end the process, where on the request's goroutine net/http recovers it.
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("redlimit: panic after the response: %v", v)
		}
	}()
	return f()
}

// reportSettle gives err, a failed release or settle of r, to
// Config.OnSettleError, if set; a panic of the hook is logged.
func (m *Middleware) reportSettle(r *http.Request, err error) {
	if m.cfg.OnSettleError == nil {
		return
	}
	if perr := guard(func() error { m.cfg.OnSettleError(r, err); return nil }); perr != nil {
		m.logger().Error("redlimit: Config.OnSettleError panicked", "err", perr)
	}
}

// logger is Config.Logger, or slog.Default.
func (m *Middleware) logger() *slog.Logger {
	if m.cfg.Logger != nil {
		return m.cfg.Logger
	}
	return slog.Default()
}
