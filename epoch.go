package redlimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
)

// Epochs of fixed window keys with quota blocks. A reset must not let the
// blocks taken before it count again: another instance giving back what
// its block did not use would give it to the fresh count (its refund
// marker lives in a sibling key that a reset does not delete). So a key
// with blocks carries an epoch, "<key>:e<n>" (epoch 0 is the key itself),
// and a reset moves every instance to the next epoch's key instead of
// deleting the current one, and closes the key it leaves: in the same
// atomic call it charges that key 2^39 units, far beyond any capacity
// (a fixed window rule with blocks has a capacity below 2^39), so that
// nothing given back to it, by an instance that has not seen the reset or
// by anyone, is ever admitted again. An instance still on the closed key
// is denied there, asks the store which epoch it is at (askEpoch, or its
// block call's refresh), and moves on.
//
// The epoch lives in counters, sibling keys in the key's hash slot, fixed
// windows of the rule's own windows, so that every key is back at epoch 0
// when its window ends:
//
//   - "<key>:epoch" names epochs 0 to 63 as its count divided by 2^34
//     (the format of the release before: its instances added 2^34 per
//     reset and 1 per block call, which this one reads and writes alike,
//     so that both can share keys in a rolling deploy);
//   - past epoch 63, "<key>:epoch<j>" (j = 1, 2, ...) each count up to
//     epochChunk (2^40) resets: epoch 63 + (j-1)·2^40 + count of the
//     first one not full. No reset is ever refused for their number.
//
// A reset is one atomic call: a guard check of the counter that names
// the epoch n the resetting instance believes current, which passes only
// while the store is at n and moves it to n+1, and the charge that closes
// n's key. If another reset came first, the guard denies, nothing is
// written, and the instance reads the epoch and tries again.

const (
	epochStep   = 1 << 34 // what a reset adds to the first counter
	v1Epochs    = 63      // the last epoch the first counter names
	epochCap    = 1 << 40 // the first counter's capacity, the largest a Limit has
	exhaustCost = 1 << 39 // what a reset charges the key of the epoch it ends

	// maxEpochCapacity is the largest capacity of a fixed window rule with
	// blocks: a closed key (charged exhaustCost) stays above it whatever
	// is given back to it.
	maxEpochCapacity = exhaustCost - 1

	maxResetTries = 32 // resets of one key racing: each try loses to one
)

// epochChunk is how many resets each counter past the first holds. A
// variable so that the tests can cross counters; the stored format is
// 2^40.
var epochChunk int64 = epochCap

// epochKey is one epoch of a key: its number, its storage key, until when
// (ns, the end of the window the epoch was learned in, at the latest) it
// holds, and the era of the blocks' clock that instant is of (see
// blockclock.go): the counters start afresh with each window, so every
// instance is back at epoch 0 when the window ends.
type epochKey struct {
	n     int64
	key   string
	until int64
	era   int64
}

// epochAt returns the epoch ek names at now, of era: 0 once it has ended.
func (ek *epochKey) epochAt(now, era int64) int64 {
	if ek.n != 0 && ek.era == era && now < ek.until {
		return ek.n
	}
	return 0
}

// epochAt returns the epoch of k at now, a reading of the blocks' clock
// made before this call, and its storage key.
func (k *blockKey) epochAt(now int64) (int64, string) { return k.epochIn(now, k.clk.era.Load()) }

// epochIn returns the epoch of k at now, of era, and its storage key.
func (k *blockKey) epochIn(now, era int64) (int64, string) {
	if ek := k.cur.Load(); ek.epochAt(now, era) != 0 {
		return ek.n, ek.key
	}
	return 0, k.key
}

// epochName is the storage key of epoch n of key.
func epochName(key string, n int64) string {
	if n == 0 {
		return key
	}
	return key + ":e" + strconv.FormatInt(n, 10)
}

// counterName is the storage key of k's epoch counter j.
func counterName(key string, j int64) string {
	if j == 0 {
		return key + ":epoch"
	}
	return key + ":epoch" + strconv.FormatInt(j, 10)
}

// counterCheck is a check of k's counter j: limit's windows, capacity
// rate, charging cost.
func counterCheck(key string, j int64, limit algorithms.Limit, rate, cost int64) algorithms.Check {
	limit.Rate, limit.Burst = rate, 0
	return algorithms.Check{Key: counterName(key, j), Algorithm: algorithms.FixedWindow, Limit: limit, Cost: cost}
}

