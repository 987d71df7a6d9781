package redlimit

import "sync/atomic"

// MaxStalled is maxStalled, for the tests of the bound on abandoned calls.
const MaxStalled = maxStalled

// SweepBlocks runs one pass of the quota blocks' sweeper now: the blocks
// whose time is up give their rest back before it returns.
func SweepBlocks(e *Limiter) { e.s.blocks.sweep(false) }

// BlocksInFlight returns how many blocks are being taken.
func BlocksInFlight(e *Limiter) int { return len(e.s.blocks.sem) }

// CrashBlocks makes e forget its quota blocks without giving anything
// back, as a process that dies would, and stops its sweeper.
func CrashBlocks(e *Limiter) {
	bs := e.s.blocks
	bs.mu.Lock()
	bs.close = true
	stop, done := bs.stop, bs.done
	bs.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	for _, br := range bs.rules {
		for _, k := range br.keys.pinned(nil) {
			for i := range k.slots {
				if b := k.slots[i].Swap(nil); b != nil {
					b.retire()
				}
			}
		}
	}
}

// BlockUnits returns the units e's blocks of key hold.
func BlockUnits(e *Limiter, key string) int64 {
	var n int64
	for _, br := range e.s.blocks.rules {
		if k := br.keys.lookup(key); k != nil {
			n += k.left()
		}
	}
	return n
}

// SetKeyHook makes f run inside the lookup of a key of a rule with
// blocks, between the lookup and the caching of what it found (nil: no
// hook).
func SetKeyHook(f func()) { setHook(&keyHook, f) }

// SetSweepHook makes f run for each key a sweep of the blocks visits.
func SetSweepHook(f func()) { setHook(&sweepHook, f) }

func setHook(h *atomic.Pointer[func()], f func()) {
	if f == nil {
		h.Store(nil)
		return
	}
	h.Store(&f)
}

// SetEpochChunk sets how many resets each epoch counter past the first
// holds, for the tests that cross counters, and returns a func that puts
// the stored format's back.
func SetEpochChunk(n int64) (restore func()) {
	old := epochChunk
	epochChunk = n
	return func() { epochChunk = old }
}
