package grpclimit

// Pending returns how many calls' releases are queued or being made by a
// worker.
func Pending(l *Limiter) int64 { return l.after.Pending() }

// LimitAfter gives l a queue of releases after calls with at most workers
// workers and size releases waiting.
func LimitAfter(l *Limiter, workers, size int) { l.after = newAfter(l, workers, size) }
