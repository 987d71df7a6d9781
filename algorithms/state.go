package algorithms

import "time"

// state is one key's stored state in the Memory backend. Its fields mirror the
// fields the Lua scripts keep in Redis, field for field, so that the two
// backends run the same arithmetic on the same numbers.
type state struct {
	// FixedWindow: a = window index, b = count.
	// SlidingWindow: a = window index, b = current count, c = previous count.
	// TokenBucket: a = scaled tokens, b = last refill (µs).
	// GCRA: a = TAT whole µs, b = TAT fraction (in 1/r µs).
	a, b, c int64
	log     *timeLog // SlidingLog; nil until the key's first allowed check
	expires int64    // µs; the state is absent from this instant on
}

// outcome is the raw result of evaluating one check, in µs.
type outcome struct {
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
}

func (o outcome) result(capacity int64) Result {
	return Result{
		Allowed:    o.allowed,
		Limit:      capacity,
		Remaining:  max(o.remaining, 0),
		RetryAfter: time.Duration(o.retry) * time.Microsecond,
		ResetAfter: time.Duration(o.reset) * time.Microsecond,
	}
}

// eval evaluates p against s at now. exists says whether s holds stored
// state (an absent key is full capacity). With commit, an allowed check
// updates s; a denied check never changes s.
func (s *state) eval(p *prepared, now int64, exists, commit bool) outcome {
	switch p.alg {
	case FixedWindow:
		return s.fixedWindow(p, now, exists, commit)
	case SlidingLog:
		return s.slidingLog(p, now, exists, commit)
	case SlidingWindow:
		return s.slidingWindow(p, now, exists, commit)
	case TokenBucket:
		return s.tokenBucket(p, now, exists, commit)
	default:
		return s.gcra(p, now, exists, commit)
	}
}

// ceilDiv returns ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
