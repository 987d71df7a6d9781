package calc

// State is one key's stored state in an in-process store. Its fields mirror
// the fields the Lua scripts keep in Redis, field for field, so that both
// backends run the same arithmetic on the same numbers. The zero State is a
// key at full capacity.
type State struct {
	// FixedWindow: a = window start (µs), b = count, c = window end (µs).
	// SlidingWindow: a = window start (µs), b = current count, c = previous
	// count, d = window end (µs).
	// TokenBucket: a = missing tokens in 1/b µs units (the time until full,
	// from c), b = the refill r they were counted in, c = last update (µs),
	// d = the Tau of the limit that wrote them.
	// GCRA: a = TAT whole µs, b = TAT fraction, c = the r it is counted in
	// (1/c µs; 0 when b is 0), d = the Tau of the limit that wrote it.
	a, b, c, d int64
	set        *sets // SlidingLog, Concurrency; nil until the key's first allowed check
}

// sets holds the members of a sorted-set key: the sliding log's stamps,
// or the concurrency slots. A key is of one algorithm (the algorithm is
// part of its storage key), so it uses one of the two; one pointer for
// both keeps every other key 8 bytes smaller.
type sets struct {
	log   timeLog
	slots slotSet
}

// Outcome is the raw result of evaluating one check, in µs.
type Outcome struct {
	Allowed   bool
	Remaining int64 // may be negative (sliding window); callers clamp at 0
	Retry     int64
	Reset     int64
	// TTL is, when an evaluation that did not commit set the key's TTL (a
	// cut time-debt, see [bucketDebt]; a denied sliding log), that TTL in
	// µs, as the script sets it; 0 otherwise.
	TTL int64
}

// Eval evaluates p against s at now. exists says whether s holds stored
// state (an absent key is full capacity). With commit, an allowed check
// updates s; a denied check changes s only to store a cut time-debt
// (Outcome.TTL > 0).
func (s *State) Eval(p *Params, now int64, exists, commit bool) Outcome {
	switch p.Alg {
	case FixedWindow:
		return s.fixedWindow(p, now, exists, commit)
	case SlidingLog:
		return s.slidingLog(p, now, exists, commit)
	case SlidingWindow:
		return s.slidingWindow(p, now, exists, commit)
	case TokenBucket:
		return s.tokenBucket(p, now, exists, commit)
	case Calendar:
		return s.calendar(p, now, exists, commit)
	case Concurrency:
		return s.concurrency(p, now, exists, commit)
	default:
		return s.gcra(p, now, exists, commit)
	}
}

// CeilDiv returns ⌈a/b⌉ for a >= 0, b > 0.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
