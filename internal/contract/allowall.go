package contract

import (
	"context"

	"github.com/redlimit/redlimit/algorithms"
)

// AllowAll is a Backend that allows everything and stores nothing, for
// tests of code that takes a Backend.
type AllowAll struct{}

var (
	_ algorithms.Resetter = AllowAll{}
	_ algorithms.Leaser   = AllowAll{}
)

// Allow fills results with allowed Results at full capacity.
func (AllowAll) Allow(_ context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	for i, c := range checks {
		capacity := c.Limit.Capacity(c.Algorithm)
		results[i] = algorithms.Result{Allowed: true, Limit: capacity, Remaining: capacity}
	}
	return nil
}

// Release does nothing: AllowAll stores nothing.
func (AllowAll) Release(context.Context, []algorithms.Lease) error { return nil }

// Renew reports every lease held: AllowAll holds them all.
func (AllowAll) Renew(_ context.Context, leases []algorithms.Lease, held []bool) error {
	for i := range leases {
		held[i] = true
	}
	return nil
}

// Reset does nothing: AllowAll stores nothing.
func (AllowAll) Reset(context.Context, []string) error { return nil }
