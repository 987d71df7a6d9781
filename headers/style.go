package headers

import "strconv"

// Style selects which header fields a [Writer] writes. The zero value is
// [XRateLimit].
type Style uint8

const (
	// XRateLimit writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset for the decisive rule (see [Decisive]), and
	// Retry-After on a denial. It is the default.
	XRateLimit Style = iota

	// IETF writes RateLimit-Policy and RateLimit as defined by
	// draft-ietf-httpapi-ratelimit-headers-10, one list member per rule, and
	// Retry-After on a denial.
	IETF

	// Both writes the fields of XRateLimit and IETF, with Retry-After once.
	Both

	// None writes nothing at all, not even Retry-After.
	None
)

// String returns "x-ratelimit", "ietf", "both", "none", or "Style(n)" for an
// unknown value.
func (s Style) String() string {
	switch s {
	case XRateLimit:
		return "x-ratelimit"
	case IETF:
		return "ietf"
	case Both:
		return "both"
	case None:
		return "none"
	}
	return "Style(" + strconv.Itoa(int(s)) + ")"
}

// ResetFormat selects what X-RateLimit-Reset holds. The zero value is
// [EpochSeconds]. It does not affect the IETF fields, which always use delta
// seconds.
type ResetFormat uint8

const (
	// EpochSeconds is the Unix time, in whole seconds rounded up, at which
	// the rule is back to full capacity, as GitHub, go-chi/httprate and
	// ulule/limiter send it. It is the default.
	EpochSeconds ResetFormat = iota

	// DeltaSeconds is the number of seconds, rounded up, until the rule is
	// back to full capacity; 0 when it is full. This is the IETF draft's and
	// Kong's convention.
	DeltaSeconds
)

// String returns "epoch", "delta", or "ResetFormat(n)" for an unknown value.
func (f ResetFormat) String() string {
	switch f {
	case EpochSeconds:
		return "epoch"
	case DeltaSeconds:
		return "delta"
	}
	return "ResetFormat(" + strconv.Itoa(int(f)) + ")"
}
