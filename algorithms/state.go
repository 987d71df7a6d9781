package algorithms

import "time"

// state is one key's stored state in the Memory backend. Its fields mirror the
// fields the Lua scripts keep in Redis, field for field, so that the two
// backends run the same arithmetic on the same numbers.
type state struct {
	// FixedWindow: a = window start (µs), b = count, c = window end (µs).
	// SlidingWindow: a = window start (µs), b = current count, c = previous
	// count, d = window end (µs).
	// TokenBucket: a = missing tokens in 1/b µs units (the time until full,
	// from c), b = the refill r they were counted in, c = last update (µs).
	// GCRA: a = TAT whole µs, b = TAT fraction, c = the r it is counted in
	// (1/c µs; 0 when b is 0).
	a, b, c, d int64
	log        *timeLog // SlidingLog; nil until the key's first allowed check
	expires    int64    // µs; the state is absent from this instant on
}

// outcome is the raw result of evaluating one check, in µs.
type outcome struct {
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
	// ttl is, when an evaluation that did not commit set the key's TTL (a
	// cut time-debt, see [bucketDebt]; a denied sliding log), that TTL in
	// µs, as the script sets it; 0 otherwise.
	ttl int64
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
