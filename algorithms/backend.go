package algorithms

import (
	"context"
	"time"
)

// Check is one question to a [Backend]: may Cost units be taken from the
// state at Key, limited by Limit under Algorithm?
type Check struct {
	// Key is the storage key, already namespaced and sanitised by the caller
	// (the middleware builds "<prefix>:<rule>:<algorithm>:{<key material>}").
	Key string

	// Algorithm and Limit say how the key is limited. They are normally the
	// same for every check of a key; a key whose limit changes (a user moving
	// to another tier, a redeploy with another Period) has its stored state
	// reinterpreted under the new limit, never locked for longer than the new
	// limit allows, and no Result claims more than the key's TTL:
	//
	//   - FixedWindow: the stored window's count counts until the stored
	//     window ends or the current window of the new Period ends,
	//     whichever comes first. A calendar quota's window counts the same
	//     way, whether the key moves to or from a calendar quota, or to
	//     another unit or zone: until the earlier of the two windows' ends.
	//   - SlidingWindow: each stored window's count goes to the window of
	//     the new Period in which it started (current, previous or none),
	//     until the stored state would have expired.
	//   - SlidingLog: the stored entries count under the new Period; a
	//     denial sets the key's TTL to what they need.
	//   - TokenBucket and GCRA keep the time until the bucket is full (its
	//     time-debt), cut to one full bucket of the new limit (Burst, or
	//     Rate, units of the new refill): moving to a faster tier waits one
	//     emission interval of it at most, and the two algorithms decide
	//     alike.
	Algorithm Algorithm
	Limit     Limit

	// Cost is how many units the request takes. 0 means 1; negative is
	// invalid. A cost above the key's capacity is denied with a zero
	// RetryAfter (see [Result]) and consumes nothing.
	Cost int64

	// Lease names the slots a [Concurrency] check takes, so that they can
	// be released and renewed ([Leaser]): an id from 1 to 2^52-1, unique
	// to the acquisition (draw one at random, as the limiter does); two acquisitions with one
	// id on one key share their slots, so a call retried after its reply
	// was lost takes them once (the second renews them). 0 lets the
	// backend draw one that
	// nobody knows: the slots are then held until their lease expires.
	// The other algorithms ignore it.
	Lease uint64
	// RefundWindow, when > 0, makes the check refundable: when the call
	// is allowed, the check's Result carries a [Receipt], and a
	// [Refunder] gives back up to Cost units of it until RefundWindow has
	// passed since the commit (see [Refunder]). 0, the usual case, makes
	// a check that can never be given back and costs the store nothing
	// more. Every check of a call shares the longest RefundWindow of the
	// call. Negative is invalid.
	RefundWindow time.Duration
}

// Backend decides checks and keeps their state.
//
// Allow evaluates all checks of one request atomically and all-or-nothing:
// if any check denies, no check consumes. It writes one Result per check into
// results, which must be at least as long as checks. A non-nil error means
// nothing was decided: a *[ConfigError] for an invalid call (checked
// before anything is stored: no checks, results shorter than checks, an
// empty or repeated Key, a Limit invalid for its Algorithm
// ([Limit.Validate]), a negative Cost), a *[BackendError] when the store
// failed.
//
// Implementations are safe for concurrent use, and Allow should return
// by its context's deadline (the limiter bounds it anyway). A Backend may also implement the capability
// interfaces [Resetter], [Leaser], [Refunder] and [Blocker].
//
// Time is kept in integer microseconds, and time going backwards never
// creates capacity. Every algorithm keeps its state in one key whose TTL
// is exactly the time until the key is back to full capacity
// ([Result].ResetAfter): a key that expires is indistinguishable from a key
// at full capacity, so expiry never changes a decision and nothing grows
// without bound. Both built-in stores compute with the same integer
// arithmetic (the sliding window counter alone uses one float64 weight,
// computed identically), and the conformance vectors in testdata/vectors
// are played against memstore, against redisstore on miniredis, on a real
// redis-server and on a Redis Cluster, and through the engine.
//
// # Writing a Backend
//
// A Backend validates each call (see Allow above) before it stores
// anything, fills one Result per Check, and reports store failures as a
// *[BackendError]. Wrappers (metrics, tracing, a circuit breaker) forward
// the capability interfaces of what they wrap when they keep its
// behaviour. The limiter calls a Backend of yours under its Timeout from
// a guard goroutine, behind a deny cache: what it leaves out only for the
// built-in stores that need neither (memstore decides in process; a
// redisstore whose client honours deadlines is called directly; a
// wrapper embedding a built-in store keeps that store's treatment).
type Backend interface {
	Allow(ctx context.Context, checks []Check, results []Result) error
}

// Resetter is implemented by a Backend that can forget the state of keys,
// so that they start afresh at full capacity: "unblock this customer".
// Reset removes every key of keys that exists and ignores the others; a
// non-nil error means some keys may not have been forgotten (a
// *[BackendError] when the store failed). Empty keys are ignored. Reset
// is safe for concurrent use with Allow: a call deciding a key at the same
// moment is decided either before the reset or after it.
//
// A wrapper (a deny cache) forgets what it holds for keys and forwards
// the call; it returns an error matching [errors.ErrUnsupported] when the
// Backend it wraps is no Resetter.
type Resetter interface {
	Backend
	Reset(ctx context.Context, keys []string) error
}

// Leaser is implemented by a Backend that can give back the slots of
// [Concurrency] checks before their lease expires, and extend their lease.
//
// Release frees the slots of leases, which must each name the Key, Lease
// id and Cost of an allowed Concurrency check; releasing a lease that was
// released already or has expired does nothing, so Release is idempotent.
// Renew extends the leases that are still held to expire Lease.Period
// from now (never sooner than they would have) and writes into held,
// which must be at least as long as leases, whether each one was: a lease
// that has expired (its slots may have gone to others since) or was
// released is not brought back. Both are safe for concurrent use with
// Allow; a non-nil error (a *[BackendError] when the store failed, a
// *[ConfigError] for an invalid lease) means some leases may not have been
// released or renewed.
//
// A wrapper (a deny cache) forwards both, and returns an error matching
// [errors.ErrUnsupported] when the Backend it wraps is no Leaser.
type Leaser interface {
	Backend
	Release(ctx context.Context, leases []Lease) error
	Renew(ctx context.Context, leases []Lease, held []bool) error
}
