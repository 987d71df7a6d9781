package algorithms

import "context"

// Check is one question to a [Backend]: may Cost units be taken from the
// state at Key, limited by Limit under Algorithm?
type Check struct {
	// Key is the storage key, already namespaced and sanitised by the caller
	// (the middleware builds "<prefix>:<rule>:<algorithm>:{<key material>}").
	Key string

	// Algorithm and Limit say how the key is limited. They are normally the
	// same for every check of a key; a key whose limit changes (a user moving
	// to another tier, a redeploy with another Period) has its stored state
	// reinterpreted under the new limit, never locked for longer than the new
	// limit allows, and no Result claims more than the key's TTL:
	//
	//   - FixedWindow: the stored window's count counts until the stored
	//     window ends or the current window of the new Period ends,
	//     whichever comes first.
	//   - SlidingWindow: each stored window's count goes to the window of
	//     the new Period in which it started (current, previous or none),
	//     until the stored state would have expired.
	//   - SlidingLog: the stored entries count under the new Period; a
	//     denial sets the key's TTL to what they need.
	//   - TokenBucket and GCRA keep the time until the bucket is full (its
	//     time-debt), cut to one full bucket of the new limit (Burst, or
	//     Rate, units of the new refill): moving to a faster tier waits one
	//     emission interval of it at most, and the two algorithms decide
	//     alike.
	Algorithm Algorithm
	Limit     Limit

	// Cost is how many units the request takes. 0 means 1; negative is
	// invalid. A cost above the key's capacity is denied with a zero
	// RetryAfter (see [Result.Never]) and consumes nothing.
	Cost int64
}

// Backend decides checks and keeps their state.
//
// Allow evaluates all checks of one request atomically and all-or-nothing:
// if any check denies, no check consumes. It writes one Result per check into
// results, which must be at least as long as checks. A non-nil error means
// nothing was decided: a *[ConfigError] for an invalid check (checked before
// anything is stored), a *[BackendError] when the store failed.
//
// Implementations are safe for concurrent use.
type Backend interface {
	Allow(ctx context.Context, checks []Check, results []Result) error
}

// AllowAll is a Backend that allows everything and stores nothing. Drop it
// into tests of code that takes a Backend.
type AllowAll struct{}

var _ Backend = AllowAll{}

// Allow fills results with allowed Results at full capacity.
func (AllowAll) Allow(_ context.Context, checks []Check, results []Result) error {
	for i, c := range checks {
		results[i] = Result{Allowed: true, Limit: c.Limit.Capacity(c.Algorithm), Remaining: c.Limit.Capacity(c.Algorithm)}
	}
	return nil
}

// prepared is a validated Check ready for evaluation.
type prepared struct {
	params
	cost int64
}

func prepare(c *Check) (prepared, error) {
	p, err := c.Limit.params(c.Algorithm)
	if err != nil {
		return prepared{}, err
	}
	cost := c.Cost
	switch {
	case cost < 0:
		return prepared{}, fieldErr("Cost", "must be >= 0, got ", cost)
	case cost == 0:
		cost = 1
	}
	return prepared{params: p, cost: cost}, nil
}
