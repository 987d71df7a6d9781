package algorithms

import "fmt"

// Algorithm identifies how a [Limit] is enforced. The zero value is invalid;
// a rule must choose one.
type Algorithm uint8

const (
	// FixedWindow counts units in windows of Limit.Period aligned to the Unix
	// epoch and allows Limit.Rate per window. It is exact within a window, but
	// a client may spend a whole window's rate just before a boundary and again
	// just after it: up to 2×Rate within a short interval. State: one small
	// hash per key. With Limit.Calendar set (a calendar quota, see
	// [PerDayIn]), the windows are calendar days, weeks, months or years in
	// Limit.Location instead.
	FixedWindow Algorithm = iota + 1

	// SlidingLog records every unit in a sorted set and allows Limit.Rate units
	// in any interval of length Limit.Period. It is exact and has no boundary
	// burst; its memory and the time of one check grow with Rate (one
	// sorted-set member per unit), so Rate is at most 2000.
	SlidingLog

	// SlidingWindow is the sliding window counter: the current window's count
	// plus the previous window's count weighted by the part of the previous
	// window still inside the sliding interval. It is approximate (it assumes
	// the previous window's traffic was evenly spread) and uses constant
	// memory. See docs/algorithms.md for its measured error.
	SlidingWindow

	// TokenBucket holds up to Limit.Burst tokens (Rate when Burst is zero),
	// refilled continuously at Rate per Period; a request takes Cost tokens.
	// Exact. State: one small hash (the missing tokens as the time they take
	// to refill, the refill rate they are counted in, the last update).
	TokenBucket

	// GCRA is the generic cell rate algorithm: one stored value, the
	// theoretical arrival time. It allows the same traffic as TokenBucket with
	// the same Limit, with the smallest possible state.
	GCRA

	// Concurrency limits the requests of a key in flight at once, not their
	// rate: Limit.Rate slots, each held from the check that takes it until
	// it is released ([Leaser]) or its lease of Limit.Period expires, so
	// that the slots of a process that died come back by themselves; a
	// request takes Cost slots. Every check of this algorithm names a
	// [Check].Lease. See [InFlight]. A denial's RetryAfter is when enough
	// leases expire for the cost to fit, as for any algorithm the time until
	// the check passes with no other traffic (no release): an upper bound,
	// since a slot is usually released sooner. State: one sorted-set member
	// per slot held, Rate at most 10000.
	Concurrency
)

// Algorithms lists every valid Algorithm, in declaration order.
var Algorithms = []Algorithm{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, GCRA, Concurrency}

var algorithmNames = [...]string{
	FixedWindow:   "fixed_window",
	SlidingLog:    "sliding_log",
	SlidingWindow: "sliding_window",
	TokenBucket:   "token_bucket",
	GCRA:          "gcra",
	Concurrency:   "concurrency",
}

// String returns the algorithm's name as used in configuration and testdata,
// for example "token_bucket".
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Valid reports whether a is one of the defined algorithms.
func (a Algorithm) Valid() bool { return a >= FixedWindow && a <= Concurrency }

// ParseAlgorithm returns the Algorithm whose [Algorithm.String] is name.
func ParseAlgorithm(name string) (Algorithm, error) {
	for _, a := range Algorithms {
		if algorithmNames[a] == name {
			return a, nil
		}
	}
	return 0, &ConfigError{Field: "Algorithm", Reason: fmt.Sprintf("unknown algorithm %q", name)}
}

// MarshalText implements [encoding.TextMarshaler].
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, &ConfigError{Field: "Algorithm", Reason: fmt.Sprintf("unknown algorithm %d", uint8(a))}
	}
	return []byte(algorithmNames[a]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
