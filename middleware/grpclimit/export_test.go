package grpclimit

// Pending returns how many calls' releases are queued or being made by a
// worker.
func Pending(l *Interceptor) int64 { return l.after.Pending() }

// LimitAfter gives l a queue of releases after calls with at most workers
// workers and size releases waiting.
func LimitAfter(l *Interceptor, workers, size int) { l.after = newAfter(l, workers, size) }
