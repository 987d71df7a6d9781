package denycache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlimit/redlimit/algorithms"
)

var _ algorithms.Resetter = (*Cache)(nil)

// Reset implements [algorithms.Resetter]: it resets keys in the Backend
// behind d, then forgets the denials d remembers for them, so that the
// next call of each key is decided by that Backend, at once. A call to it
// that began before the reset records no denial (it may have been decided
// before the reset). When the Backend behind d is no Resetter, Reset
// forgets the denials and returns an error matching
// [errors.ErrUnsupported].
//
// Reset forgets only this Cache's denials: another process's cache in
// front of the same store keeps denying a key it recorded as denied
// until that denial's RetryAfter has passed (see [Cache], "Reset").
func (d *Cache) Reset(ctx context.Context, keys []string) error {
	var err error
	if r, ok := d.next.(algorithms.Resetter); ok {
		err = r.Reset(ctx, keys)
	} else {
		err = &algorithms.BackendError{Backend: "denycache", Err: fmt.Errorf("%w: the Backend behind the cache (%T) cannot reset keys", errors.ErrUnsupported, d.next)}
	}
	for _, key := range keys {
		d.drop(key)
	}
	return err
}

// drop forgets what the cache holds for key: after a reset or a refund,
// the key may be allowed at once.
func (d *Cache) drop(key string) {
	sh := d.shard(key)
	sh.mu.Lock()
	if _, ok := sh.entries[key]; ok {
		delete(sh.entries, key)
		d.held.Add(-1)
	}
	// under the lock: a record of this shard that checks the count
	// afterwards sees it changed
	d.resets.Add(1)
	sh.mu.Unlock()
}
