// Package calc is the arithmetic of redlimit's algorithms, shared by every
// backend: a limit scaled to integer microseconds ([Params]), and one key's
// state evaluated against it ([State.Eval]), as the Lua scripts in lua/
// compute it in Redis, operation for operation.
//
// It knows nothing of the model's types: callers validate a check with
// the algorithms package first, then prepare it here.
package calc

import (
	"math/bits"
	"time"
)

// The algorithms, numbered as algorithms.Algorithm numbers them (a test of
// package algorithms checks it).
const (
	FixedWindow uint8 = iota + 1
	SlidingLog
	SlidingWindow
	TokenBucket
	GCRA
	Concurrency
)

// Params is a validated check prepared for evaluation: everything in integer
// microseconds and, for the bucket algorithms, in scaled units where one
// unit is U and the refill is R scaled units per microsecond (U/R µs per
// unit, exactly: R and U are Rate and Period reduced by their gcd).
type Params struct {
	Alg    uint8
	Cap    int64 // capacity in units
	Period int64 // µs
	R, U   int64 // TokenBucket, GCRA only; Concurrency: R is the lease id
	Cost   int64 // >= 1
}

// Bucket reports whether alg keeps a bucket (TokenBucket, GCRA): its
// capacity is the burst when one is set.
func Bucket(alg uint8) bool { return alg == TokenBucket || alg == GCRA }

// ExpiryMargin is how much longer than its state needs, in µs, a bucket
// key (TokenBucket, GCRA) lives on a clock that is not the Redis server's
// (an injected now; memstore's own clock), so that the clock stepping
// back by up to this much finds the key's state, which makes it wait,
// not an expired key, which reads as a full bucket. lua/prelude.lua's
// expiry_margin (bucket_ttl) is its twin, in ms.
const ExpiryMargin = 1_000_000

// KeyTTL returns the time to live, in µs, of a key of algorithm alg
// whose state needs ttl µs more (its Outcome's Reset or TTL) on a clock
// that is not the Redis server's: ttl rounded up to the ms, as Redis
// keeps TTLs, and ExpiryMargin more for a bucket.
func KeyTTL(alg uint8, ttl int64) int64 {
	ttl = CeilDiv(ttl, 1000) * 1000
	if Bucket(alg) {
		ttl += ExpiryMargin
	}
	return ttl
}

// Prepare returns the Params of a check that the algorithms package has
// validated: alg, a limit of rate per period with burst, and cost (0 means 1).
func Prepare(alg uint8, rate int64, period time.Duration, burst, cost int64) Params {
	p := Params{Alg: alg, Cap: rate, Period: int64(period / time.Microsecond), Cost: max(cost, 1)}
	if Bucket(alg) {
		if burst > 0 {
			p.Cap = burst
		}
		p.R, p.U = Scale(rate, p.Period)
	}
	return p
}

// Scale returns rate and period (µs) reduced by their greatest common
// divisor: the refill of rate per period is r scaled units per µs, where a
// unit is u scaled units.
func Scale(rate, period int64) (r, u int64) {
	g := gcd(rate, period)
	return rate / g, period / g
}

// gcd is Stein's binary algorithm: a few shifts and subtractions, fast
// enough to run on every check (a, b > 0).
func gcd(a, b int64) int64 {
	x, y := uint64(a), uint64(b)
	shift := bits.TrailingZeros64(x | y)
	x >>= bits.TrailingZeros64(x)
	for y != 0 {
		y >>= bits.TrailingZeros64(y)
		if x > y {
			x, y = y, x
		}
		y -= x
	}
	return int64(x << shift)
}