// counterOf returns the counter that moves epoch n to n+1, and what it
// holds at n: for n < 63 the first counter, at 2^34·n (plus block calls of
// the release before); past it counter j at c.
func counterOf(n int64) (j, c int64) {
	if n < v1Epochs {
		return 0, n * epochStep
	}
	return (n-v1Epochs)/epochChunk + 1, (n - v1Epochs) % epochChunk
}

// guardCheck is the check, of the counter that names epoch n, that passes
// only while the store is at n and moves it to n+1.
func guardCheck(key string, n int64, limit algorithms.Limit) algorithms.Check {
	j, c := counterOf(n)
	if j == 0 {
		// count < 2^34·(n+1) (block calls of the release before below
		// 2^34), then + 2^34
		return counterCheck(key, 0, limit, epochStep*(n+2)-1, epochStep)
	}
	return counterCheck(key, j, limit, c+1, 1)
}

// closeCheck is the check that closes the key of epoch n: 2^39 units, far
// beyond any capacity of a rule with blocks, which no refund undoes.
func closeCheck(key string, n int64, limit algorithms.Limit) algorithms.Check {
	limit.Rate, limit.Burst = epochCap, 0
	return algorithms.Check{Key: epochName(key, n), Algorithm: algorithms.FixedWindow, Limit: limit, Cost: exhaustCost}
}

// denier is a check that always denies and writes nothing: a key never
// written, in k's hash slot, asked for more than its capacity. A call
// holding it reads the state of its other checks and consumes nothing.
func denier(key string) algorithms.Check {
	return algorithms.Check{Key: key + ":peek", Algorithm: algorithms.GCRA, Limit: peekLimit, Cost: 2}
}

