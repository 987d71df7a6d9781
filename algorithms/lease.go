package algorithms

import "time"

// InFlight returns the Limit of a [Concurrency] rule: at most n requests
// (n slots) of a key in flight at once. lease is how long a slot stays
// taken when nobody releases it: a process that dies mid-request gives
// its slots back after at most lease. A request that outlives its lease
// renews it ([Leaser]; the engine and the middleware do it for you), so
// choose a lease well above the time a renewal takes and below how long
// you accept to lose a slot to a crash: seconds to a minute.
func InFlight(n int64, lease time.Duration) Limit { return Limit{Rate: n, Period: lease} }

// Lease names the slots an allowed [Concurrency] check took: the Check's
// Key, Lease and Cost, and its Limit.Period, by which a renewal extends
// the lease. See [Leaser].
type Lease struct {
	Key    string
	ID     uint64        // the Check's Lease
	Cost   int64         // the Check's Cost; 0 means 1
	Period time.Duration // the Check's Limit.Period
}
