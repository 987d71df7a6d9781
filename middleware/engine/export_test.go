package engine

// MaxStalled is maxStalled, for the tests of the bound on abandoned calls.
const MaxStalled = maxStalled

// SweepBlocks runs one pass of the quota blocks' sweeper now: the blocks
// whose time is up give their rest back before it returns.
func SweepBlocks(e *Engine) { e.s.blocks.sweep(false) }

// BlocksInFlight returns how many blocks are being taken.
func BlocksInFlight(e *Engine) int { return len(e.s.blocks.sem) }

// CrashBlocks makes e forget its quota blocks without giving anything
// back, as a process that dies would, and stops its sweeper.
func CrashBlocks(e *Engine) {
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
		for _, k := range br.keys {
			for i := range k.slots {
				if b := k.slots[i].Swap(nil); b != nil {
					b.retire()
				}
			}
		}
	}
}

// BlockUnits returns the units e's blocks of key hold.
func BlockUnits(e *Engine, key string) int64 {
	var n int64
	for _, br := range e.s.blocks.rules {
		br.mu.RLock()
		if k := br.keys[key]; k != nil {
			n += k.left()
		}
		br.mu.RUnlock()
	}
	return n
}
