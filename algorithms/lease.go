package algorithms

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// InFlight returns the Limit of a [Concurrency] rule: at most n requests
// (n slots) of a key in flight at once. lease is how long a slot stays
// taken when nobody releases it: a process that dies mid-request gives
// its slots back after at most lease. A request that outlives its lease
// renews it ([Leaser]; the engine and the middleware do it for you), so
// choose a lease well above the time a renewal takes and below how long
// you accept to lose a slot to a crash: seconds to a minute.
func InFlight(n int64, lease time.Duration) Limit { return Limit{Rate: n, Period: lease} }

// MaxLease is the largest lease id: ids must stay exact in the float64
// numbers of Redis Lua.
const MaxLease = 1<<52 - 1

// NewLease returns a random lease id, from 1 to [MaxLease], for the
// [Check].Lease of a [Concurrency] check.
func NewLease() uint64 { return 1 + rand.Uint64N(MaxLease) }

// Lease names the slots an allowed [Concurrency] check took: the Check's
// Key, Lease and Cost, and its Limit.Period, by which a renewal extends
// the lease. See [Leaser].
type Lease struct {
	Key    string
	ID     uint64        // the Check's Lease
	Cost   int64         // the Check's Cost; 0 means 1
	Period time.Duration // the Check's Limit.Period
}

// ValidateLeases returns the error a [Leaser] returns for leases it
// cannot release or renew, before it stores anything: a *[ConfigError]
// when held (for Renew; nil for Release) is shorter than leases, a Key is
// empty, an ID is not from 1 to [MaxLease], a Cost is negative or above
// 10000, or, with held, a Period is not a whole number of microseconds
// from 1µs to 366 days; nil otherwise.
func ValidateLeases(leases []Lease, held []bool) error {
	if held != nil && len(held) < len(leases) {
		return &ConfigError{Field: "held", Reason: "must hold one bool per Lease, got " + itoa(int64(len(held))) + " for " + itoa(int64(len(leases)))}
	}
	for i := range leases {
		l := &leases[i]
		switch {
		case l.Key == "":
			return &ConfigError{Field: "Lease.Key", Reason: "must not be empty"}
		case l.ID == 0 || l.ID > MaxLease:
			return &ConfigError{Field: "Lease.ID", Reason: "must be 1 to 2^52-1, got " + strconv.FormatUint(l.ID, 10)}
		case l.Cost < 0 || l.Cost > maxConcurrency:
			return fieldErr("Lease.Cost", "must be 0 to 10000, got ", l.Cost)
		}
		if held != nil {
			if err := (Limit{Rate: 1, Period: l.Period}).Validate(Concurrency); err != nil {
				ce := *err.(*ConfigError)
				ce.Field = "Lease.Period"
				return &ce
			}
		}
	}
	return nil
}
