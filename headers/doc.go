// Package headers writes rate-limit response headers from the
// [algorithms.Result] of each rule that applied to a request.
//
// A [Writer] turns the [Policy] values of one request (one per rule: its
// name, its window and its Result) into header fields, in one of four
// [Style]s: [XRateLimit] (X-RateLimit-Limit, -Remaining, -Reset, the
// default), [IETF] (RateLimit-Policy and RateLimit of
// draft-ietf-httpapi-ratelimit-headers-10), [Both], or [None]. Every style
// but None adds Retry-After ([RetryAfter]) to a denied request. The
// X- fields describe one rule, the [Decisive] one; X-RateLimit-Reset is an
// epoch or a delta ([ResetFormat]).
//
//	w := headers.Writer{Style: headers.Both}
//	w.Write(rw.Header(), time.Now(), policies)
//
// A Write costs two allocations and no fmt (see [Writer.Write]). The guide
// is docs/headers.md.
package headers
