package denycache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlimit/redlimit/algorithms"
)

var _ algorithms.Refunder = (*Cache)(nil)

// Refund implements [algorithms.Refunder]: it passes the refunds to the
// Backend behind d, then forgets the denials d remembers for their keys,
// so that the next call of each key is decided by that Backend. A call
// to it that began before the refund records no denial.
//
// The cache never holds a denial that a refund may undo in the first
// place: a denial of a refundable check within the refund window of a
// commit of its key is [algorithms.Result.Provisional], which the cache
// does not remember; so another process's refund cannot make this cache
// deny what the store would allow. When the Backend behind d is no
// Refunder, Refund returns an error matching [errors.ErrUnsupported].
func (d *Cache) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	r, ok := d.next.(algorithms.Refunder)
	if !ok {
		return &algorithms.BackendError{Backend: "denycache", Err: fmt.Errorf("%w: the Backend behind the cache (%T) cannot refund", errors.ErrUnsupported, d.next)}
	}
	err := r.Refund(ctx, refunds)
	for i := range refunds {
		d.drop(refunds[i].Check.Key)
	}
	return err
}
