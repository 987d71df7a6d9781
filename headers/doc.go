// Package headers writes rate-limit response headers from the
// [algorithms.Result] of each rule that applied to a request.
//
// A [Writer] turns the [Policy] values of one request (one per rule: its name,
// its window and its Result) into header fields. It is a small value type:
// build it once from configuration, check it with [Writer.Validate], and call
// [Writer.Write] for every response. Write may be called concurrently, each
// call on its own header map, and does no formatting through fmt; see "Cost"
// below.
//
// # Styles
//
// [Writer].Style selects which fields are written:
//
//   - [XRateLimit] (the default): X-RateLimit-Limit, X-RateLimit-Remaining and
//     X-RateLimit-Reset, the de facto convention of GitHub, go-chi/httprate and
//     ulule/limiter. These fields describe one rule only; see "Layered limits".
//   - [IETF]: RateLimit-Policy and RateLimit as defined by
//     draft-ietf-httpapi-ratelimit-headers-10, one list member per rule; see
//     "IETF fields".
//   - [Both]: both sets, with Retry-After once.
//   - [None]: nothing at all, not even Retry-After.
//
// Every style but None adds Retry-After to a denied request; see
// "Retry-After".
//
// # IETF fields
//
// The IETF fields follow draft-ietf-httpapi-ratelimit-headers-10, an
// Internet-Draft (not an RFC) whose syntax changed several times; the older
// forms (RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of drafts 03
// to 07) are not written. Both fields are Structured Field lists (RFC 9651)
// with one item per rule, in the order of the policies:
//
//	RateLimit-Policy: "ip";q=1000;w=60, "user";q=100;w=60
//	RateLimit: "ip";r=997;t=1, "user";r=0;t=42
//
// q is the rule's capacity ([algorithms.Result].Limit) and w its window
// ([Policy].Window) in whole seconds rounded up, left out when the window is
// zero since the draft requires w > 0. r is the remaining units and t the
// seconds, rounded up, until the rule is back to full capacity
// ([algorithms.Result].ResetAfter; 0 when full). The draft defines t as the
// time until additional quota is available; the time to full capacity is an
// upper bound of it, so a client that spends at most r units before t
// seconds have passed never exceeds the quota.
//
// The item values are the rule names as sf-strings: '"' and '\' are escaped,
// and every character outside printable ASCII is replaced by '?'. Name rules
// with printable ASCII so that distinct rules stay distinct.
//
// # Layered limits
//
// A request may be checked against several rules at once (per IP, per user,
// per endpoint). The IETF fields list them all, in the order given. The X-
// fields have room for one rule only, so they describe the decisive one, as
// chosen by [Decisive]:
//
//   - when the request is denied, the denied rule with the longest wait,
//     because that is the rule the client must wait out; a rule that can
//     never allow the request (the cost exceeds its capacity, see
//     [algorithms.Result.Never]) counts as the longest wait;
//   - when the request is allowed, the rule with the fewest units remaining
//     (ties: the one furthest from full capacity, then the first), because
//     that is the rule the client will run into first.
//
// The X- fields then agree with the response: a 429 shows the rule that
// denied it, and a 200 shows the tightest rule rather than, say, a generous
// per-IP limit that hides a nearly exhausted per-user one.
//
// # Epoch or delta reset
//
// X-RateLimit-Reset has no standard meaning. GitHub, go-chi/httprate and
// ulule/limiter send the Unix time in seconds at which the rule is back to full
// capacity; the IETF draft (t=), Kong and envoyproxy/ratelimit send the number
// of seconds from now. [Writer].Reset selects [EpochSeconds] (the default) or
// [DeltaSeconds]. Both round up: a client that waits until the time it was
// given is never early. With EpochSeconds a key at full capacity reports the
// current second rounded up; with DeltaSeconds it reports 0. Delta values do
// not depend on the client's clock, epoch values do not depend on the
// response's latency; the IETF fields always use delta seconds.
//
// # Retry-After
//
// Retry-After is written, in delta seconds, only when the request is denied
// (some Result is not Allowed). Its value is [RetryAfter]: the longest wait
// among the denied rules, rounded up to whole seconds and never less than 1,
// so a client is never told to retry at once. It is left out when any denied
// rule is [algorithms.Result.Never] (the request's cost exceeds that rule's
// capacity): retrying the same request cannot succeed, and inviting a retry
// would only repeat the denial. When the IETF fields are
// present too, the draft gives Retry-After precedence over t; note that for
// the bucket algorithms Retry-After (enough capacity for this request) can be
// earlier than t (full capacity).
//
// # Header names
//
// Header names are written in Go's canonical form ([http.CanonicalHeaderKey]),
// computed once: X-Ratelimit-Limit, X-Ratelimit-Remaining, X-Ratelimit-Reset,
// Retry-After, Ratelimit-Policy and Ratelimit. Field names are
// case-insensitive (RFC 9110), and HTTP/2 and HTTP/3 send them in lowercase,
// so clients see the same fields as with the draft's spelling
// "RateLimit-Policy", and [http.Header.Get], [http.Header.Set] and
// [http.Header.Del] with any spelling find them. Writing the draft's exact
// casing as a map key would make Get miss it and let a later Set add a
// duplicate field.
//
// Write overwrites the fields it writes (set semantics) and never removes a
// field it does not write: an allowed request leaves an existing Retry-After
// alone.
//
// # Cost
//
// All values of one Write are appended into one byte buffer (on the stack up
// to 256 bytes), converted to one string and sliced; one []string backs every
// field value, each header getting its own length-1, capacity-1 slice. A Write
// therefore costs two allocations, three when the values outgrow the stack
// buffer (many rules or long names), plus whatever the header map itself
// needs to add new keys. The tests enforce this budget.
package headers
