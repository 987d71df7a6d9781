package middleware

// MaxStalled is maxStalled, for the tests of the bound on abandoned calls.
const MaxStalled = maxStalled

// Stalled returns how many abandoned backend calls are still running.
func (m *Middleware) Stalled() int64 { return m.stalled.Load() }
