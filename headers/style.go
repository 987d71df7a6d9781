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
	//
	// The draft is an Internet-Draft (not an RFC) whose syntax changed
	// several times; the older forms (RateLimit-Limit, RateLimit-Remaining
	// and RateLimit-Reset of drafts 03 to 07) are not written. Both fields
	// are Structured Field lists (RFC 9651) with one item per rule, in the
	// order of the policies:
	//
	//	RateLimit-Policy: "ip";q=1000;w=60, "user";q=100;w=60
	//	RateLimit: "ip";r=997;t=1, "user";r=0;t=42
	//
	// q is the rule's capacity ([algorithms.Result].Limit) and w its window
	// ([Policy].Window) in whole seconds rounded up, left out when the
	// window is zero since the draft requires w > 0. r is the remaining
	// units and t the seconds, rounded up, until the rule is back to full
	// capacity ([algorithms.Result].ResetAfter; 0 when full). The draft
	// defines t as the time until additional quota is available; the time
	// to full capacity is an upper bound of it, so a client that spends at
	// most r units before t seconds have passed never exceeds the quota.
	//
	// The item values are the rule names as sf-strings: '"' and '' are
	// escaped, and every character outside printable ASCII is replaced by
	// '?'. Name rules with printable ASCII so that distinct rules stay
	// distinct.
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
//
// X-RateLimit-Reset has no standard meaning. GitHub, go-chi/httprate and
// ulule/limiter send the Unix time in seconds at which the rule is back to
// full capacity; the IETF draft (t=), Kong and envoyproxy/ratelimit send
// the number of seconds from now. Both formats round up: a client that
// waits until the time it was given is never early. With EpochSeconds a
// key at full capacity reports the current second rounded up; with
// DeltaSeconds it reports 0. Delta values do not depend on the client's
// clock, epoch values do not depend on the response's latency.
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
