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
	// units are never given back. It returns a *[ConfigError] for what
	// [ValidateBlock] refuses.
	TakeBlock(ctx context.Context, c Check, hold time.Duration) (Result, error)
}

// MaxBlockHold is the longest hold of a block ([Blocker]).
const MaxBlockHold = 10 * time.Second

// ValidateBlock returns the error a [Blocker] returns for a block it
// cannot take: a *[ConfigError] when c is an invalid check ([ValidateCall]),
// not of [TokenBucket] or [GCRA], refundable, or when hold is not between
// 1µs and [MaxBlockHold]; nil otherwise.
func ValidateBlock(c Check, hold time.Duration) error {
	if err := ValidateCall([]Check{c}, []Result{{}}); err != nil {
		return err
	}
	switch {
	case c.Algorithm != TokenBucket && c.Algorithm != GCRA:
		return &ConfigError{Field: "Check.Algorithm", Reason: "must be token_bucket or gcra for a block, got " + c.Algorithm.String()}
	case c.RefundWindow != 0:
		return &ConfigError{Field: "Check.RefundWindow", Reason: "must be 0 for a block: its units are never given back"}
	case hold < time.Microsecond || hold > MaxBlockHold:
		return &ConfigError{Field: "hold", Reason: "must be between 1µs and 10s, got " + hold.String()}
	}
	return nil
}
