package admin

import (
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// summary is a Space-Saving summary (Metwally, Agrawal, El Abbadi, 2005)
// of a stream of keys: it counts up to k keys in fixed memory, and every
// key seen more than n/k times of n is among them. A key that arrives
// when all k slots are taken replaces the key of the smallest count m and
// starts at m+1, m being its possible overcount (err).
//
// Counting one key is O(1) and allocates nothing: the slots are kept
// sorted by count, ascending, in runs of equal counts (buckets); an
// increment swaps the key to the end of its run and moves it into the
// next run. An open-addressing table (linear probing, backward-shift
// deletion) maps a key to its slot. Keys are kept by reference: the
// engine's storage keys come from its key cache, so the summary holds
// strings that exist anyway.
//
// A summary is not safe for concurrent use; see heavy.
type summary struct {
	seed   maphash.Seed
	keys   []string
	hashes []uint64
	count  []uint64
	err    []uint64
	bucket []int32 // slot -> its bucket
	tpos   []int32 // slot -> its index in table, -1 when empty
	table  []int32 // slot+1, 0 for none
	mask   uint64

	bLo, bHi []int32  // slots of each bucket: [lo, hi]
	bCount   []uint64 // the count of each bucket's slots
	free     []int32  // buckets not in use

	total uint64 // the sum of the counts
	shift uint   // each count stands for 2^shift occurrences (see heavy)
}

func newSummary(k int, seed maphash.Seed) *summary {
	size := 1
	for size < 2*k {
		size *= 2
	}
	s := &summary{
		seed:   seed,
		keys:   make([]string, k),
		hashes: make([]uint64, k),
		count:  make([]uint64, k),
		err:    make([]uint64, k),
		bucket: make([]int32, k),
		tpos:   make([]int32, k),
		table:  make([]int32, size),
		mask:   uint64(size - 1),
		bLo:    make([]int32, k),
		bHi:    make([]int32, k),
		bCount: make([]uint64, k),
		free:   make([]int32, 0, k),
	}
	s.clear()
	return s
}

// clear empties s: every slot in one bucket of count 0.
func (s *summary) clear() {
	k := len(s.keys)
	clear(s.keys)
	clear(s.count)
	clear(s.err)
	clear(s.bucket) // bucket 0
	clear(s.table)
	for i := range s.tpos {
		s.tpos[i] = -1
	}
	s.bLo[0], s.bHi[0], s.bCount[0] = 0, int32(k-1), 0
	s.free = s.free[:0]
	for b := k - 1; b >= 1; b-- {
		s.free = append(s.free, int32(b))
	}
	s.total, s.shift = 0, 0
}

// halve halves every count and error, forgetting the keys whose count
// drops to 0, and doubles what a count stands for: O(k), once the counts
// sum to sampleLimit.
func (s *summary) halve() {
	s.shift++
	s.total = 0
	k := len(s.keys)
	for i := range k {
		s.count[i] /= 2
		s.err[i] /= 2
		s.total += s.count[i]
		if s.count[i] == 0 && s.keys[i] != "" {
			s.unlink(int32(i))
			s.keys[i] = ""
			s.err[i] = 0
		}
	}
	// Rebuild the runs of equal counts (still sorted: halving keeps the
	// order).
	s.free = s.free[:0]
	b := int32(-1)
	for i := range k {
		if b < 0 || s.bCount[b] != s.count[i] {
			b++
			s.bLo[b], s.bCount[b] = int32(i), s.count[i]
		}
		s.bHi[b] = int32(i)
		s.bucket[i] = b
	}
	for f := int32(k - 1); f > b; f-- {
		s.free = append(s.free, f)
	}
}

// add counts one occurrence of key.
func (s *summary) add(key string) {
	s.total++
	h := maphash.String(s.seed, key)
	i := h & s.mask
	for {
		t := s.table[i]
		if t == 0 {
			break
		}
		if slot := t - 1; s.hashes[slot] == h && s.keys[slot] == key {
			s.increment(slot)
			return
		}
		i = (i + 1) & s.mask
	}
	// New key: it takes slot 0, of the smallest count.
	if s.keys[0] != "" {
		s.unlink(0)
		i = h & s.mask // the deletion may have moved entries
		for s.table[i] != 0 {
			i = (i + 1) & s.mask
		}
	}
	s.keys[0], s.hashes[0], s.err[0] = key, h, s.count[0]
	s.table[i], s.tpos[0] = 1, int32(i)
	s.increment(0)
}

// unlink removes slot's key from the table (backward-shift deletion:
// Knuth's Algorithm R for linear probing, no tombstones).
func (s *summary) unlink(slot int32) {
	i := uint64(s.tpos[slot]) // the hole
	s.tpos[slot] = -1
	for j := (i + 1) & s.mask; s.table[j] != 0; j = (j + 1) & s.mask {
		t := s.table[j]
		home := s.hashes[t-1] & s.mask
		// An entry whose home lies cyclically in (i, j] stays.
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		s.table[i] = t
		s.tpos[t-1] = int32(i)
		i = j
	}
	s.table[i] = 0
}

// increment adds one to the count of slot.
func (s *summary) increment(slot int32) {
	b := s.bucket[slot]
	hi := s.bHi[b]
	if slot != hi {
		s.swap(slot, hi)
	}
	c := s.bCount[b] + 1
	s.count[hi] = c
	next := int32(-1)
	if int(hi)+1 < len(s.keys) {
		next = s.bucket[hi+1]
	}
	joins := next >= 0 && s.bCount[next] == c
	switch {
	case s.bLo[b] == hi && joins: // b empties; hi joins next
		s.bLo[next] = hi
		s.bucket[hi] = next
		s.free = append(s.free, b)
	case s.bLo[b] == hi: // b keeps hi alone, one higher
		s.bCount[b] = c
	case joins:
		s.bHi[b] = hi - 1
		s.bLo[next] = hi
		s.bucket[hi] = next
	default:
		s.bHi[b] = hi - 1
		n := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		s.bLo[n], s.bHi[n], s.bCount[n] = hi, hi, c
		s.bucket[hi] = n
	}
}

// swap exchanges the keys of slots a and b, which are in one bucket.
func (s *summary) swap(a, b int32) {
	s.keys[a], s.keys[b] = s.keys[b], s.keys[a]
	s.hashes[a], s.hashes[b] = s.hashes[b], s.hashes[a]
	s.count[a], s.count[b] = s.count[b], s.count[a]
	s.err[a], s.err[b] = s.err[b], s.err[a]
	s.tpos[a], s.tpos[b] = s.tpos[b], s.tpos[a]
	if s.tpos[a] >= 0 {
		s.table[s.tpos[a]] = a + 1
	}
	if s.tpos[b] >= 0 {
		s.table[s.tpos[b]] = b + 1
	}
}

// entry is one counted key.
type entry struct {
	Key   string
	Count uint64 // at most Err too many
	Err   uint64
}

// top appends s's keys to out, highest count first.
// Counts and errors are scaled by what a count stands for.
func (s *summary) top(out []entry) []entry {
	for i := len(s.keys) - 1; i >= 0; i-- {
		if s.keys[i] != "" {
			out = append(out, entry{Key: s.keys[i], Count: s.count[i] << s.shift, Err: s.err[i] << s.shift})
		}
	}
	return out
}

// heavy is the heavy hitters of one rule's keys over the last one to two
// generations: two summaries, the current one counting, the previous one
// kept for reading, swapped by rotate.
//
// It samples adaptively, so that a busy rule does not pay for a summary
// update (and its mutex) on every decision: a generation counts every
// occurrence until its counts sum to sampleLimit (16384); then the summary is
// halved and from then on counts one occurrence in two, each standing
// for two, and so on (one in 2^shift). Below sampleLimit occurrences a
// minute (273 a second) the counts are exact; above, a key's count is an
// estimate whose relative error shrinks as its count grows.
type heavy struct {
	mu        sync.Mutex
	cur, prev *summary
	shift     atomic.Uint32 // cur.shift, read without the lock
}

// sampleLimit is the sum of a summary's counts at which it halves.
const sampleLimit = 1 << 14

func newHeavy(k int, seed maphash.Seed) *heavy {
	return &heavy{cur: newSummary(k, seed), prev: newSummary(k, seed)}
}

func (h *heavy) add(key string) {
	if s := h.shift.Load(); s > 0 && rand.Uint64()&(1<<s-1) != 0 {
		return
	}
	h.mu.Lock()
	h.cur.add(key)
	if h.cur.total >= sampleLimit {
		h.cur.halve()
		h.shift.Store(uint32(h.cur.shift))
	}
	h.mu.Unlock()
}

// rotate starts a new generation.
func (h *heavy) rotate() {
	h.mu.Lock()
	h.cur, h.prev = h.prev, h.cur
	h.cur.clear()
	h.shift.Store(0)
	h.mu.Unlock()
}

// entries appends the keys of both generations to out: a key in both is
// there twice (see mergeEntries).
func (h *heavy) entries(out []entry) []entry {
	h.mu.Lock()
	out = h.cur.top(out)
	out = h.prev.top(out)
	h.mu.Unlock()
	return out
}