// epochCall asks the primary, not the deny cache in front of it, about an
// epoch counter, under Config.Timeout: a guard's denial must never be
// cached, nor any denial answer a read of a counter.
func (s *shared) epochCall(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if s.timeout < 0 {
		return allow(ctx, s.primary, checks, results)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.bounded(ctx, s.primary, checks, results)
}

// readEpoch asks the store which epoch of key (limited by limit) it is
// at, consuming nothing, and until when (ns of the blocks' clock, of era)
// that epoch holds at the latest.
func (s *shared) readEpoch(ctx context.Context, key string, limit algorithms.Limit) (n, until, era int64, err error) {
	sent, era := s.blocks.instant()
	checks := []algorithms.Check{
		counterCheck(key, 0, limit, epochCap, 1),
		counterCheck(key, 1, limit, epochChunk, 1),
		denier(key),
	}
	results := make([]algorithms.Result, len(checks))
	if err := s.epochCall(ctx, checks, results); err != nil {
		return 0, 0, era, err
	}
	if results[0].Limit == 0 || results[1].Limit == 0 {
		return 0, 0, era, engineErr(errors.New("the store did not evaluate the epoch counters of " + quote(key)))
	}
	until = sent + int64(results[0].ResetAfter)
	if r0 := (epochCap - results[0].Remaining) / epochStep; r0 < v1Epochs {
		return r0, until, era, nil
	}
	for j := int64(1); ; j++ {
		// A reading of the counter as if alone: Remaining = capacity - count.
		if count := epochChunk - results[1].Remaining; count < epochChunk {
			return v1Epochs + (j-1)*epochChunk + count, until, era, nil
		}
		checks = []algorithms.Check{counterCheck(key, j+1, limit, epochChunk, 1), denier(key)}
		if err := s.epochCall(ctx, checks, results); err != nil {
			return 0, 0, era, err
		}
		if results[0].Limit == 0 {
			return 0, 0, era, engineErr(errors.New("the store did not evaluate the epoch counters of " + quote(key)))
		}
		results[1] = results[0]
	}
}

// learn records that the store is at epoch n of k until (ns, of era) at
// the latest: a new epoch drops the blocks of k (taken in an earlier one,
// or in an earlier window) without giving them back, and forgets what the
// store said of the old epoch's key. An epoch other than 0 pins k (see
// keyTable.pin).
//
// The blocks are kept only when k uses epoch n already: an epoch learnt
// in an earlier window has ended (k is back at epoch 0, and its blocks are
// of epoch 0's key), even if it bears the number n.
func (br *blockRule) learn(k *blockKey, n, until, era int64) {
	cur := k.cur.Load()
	if cur.n == n && cur.era == era && cur.until >= until {
		return
	}
	now, _ := br.bs.instant()
	if !k.cur.CompareAndSwap(cur, &epochKey{n: n, key: epochName(k.key, n), until: until, era: era}) {
		return
	}
	if n != 0 {
		br.keys.pin(k)
	}
	if cur.epochAt(now, era) == n {
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

// newer learns epoch n of k, read from the store, when it is newer than
// the one k uses at now (an answer never moves a key back: it may be late)
// and reports whether it was.
func (br *blockRule) newer(k *blockKey, n, until, era int64) bool {
	now, cur := br.bs.instant()
	if used, _ := k.epochIn(now, cur); era != cur || n <= used {
		return false
	}
	br.learn(k, n, until, era)
	return true
}

// resetEpoch moves the key of rule br for the storage key key to its next
// epoch, in the store and here, and closes the key it leaves (see
// Limiter.Reset).
func (s *shared) resetEpoch(ctx context.Context, br *blockRule, key string, limit algorithms.Limit) error {
	sent, era := s.blocks.instant()
	k := br.key(key, sent)
	br.keys.pin(k)
	n, _ := k.epochIn(sent, era) // a guess: a stale one is corrected below
	results := make([]algorithms.Result, 2)
	for try := 1; ; try++ {
		checks := []algorithms.Check{guardCheck(key, n, limit), closeCheck(key, n, limit)}
		if err := s.epochCall(ctx, checks, results); err != nil {
			return err
		}
		guard, closed := &results[0], &results[1]
		if guard.Allowed && closed.Allowed {
			k.resets.Add(1)
			br.learn(k, n+1, sent+int64(guard.ResetAfter), era)
			return nil
		}
		if guard.Limit == 0 || closed.Limit == 0 {
			return engineErr(errors.New("the store did not evaluate the reset of " + quote(key)))
		}
		if guard.Allowed {
			// the store is at n, but n's key holds more than any
			// capacity of a rule with blocks: a per-request limit
			// above 2^39 (LimitFunc)
			return fmt.Errorf("redlimit: reset of %s: the key of epoch %d holds more than 2^39 units; a fixed window rule with quota blocks must have a capacity below 2^39", quote(key), n)
		}
		if try == maxResetTries {
			return fmt.Errorf("redlimit: reset of %s: %d resets of the key by other instances came first; try again", quote(key), maxResetTries)
		}
		m, _, _, err := s.readEpoch(ctx, key, limit)
		if err != nil {
			return err
		}
		n = m
		sent, era = s.blocks.instant()
	}
}

// askEpoch asks the store, in the background, which epoch of k it is at,
// after it denied a check of k sent at sent. Another instance's reset
// moves the key to its next epoch and closes the old key, so this
// instance's checks of the old key are denied: the answer moves them to
// the new epoch, never to an older one (an earlier question answered
// late). At most one question at a time per key, and one per quarter
// Hold: the key's checks are denied locally that long after a denial (see
// observe), so this adds at most one call to each check the store denies.
func (bs *blocks) askEpoch(br *blockRule, k *blockKey, limit algorithms.Limit, sent int64) {
	if within(sent, k.askAt.Load(), br.hold/4) || !k.asking.CompareAndSwap(false, true) {
		return
	}
	if !br.keys.pin(k) {
		k.asking.Store(false)
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
		n, until, era, err := s.readEpoch(ctx, k.key, limit)
		if err != nil {
			s.logError(err)
			return
		}
		if k.resets.Load() != resets {
			return // this instance reset the key meanwhile: it knows
		}
		br.newer(k, n, until, era)
	}()
}

// peekEpochs moves the checks of a peek (s, built from in) of fixed window
// rules with blocks to the epoch the store is at, which this instance may
// not know (a reset by another instance, a process that has just
// started): one call per such rule before the peek's.
func (e *Limiter) peekEpochs(ctx context.Context, in []Input, s *scratch, d *Decision) {
	for j := range s.checks {
		i := s.index[j]
		br := e.rules[i].blocks
		if br == nil || !br.epochs {
			continue
		}
		key := e.rules[i].keys.key(in[i].Material)
		n, until, era, err := e.s.readEpoch(ctx, key, s.checks[j].Limit)
		if err != nil {
			continue // the peek asks the key this instance knows, and reports its own error
		}
		k := br.key(key, 0)
		br.newer(k, n, until, era)
		now, era := e.s.blocks.instant()
		_, s.checks[j].Key = k.epochIn(now, era)
		d.Rules[i].Key = s.checks[j].Key
	}
}
