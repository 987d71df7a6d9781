package engine

import (
	"context"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
)

// Epochs of fixed window keys with quota blocks. A reset must not let the
// blocks taken before it count again: another instance giving back what
// its block did not use would give it to the fresh count (its refund
// marker lives in a sibling key that a reset does not delete). So a key
// with blocks carries an epoch, "<key>:e<n>" (epoch 0 is the key itself),
// and a reset moves every instance to the next epoch's key instead of
// deleting the current one: the refunds of earlier blocks go to the
// abandoned key, harmless.
//
// The epoch lives in a sibling counter, "<key>:epoch" (same hash slot), a
// fixed window of the rule's windows with a capacity of 2^40: every block
// call charges it 1, a reset charges it epochStep, so that its count is
// epochStep × resets + blocks, and each block's reply tells its instance
// the epoch atomically with the block. A block taken in an epoch that has
// passed is never used; an instance that learns of a new epoch drops its
// blocks. The counter starts afresh with each window, as the key's count
// does.

// epochStep is what a reset adds to the epoch counter: a window holds at
// most 2^34 block calls of a key and 63 resets.
const epochStep = 1 << 34

// epochCap is the epoch counter's capacity.
const epochCap = 1 << 40

// epochKey is one epoch of a key: its number, its storage key, and until
// when (ns, the end of the window the epoch was learned in, at the
// latest) it holds: the epoch counter starts afresh with each window, so
// every instance is back at epoch 0 when the window ends.
type epochKey struct {
	n     int64
	key   string
	until int64
}

// epochAt returns the epoch of k at now, and its storage key.
func (k *blockKey) epochAt(now int64) (int64, string) {
	if ek := k.cur.Load(); ek.n == 0 || now < ek.until {
		return ek.n, ek.key
	}
	return 0, k.key
}

// epochLimit is the limit of the epoch counter of a key limited by limit:
// the same windows, a capacity no block call reaches.
func epochLimit(limit algorithms.Limit) algorithms.Limit {
	limit.Rate = epochCap
	return limit
}

// epochCheck is the check of the epoch counter of k charging cost.
func (k *blockKey) epochCheck(limit algorithms.Limit, cost int64) algorithms.Check {
	return algorithms.Check{Key: k.key + ":epoch", Algorithm: algorithms.FixedWindow, Limit: epochLimit(limit), Cost: cost}
}

// epochOf is the epoch an allowed reply of the epoch counter names.
func epochOf(r *algorithms.Result) int64 {
	return (epochCap - r.Remaining) / epochStep
}

// learn records that the store is at epoch n of k until (ns) at the
// latest: a new epoch drops the blocks of k (taken in an earlier one, or
// in an earlier window) without giving them back, and forgets what the
// store said of the old epoch's key.
func (k *blockKey) learn(n, until int64) {
	cur := k.cur.Load()
	if cur.n == n && cur.until >= until {
		return
	}
	key := k.key
	if n != 0 {
		key += ":e" + strconv.FormatInt(n, 10)
	}
	if !k.cur.CompareAndSwap(cur, &epochKey{n: n, key: key, until: until}) || cur.n == n {
		return
	}
	for i := range k.slots {
		if b := k.slots[i].Swap(nil); b != nil {
			b.retire()
		}
	}
	k.remoteUntil.Store(0)
	k.deniedUntil.Store(0)
}

// resetEpoch moves the key of rule br for the storage key key to its next
// epoch, in the store and here (see Engine.ResetInputs).
func (s *shared) resetEpoch(ctx context.Context, br *blockRule, key string, limit algorithms.Limit) error {
	sent := s.blocks.clock()
	k := br.key(key, sent)
	checks := []algorithms.Check{k.epochCheck(limit, epochStep)}
	results := make([]algorithms.Result, 1)
	if err := s.call(ctx, s.backend, checks, results); err != nil {
		return err
	}
	if !results[0].Allowed {
		return &algorithms.ConfigError{Field: "Reset", Reason: "the key " + quote(key) + " was reset 63 times in this window already"}
	}
	k.resets.Add(1)
	k.learn(epochOf(&results[0]), sent+int64(results[0].ResetAfter))
	return nil
}

// askEpoch asks the epoch counter of k, in the background, which epoch the
// store is at, after the store denied a check of k sent at sent. Another
// instance's reset moves the key to its next epoch, and this instance
// learns of it with its next block call; but a key whose last units go
// request by request (see prefetch) takes no blocks, and its checks would
// go on to the old key, denied, until the window ends: a reset that the
// other instances ignore. The answer moves the key to a newer epoch, never
// to an older one (an earlier question answered late). At most one
// question at a time per key, and one per quarter Hold: the key's checks
// are denied locally that long after a denial (see observe), so this adds
// at most one call to each check the store denies.
func (bs *blocks) askEpoch(br *blockRule, k *blockKey, limit algorithms.Limit, sent int64) {
	if sent < k.askAt.Load() || !k.asking.CompareAndSwap(false, true) {
		return
	}
	k.askAt.Store(sent + br.hold/4)
	select {
	case bs.sem <- struct{}{}: // with the fetches, bounded as they are
	default:
		k.asking.Store(false)
		return
	}
	bs.mu.Lock()
	if bs.close {
		bs.mu.Unlock()
		<-bs.sem
		k.asking.Store(false)
		return
	}
	bs.wg.Add(1)
	bs.mu.Unlock()
	resets := k.resets.Load()
	go func() {
		defer bs.wg.Done()
		defer func() { <-bs.sem }()
		defer k.asking.Store(false)
		s := bs.s
		if s.health != nil && s.health.down.Load() {
			return // epochs live in the primary only
		}
		ctx, cancel := bs.context()
		defer cancel()
		now := bs.clock()
		used, _ := k.epochAt(now)
		checks := []algorithms.Check{k.epochCheck(limit, 1)}
		results := make([]algorithms.Result, 1)
		if err := allow(ctx, s.backend, checks, results); err != nil {
			s.logError(err)
			return
		}
		r := &results[0]
		if k.resets.Load() != resets || r.Limit == 0 || !r.Allowed {
			return // this instance reset the key meanwhile: it knows
		}
		if n := epochOf(r); n > used {
			k.learn(n, now+int64(r.ResetAfter))
		}
	}()
}
