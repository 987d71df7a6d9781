package redlimit

import (
	"context"
	"sync/atomic"

	"github.com/redlimit/redlimit/algorithms"
)

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

// positional names the Inputs of in that name no rule after e's rules, in
// rule order: the tests write a request's Inputs in rule order.
func (e *Limiter) positional(in []Input) []Input {
	named := true
	for i := range in {
		named = named && in[i].Rule != ""
	}
	if named {
		return in
	}
	out := append([]Input(nil), in...)
	for i := range out {
		if out[i].Rule == "" && i < len(e.rules) {
			out[i].Rule = e.rules[i].Name
		}
	}
	return out
}

// PeekInputs is peekInputs (Peek of Inputs keyed by rule name), which the
// admin page and the chaos harness reach through internal/bridge.
func (e *Limiter) PeekInputs(ctx context.Context, in []Input, d *Decision) {
	e.peekInputs(ctx, e.positional(in), d)
}

// ResetInputs is resetInputs (Reset of Inputs keyed by rule name), which
// the admin page and the chaos harness reach through internal/bridge.
func (e *Limiter) ResetInputs(ctx context.Context, in []Input) error {
	return e.resetInputs(ctx, e.positional(in))
}

// WaitInputs is waitInputs (WaitN of Inputs keyed by rule name).
func (e *Limiter) WaitInputs(ctx context.Context, in []Input) error {
	if err := e.noLeases("WaitN"); err != nil {
		return err
	}
	var d Decision
	return e.waitInputs(ctx, e.positional(in), &d)
}

// Leases returns the leases of the slots d holds.
func Leases(d *Decision) []algorithms.Lease { return d.leases() }

// Holds reports whether d holds slots of concurrency rules.
func Holds(d *Decision) bool { return d.hold != nil }
