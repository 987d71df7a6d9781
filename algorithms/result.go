package algorithms

import "time"

// Result is the outcome of one [Check].
//
// When a Backend denies a request, nothing is consumed by any of its checks;
// each Result then describes its own check as if evaluated alone: Allowed
// says whether that check would have passed, Remaining and ResetAfter are
// those of the unchanged state.
//
// A denial with a zero RetryAfter means never: the check's cost is above
// the key's capacity (Limit), so no wait can let it through, and it
// consumed nothing. Tell it with
//
//	never := !r.Allowed && r.RetryAfter == 0
//
// The zero Result (Limit == 0) means the check was not evaluated: a deny
// cache (denycache) answered the call from a cached denial of another
// check. Callers leave such Results out of headers and reports.
type Result struct {
	// Allowed reports whether the check passed.
	Allowed bool

	// Provisional reports a denial that a refund may still undo. The
	// Redis backend (redisstore) on a cluster or Ring client reports it:
	// within the refund window of a call spanning hash slots that
	// committed units of this check's key, the call may yet be denied by
	// another slot and its units given back. Every backend reports it for
	// a check of a refundable call ([Check.RefundWindow]) denied within
	// the RefundWindow of a refundable commit of its key, which a
	// [Refunder] may still give back. Answer the request like any other
	// denial; a deny cache (denycache) does not remember it. Always false
	// when Allowed, and otherwise on memstore or a single Redis server.
	Provisional bool // next to Allowed (and Local): a Result is 64 bytes

	// Local reports a denial answered in process, without asking the
	// backend of record: a deny cache (denycache) repeating a denial it
	// remembers. Always false when Allowed, and for a backend's own
	// answers.
	Local bool

	// Limit is the capacity of the key: [Limit.Capacity].
	Limit int64

	// Remaining is how many units the key can still take right now, after
	// this check's cost when it was consumed. Never negative.
	Remaining int64

	// RetryAfter is how long until this check, repeated with the same cost
	// and no other traffic, would be allowed. Zero when Allowed. Zero on a
	// denial means retrying can never help: the cost exceeds Limit.
	RetryAfter time.Duration

	// ResetAfter is how long until the key is back to full capacity. Zero
	// when it is at full capacity now.
	ResetAfter time.Duration

	// Receipt names what an allowed refundable check consumed (see
	// [Check.RefundWindow]), for a later [Refunder.Refund]; the zero
	// Receipt otherwise.
	Receipt Receipt
}
