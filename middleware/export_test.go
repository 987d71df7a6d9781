package middleware

// Stalled returns how many abandoned backend calls are still running.
func (m *Middleware) Stalled() int64 { return m.lim.Status().Stalled }

// Pending returns how many requests' work after their response is queued
// or being done by a worker.
func Pending(m *Middleware) int64 { return m.after.Pending() }

// LimitAfter gives m (and the Middlewares derived from it afterwards) a
// queue of work after responses with at most workers workers and queue
// requests waiting.
func LimitAfter(m *Middleware, workers, queue int) { m.after = newAfter(workers, queue) }

// Own makes m close its Limiter when it is closed, as a shortcut's does.
func Own(m *Middleware) { m.own = true }
