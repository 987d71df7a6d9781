package contract

import "math/rand/v2"

// MaxLease is the largest lease id (algorithms.Check.Lease): ids must stay
// exact in the float64 numbers of Redis Lua.
const MaxLease = 1<<52 - 1

// NewLease returns a random lease id, from 1 to [MaxLease], for the
// Check.Lease of a Concurrency check.
func NewLease() uint64 { return 1 + rand.Uint64N(MaxLease) }
