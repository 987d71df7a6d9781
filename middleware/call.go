package middleware

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redlimit/redlimit/algorithms"
)

// maxStalled bounds the backend calls that outlived Config.Timeout and are
// still running. Past it, calls to the primary fail at once instead of
// starting another goroutine that would wait on the same stalled backend.
const maxStalled = 1024

// errStalled is the cause of a call refused because too many earlier calls
// are still stuck past their timeout.
var errStalled = errors.New("too many backend calls still running past Config.Timeout; not calling until they finish")

// deadlineHonourer is implemented by a Backend whose Allow returns by its
// context's deadline, whatever the state of its store; see Config.Timeout.
type deadlineHonourer interface {
	HonoursDeadline() bool
}

// honoursDeadline reports whether b says it returns by its context's
// deadline.
func honoursDeadline(b algorithms.Backend) bool {
	h, ok := b.(deadlineHonourer)
	return ok && h.HonoursDeadline()
}

// flight is one bounded call to the primary backend: the worker goroutine
// owns checks and results until it finishes. A flight abandoned at its
// timeout is never reused, so a late answer cannot write into a request
// that has moved on.
type flight struct {
	checks  []algorithms.Check
	results []algorithms.Result
	done    chan error
	state   atomic.Int32 // flightRunning, flightFinished or flightAbandoned
}

const (
	flightRunning int32 = iota
	flightFinished
	flightAbandoned
)

var flights = sync.Pool{New: func() any { return &flight{done: make(chan error, 1)} }}

// bounded calls b.Allow and returns when it does or when ctx is done,
// whichever comes first: the backend's client may not honour the context's
// deadline (go-redis only does with Options.ContextTimeoutEnabled), and a
// request must not wait longer than Config.Timeout. An abandoned call keeps
// running in its goroutine until the client gives up by itself; at most
// maxStalled such calls run at once (m.stalled counts them). A backend that
// honours deadlines by itself is called directly: the goroutine and its two
// hand-offs cost a request tens of microseconds on a busy machine.
func (m *Middleware) bounded(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) error {
	if m.inline {
		return b.Allow(ctx, checks, results)
	}
	if err := context.Cause(ctx); err != nil {
		return &algorithms.BackendError{Backend: "primary", Err: err}
	}
	if m.stalled.Load() >= maxStalled {
		return &algorithms.BackendError{Backend: "primary", Err: errStalled}
	}
	f := flights.Get().(*flight)
	f.state.Store(flightRunning)
	f.checks = append(f.checks[:0], checks...)
	if cap(f.results) < len(results) {
		f.results = make([]algorithms.Result, len(results))
	}
	f.results = f.results[:len(results)]
	go m.fly(ctx, b, f)
	select {
	case err := <-f.done:
		return land(f, results, err)
	case <-ctx.Done():
	}
	if !f.state.CompareAndSwap(flightRunning, flightAbandoned) {
		// The worker finished meanwhile: take its answer.
		return land(f, results, <-f.done)
	}
	m.stalled.Add(1)
	return &algorithms.BackendError{Backend: "primary", Err: context.Cause(ctx)}
}

func (m *Middleware) fly(ctx context.Context, b algorithms.Backend, f *flight) {
	err := allow(ctx, b, f.checks, f.results)
	if !f.state.CompareAndSwap(flightRunning, flightFinished) {
		// Abandoned: nobody reads the answer; drop the flight.
		m.stalled.Add(-1)
		return
	}
	f.done <- err
}

// allow calls b.Allow, turning a panic into an error: in its own goroutine
// a panic would bring the whole process down, where in the request's
// goroutine net/http would have recovered it.
func allow(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &algorithms.BackendError{Backend: "primary", Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	return b.Allow(ctx, checks, results)
}

// land copies a finished flight's results out and recycles it.
func land(f *flight, results []algorithms.Result, err error) error {
	if err == nil {
		copy(results, f.results)
	}
	clear(f.checks) // drop the keys: the pool must not keep them alive
	flights.Put(f)
	return err
}
