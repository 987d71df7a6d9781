package redlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

// maxStalled bounds the backend calls that outlived Config.Timeout and are
// still running. Past it, calls to the primary fail at once instead of
// starting another goroutine that would wait on the same stalled backend.
const maxStalled = 1024

// errStalled is the cause of a call refused because too many earlier calls
// are still stuck past their timeout.
var errStalled = errors.New("too many backend calls still running past Config.Timeout; not calling until they finish")

// honoursDeadline reports whether b is a built-in store that returns by
// its context's deadline (contract.Traits).
func honoursDeadline(b algorithms.Backend) bool { return contract.TraitsOf(b).HonoursDeadline }

// inProcess reports whether b is a built-in store that decides in process,
// without I/O (contract.Traits).
func inProcess(b algorithms.Backend) bool { return contract.TraitsOf(b).InProcess }

// cachesDenials reports whether b is a built-in layer that answers denied
// keys locally (contract.Traits).
func cachesDenials(b algorithms.Backend) bool { return contract.TraitsOf(b).CachesDenials }

// engineErr is a BackendError the engine makes itself: the call did not
// return in time, was refused, or panicked.
func engineErr(err error) error {
	return &algorithms.BackendError{Backend: "engine", Err: err}
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

// flights recycles flights, but not their channel: each flight gets a
// channel of its own, so that none outlives the goroutines that used it
// (under testing/synctest a channel belongs to the bubble that made it,
// and a pooled one would reach a goroutine outside).
var flights = sync.Pool{New: func() any { return new(flight) }}

// bounded calls b.Allow and returns when it does or when ctx is done,
// whichever comes first: the backend's client may not honour the context's
// deadline (go-redis only does with Options.ContextTimeoutEnabled), and a
// request must not wait longer than Config.Timeout. An abandoned call keeps
// running in its goroutine until the client gives up by itself; at most
// maxStalled such calls run at once (s.stalled counts them). A backend that
// honours deadlines by itself is called directly, without the goroutine
// and its two scheduler hand-offs.
func (s *shared) bounded(ctx context.Context, b algorithms.Backend, checks []algorithms.Check, results []algorithms.Result) error {
	if s.inline {
		return b.Allow(ctx, checks, results)
	}
	if err := context.Cause(ctx); err != nil {
		return engineErr(err)
	}
	if s.stalled.Load() >= maxStalled {
		return engineErr(errStalled)
	}
	f := flights.Get().(*flight)
	f.done = make(chan error, 1)
	f.state.Store(flightRunning)
	f.checks = append(f.checks[:0], checks...)
	if cap(f.results) < len(results) {
		f.results = make([]algorithms.Result, len(results))
	}
	f.results = f.results[:len(results)]
	go s.fly(ctx, b, f)
	select {
	case err := <-f.done:
		return land(f, results, err)
	case <-ctx.Done():
	}
	if !f.state.CompareAndSwap(flightRunning, flightAbandoned) {
		// The worker finished meanwhile: take its answer.
		return land(f, results, <-f.done)
	}
	s.stalled.Add(1)
	return engineErr(context.Cause(ctx))
}

func (s *shared) fly(ctx context.Context, b algorithms.Backend, f *flight) {
	err := allow(ctx, b, f.checks, f.results)
	if !f.state.CompareAndSwap(flightRunning, flightFinished) {
		// Abandoned: nobody reads the answer; drop the flight.
		s.stalled.Add(-1)
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
			err = engineErr(fmt.Errorf("panic: %v", v))
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
	f.done = nil
	flights.Put(f)
	return err
}

// sideCall runs fn, a refund or a release on b, and returns when it does
// or when ctx (which carries the timeout) is done, whichever comes first,
// as bounded does for Allow: a client that ignores deadlines (go-redis
// without Options.ContextTimeoutEnabled waits for its ReadTimeout) must not
// hold a request past Config.Timeout after its handler. An abandoned call
// keeps running in its goroutine, counted as stalled until it returns.
func (s *shared) sideCall(ctx context.Context, b algorithms.Backend, fn func(context.Context) error) error {
	if ctx.Done() == nil || honoursDeadline(b) || inProcess(b) {
		return fn(ctx)
	}
	if s.stalled.Load() >= maxStalled {
		return engineErr(errStalled)
	}
	done := make(chan error, 1)
	var state atomic.Int32 // flightRunning, flightFinished or flightAbandoned
	state.Store(flightRunning)
	go func() {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = engineErr(fmt.Errorf("backend panicked: %v", p))
				}
			}()
			return fn(ctx)
		}()
		if !state.CompareAndSwap(flightRunning, flightFinished) {
			s.stalled.Add(-1)
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if !state.CompareAndSwap(flightRunning, flightAbandoned) {
		return <-done
	}
	s.stalled.Add(1)
	return engineErr(context.Cause(ctx))
}
