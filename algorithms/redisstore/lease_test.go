package redisstore_test

import (
	"context"

	"github.com/redlimit/redlimit/algorithms"
)

// finalResults forwards releases and renewals (the vectors' lease steps).

func (f finalResults) Release(ctx context.Context, leases []algorithms.Lease) error {
	return f.Backend.(algorithms.Leaser).Release(ctx, leases)
}

func (f finalResults) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	return f.Backend.(algorithms.Leaser).Renew(ctx, leases, held)
}
