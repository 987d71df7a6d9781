package middleware

// Stalled returns how many abandoned backend calls are still running.
func (m *Middleware) Stalled() int64 { return m.engine.Stalled() }
