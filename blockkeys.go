package redlimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// The keys of a rule with quota blocks. A request looks its key up (the
// key it saw last, else a read lock of one of keyShards shards); the
// sweeper never walks them. Keys are forgotten by generations: every
// rotateEvery sweeps, each shard's current map becomes its old one and
// the old one is dropped, so a key not looked up for a whole generation
// (2 to 4 Holds) is forgotten in O(1), while a lookup that finds a key in
// the old map moves it back. A key whose state must outlive that (blocks
// held, an epoch other than 0, a block or an epoch question under way) is
// also pinned in a map of its own, live, which is all the sweeper visits:
// O(keys holding blocks or epochs), under live's mutex alone, which no
// lookup of a known key takes.

// keyShards spreads a rule's keys over maps with locks of their own.
const keyShards = 16

// rotateEvery is how many sweeps (Hold/2 each) a generation of keys lasts.
const rotateEvery = 4

// keyShard is one shard of a rule's keys.
type keyShard struct {
	mu  sync.RWMutex
	cur map[string]*blockKey // looked up in this generation
	old map[string]*blockKey // looked up in the previous one only
	_   [64]byte             // keep shards on separate cache lines
}

// keyTable is the keys of one rule with blocks.
type keyTable struct {
	clk    *blockClock
	seed   maphash.Seed
	gen    atomic.Uint64 // the generation: a key in last is valid while its gen is this
	last   atomic.Pointer[blockKey]
	shards [keyShards]keyShard

	liveMu sync.Mutex
	live   map[string]*blockKey // keys pinned: their state outlives generations
}

func (ks *keyTable) init(clk *blockClock) {
	ks.clk = clk
	ks.seed = maphash.MakeSeed()
	for i := range ks.shards {
		ks.shards[i].cur = make(map[string]*blockKey)
		ks.shards[i].old = make(map[string]*blockKey)
	}
	ks.live = make(map[string]*blockKey)
}

func (ks *keyTable) shard(key string) *keyShard {
	return &ks.shards[maphash.String(ks.seed, key)%keyShards]
}

// get returns the state of key, made on first use (lastFetch now).
func (ks *keyTable) get(key string, now int64) *blockKey {
	gen := ks.gen.Load()
	if k := ks.last.Load(); k != nil && k.key == key && k.gen.Load() == gen {
		return k
	}
	sh := ks.shard(key)
	sh.mu.RLock()
	k := sh.cur[key]
	sh.mu.RUnlock()
	if h := keyHook.Load(); h != nil {
		(*h)()
	}
	if k == nil {
		k = ks.find(sh, key, now)
	} else if k.gen.Load() != gen {
		// in cur, so not dropped before the generation after gen, whose
		// rotation changes gen first
		k.gen.Store(gen)
	}
	ks.last.Store(k)
	return k
}

// find returns the state of key that sh's current map lacks: from the old
// map (moved back), the pinned keys, or made afresh.
func (ks *keyTable) find(sh *keyShard, key string, now int64) *blockKey {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := sh.cur[key]
	if k == nil {
		if k = sh.old[key]; k != nil {
			delete(sh.old, key)
		}
	}
	if k == nil {
		ks.liveMu.Lock()
		k = ks.live[key]
		ks.liveMu.Unlock()
	}
	if k == nil {
		k = &blockKey{key: key, clk: ks.clk, lastFetch: now}
		k.cur.Store(&epochKey{key: key})
	}
	k.gen.Store(ks.gen.Load())
	sh.cur[key] = k
	return k
}

// lookup returns the state of key if it has one, without making it.
func (ks *keyTable) lookup(key string) *blockKey {
	sh := ks.shard(key)
	sh.mu.RLock()
	k := sh.cur[key]
	if k == nil {
		k = sh.old[key]
	}
	sh.mu.RUnlock()
	if k == nil {
		ks.liveMu.Lock()
		k = ks.live[key]
		ks.liveMu.Unlock()
	}
	return k
}

// pin keeps k, and what it holds, known to the sweeper until unpin finds
// it has nothing left to keep. It reports false when k is no longer the
// state of its key (forgotten while a request held it, and made afresh
// since): the caller then starts nothing on k.
func (ks *keyTable) pin(k *blockKey) bool {
	sh := ks.shard(k.key)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if o := sh.cur[k.key]; o != nil && o != k {
		return false
	}
	if o := sh.old[k.key]; o != nil && o != k {
		return false
	}
	ks.liveMu.Lock()
	defer ks.liveMu.Unlock()
	if o := ks.live[k.key]; o != nil && o != k {
		return false
	}
	ks.live[k.key] = k
	return true
}

// unpin forgets k from the pinned keys when keep, called under liveMu,
// reports that it has nothing to keep.
func (ks *keyTable) unpin(k *blockKey, keep func() bool) {
	ks.liveMu.Lock()
	defer ks.liveMu.Unlock()
	if ks.live[k.key] == k && !keep() {
		delete(ks.live, k.key)
	}
}

// pinned returns the pinned keys: what a sweep visits.
func (ks *keyTable) pinned(buf []*blockKey) []*blockKey {
	ks.liveMu.Lock()
	defer ks.liveMu.Unlock()
	for _, k := range ks.live {
		buf = append(buf, k)
	}
	return buf
}

// rotate starts a generation: keys not looked up in the last one are
// forgotten (the pinned ones stay known through live). The generation
// changes first, so that a key cached in last is not used once dropped.
func (ks *keyTable) rotate() {
	ks.gen.Add(1)
	for i := range ks.shards {
		sh := &ks.shards[i]
		sh.mu.Lock()
		sh.old, sh.cur = sh.cur, make(map[string]*blockKey)
		sh.mu.Unlock()
	}
}

// Seams for the tests of interleavings (export_test.go): keyHook runs in
// keyTable.get between its lookup and its caching of what it found, sweepHook
// for each key a sweep visits.
var keyHook, sweepHook atomic.Pointer[func()]
