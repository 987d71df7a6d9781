package algorithms

import (
	"context"
	"time"
)

// Blocker is a Backend that takes quota blocks of [TokenBucket] and [GCRA]
// keys (an Engine's Rule.Blocks): units its caller answers checks from, in
// memory, for a short hold. memstore and redisstore implement it.
//
// A block of a window algorithm is a check of k units, given back in part
// with a refund ([Refunder]); a bucket's block cannot be a plain check,
// since a unit used later than it was charged may pass the bucket's bound
// (burst + rate × interval) by as much as the bucket refilled meanwhile.
type Blocker interface {
	Backend

	// TakeBlock takes c.Cost units of c's key, which its caller may use
	// from now until hold has passed, never later. The block is checked
	// at now, as a check of c.Cost units is (its Result is that check's),
	// and stored as if its units arrived when hold ends: the key's
	// time-debt becomes max(debt, hold) + the units' emission time. Every
	// later check so counts the block's units as late as they may come,
	// and whatever instants the caller uses them at, the units admitted
	// over any interval stay within burst + rate × interval. A block's
	// units are never given back. It returns a *[ConfigError] for an
	// invalid check, an algorithm other than TokenBucket or GCRA, a
	// refundable check, or a hold outside 1µs to 10s.
	TakeBlock(ctx context.Context, c Check, hold time.Duration) (Result, error)
}
