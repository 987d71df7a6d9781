package denycache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlimit/redlimit/algorithms"
)

var _ algorithms.Leaser = (*Cache)(nil)

// Release implements [algorithms.Leaser]: it releases leases in the
// Backend behind d. A Cache never remembers a denial of a
// [algorithms.Concurrency] check (a slot may be released at any moment),
// so it has nothing to forget. When the Backend behind d is no Leaser,
// Release returns an error matching [errors.ErrUnsupported].
func (d *Cache) Release(ctx context.Context, leases []algorithms.Lease) error {
	l, err := d.leaser()
	if err != nil {
		return err
	}
	return l.Release(ctx, leases)
}

// Renew implements [algorithms.Leaser]: it renews leases in the Backend
// behind d, as Release does.
func (d *Cache) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	l, err := d.leaser()
	if err != nil {
		return err
	}
	return l.Renew(ctx, leases, held)
}

func (d *Cache) leaser() (algorithms.Leaser, error) {
	if l, ok := d.next.(algorithms.Leaser); ok {
		return l, nil
	}
	return nil, &algorithms.BackendError{Backend: "denycache", Err: fmt.Errorf("%w: the Backend behind the cache (%T) cannot release leases", errors.ErrUnsupported, d.next)}
}
