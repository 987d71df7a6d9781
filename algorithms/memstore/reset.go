package memstore

import (
	"context"
	"hash/maphash"

	"github.com/redlimit/redlimit/algorithms"
)

var _ algorithms.Resetter = (*Store)(nil)

// Reset implements [algorithms.Resetter]: it removes the state of keys, so
// that each starts afresh at full capacity. Keys the Store does not hold
// are ignored. It never fails but for a context that has ended.
func (m *Store) Reset(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return &algorithms.BackendError{Backend: "memory", Err: err}
	}
	for _, key := range keys {
		h := maphash.String(m.seed, key)
		sh := &m.shards[h%memoryShards]
		sh.mu.Lock()
		sh.remove(h, key)
		sh.mu.Unlock()
	}
	return nil
}

// remove drops the slot of key (whose hash is h), if the shard holds it:
// the last slot takes its place, as in sweep.
func (sh *memoryShard) remove(h uint64, key string) {
	i, ok := sh.index[h]
	if !ok || sh.slots[i].key != key {
		return
	}
	last := int32(len(sh.slots) - 1)
	delete(sh.index, h)
	if i != last {
		sh.slots[i] = sh.slots[last]
		sh.index[sh.hash(int(i))] = i
	}
	sh.slots[last] = slot{}
	sh.slots = sh.slots[:last]
	if int(last) < sh.cursor {
		// the sweep pass under way had examined the slot that moved; it
		// now ends one slot earlier
		sh.cursor = int(last)
	}
}
