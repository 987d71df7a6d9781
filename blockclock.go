package redlimit

import (
	"sync/atomic"
	"time"
)

// The clock of quota blocks. Every instant a block machinery keeps (when a
// block's window ends, when its hold ends, until when an epoch holds) is a
// reading of this clock, ns since a base far in the past, so that no
// reading is 0 (Decide's "no clock": a peek) or negative.
//
// time.Now's monotonic reading never goes back. An injected Config.Now
// may: read after a step back, a block's end would lie later than the
// store's, and the block would be used past its window. So with an
// injected clock every reading is checked against the latest one returned
// (hw, loaded before the clock is read: a reading is compared only with
// readings made before it), and a reading below it starts a new era: the
// blocks and epochs of an earlier era are never used again (the sweeper
// gives the blocks' rest back; their window, by the store's clock, decides
// whether anything comes back), and a key's other instants are ignored
// when they lie further ahead than they can (see takeLocal).

// clockBase is how far before the first reading the clock starts: 2^61 ns,
// 73 years, so that a clock stepping back stays positive.
const clockBase = 1 << 61

// blockClock is the blocks' time.
type blockClock struct {
	now      func() time.Time
	base     time.Time
	injected bool         // Config.Now was given: it may step back
	hw       atomic.Int64 // the latest reading returned (injected clocks)
	era      atomic.Int64 // steps back seen
}

func (c *blockClock) init(now func() time.Time, injected bool) {
	c.now, c.injected = now, injected
	c.base = now().Add(-clockBase)
	c.hw.Store(clockBase)
}

// clock returns the blocks' time, in ns since base. With an injected
// clock it starts a new era when the reading lies before the latest
// reading returned (load the era after the reading: instant); within an
// era it never returns less than a reading returned before this call
// began.
func (c *blockClock) clock() int64 {
	if !c.injected {
		return int64(c.now().Sub(c.base))
	}
	hw := c.hw.Load() // stored after its reading: that reading came before this one
	t := int64(c.now().Sub(c.base))
	if t < hw {
		c.era.Add(1) // before hw moves back: a reading that sees the new hw sees the new era
		c.hw.CompareAndSwap(hw, t)
		return t
	}
	for t > hw {
		if c.hw.CompareAndSwap(hw, t) {
			return t
		}
		hw = c.hw.Load()
	}
	// Another reading stored hw >= t meanwhile. Whether it was made after
	// this one or before a step back cannot be told: hw is a reading made
	// before this call returns, so it is as good as t, and it keeps the
	// readings returned in order (a step back is seen by the next reading).
	return hw
}

// instant returns the blocks' time and its era.
func (c *blockClock) instant() (int64, int64) {
	t := c.clock()
	return t, c.era.Load()
}

// within reports whether until, an instant of the era of now, lies after
// now by at most d: an instant further ahead is of an era before a step
// back of the clock, and ignored.
func within(now, until, d int64) bool {
	return now < until && until-now <= d
}
