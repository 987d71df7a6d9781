package algorithms

import (
	"context"
	"errors"
)

// ErrNotRefunded reports that a refund gave nothing back because there
// was nothing left to give: its commit was refunded already (a refund
// sent twice, or retried after a lost reply), or its refund window
// ([Check.RefundWindow]) had passed. The units the commit took stay
// charged until the key's state frees them, unless the first refund of a
// commit is what gave them back: a refund whose reply was lost and that
// the client sent again reports ErrNotRefunded, the answer of its second
// run, although its first run gave the units back (exactly once). Test
// for it with [errors.Is].
var ErrNotRefunded = errors.New("redlimit: nothing refunded: refunded already, or the refund window has passed")

// Receipt is what a refund needs to find exactly the units that an
// allowed refundable check consumed: it names the call's commit in the
// store, and the instant of the commit. The zero Receipt is no receipt.
// Receipts are comparable; treat them as opaque.
type Receipt struct {
	// Marker names the commit: a refund gives back only while the
	// store still holds it, and removes it, so that a commit is given
	// back at most once. The checks of one call share it (on Redis
	// Cluster and Ring, those of one hash slot or shard).
	Marker string

	// At is the commit's now on the store's clock, in µs since the Unix
	// epoch.
	At int64
}

// Refund is one check to give units back to.
type Refund struct {
	// Check is the check as it was decided: Key, Algorithm, Limit, Cost
	// and RefundWindow.
	Check Check

	// Result is the allowed Result the call gave the check, whose
	// ResetAfter and Receipt locate what the commit took.
	Result Result

	// Units is how many of the check's cost to give back: 0 to Cost (1
	// when Cost is 0).
	Units int64
}

// Refunder is implemented by a Backend that can give back units that a
// call it allowed consumed: "charge after the response", where a request
// reserves its full cost before the work and gives back what the
// outcome did not use.
//
// Refund gives back, for each refund, Units of the check's cost, exactly
// where the commit took them, at the store's current time:
//
//   - FixedWindow: from the count of the commit's window, while that
//     window is the key's current one; nothing once it has ended.
//   - SlidingLog: Units of the entries the commit stamped, while they
//     are in the log.
//   - SlidingWindow: from the count of the window the commit counted in,
//     the current or the previous one, while it still counts.
//   - TokenBucket and GCRA: Units of time-debt at the refund's now,
//     never above a full bucket, nor more than what is left of the
//     commit's own debt: what the bucket refilled since the commit is
//     not given back again, and the refunds of earlier commits of the
//     key, which moved its debt earlier, are counted (a refund record
//     per key, kept one full bucket's time after its last refund).
//
// So the key reads, as far as its algorithm can tell, as if the units had
// never been taken; refunds never create capacity. A bucket with more
// than 31 commits outstanding between refunded ones may get back less.
//
// A commit is given back at most once, whatever the retries: the
// refunds of one call's commit (one [Receipt.Marker]) must be given in
// one Refund call, and a second call for it, or one made after the
// check's RefundWindow, gives nothing back and returns an error matching
// [ErrNotRefunded], after every other refund was made. Refunds of
// several calls may share a Refund call. An invalid refund (an invalid
// Check, a Result without a Receipt, Units below 0 or above the cost, one
// key of one commit twice) is a *[ConfigError] and nothing is given back; a
// *[BackendError] means the store failed, and some refunds may have been
// made. A refund is atomic on its own, but not with its commit: between
// the two, the units count, and a concurrent call may be denied because
// of them (a denial of a refundable check then reports
// [Result.Provisional]).
//
// A wrapper (a deny cache) forgets the denials it holds for the keys and
// forwards the call; it returns an error matching
// [errors.ErrUnsupported] when the Backend it wraps is no Refunder.
type Refunder interface {
	Backend
	Refund(ctx context.Context, refunds []Refund) error
}
