package headers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Header names, in the canonical form http.Header keys use
// (http.CanonicalHeaderKey of "X-RateLimit-Limit" and so on), so that
// Header.Get and Header.Set with any spelling find them. See the package
// documentation, "Header names". writer_test.go checks each against
// http.CanonicalHeaderKey.
const (
	keyLimit      = "X-Ratelimit-Limit"
	keyRemaining  = "X-Ratelimit-Remaining"
	keyReset      = "X-Ratelimit-Reset"
	keyRetryAfter = "Retry-After"
	keyPolicy     = "Ratelimit-Policy"
	keyRateLimit  = "Ratelimit"
)

// maxFields is the most fields one Write sets: three X- fields, two IETF
// fields and Retry-After.
const maxFields = 6

// stackBuf is the size of the buffer Write keeps on the stack for the values.
const stackBuf = 256

// Writer writes rate-limit headers. The zero value writes the X-RateLimit
// fields with an epoch reset, and Retry-After on a denial.
//
// A Writer is a plain value that is never modified, so one Writer may serve
// any number of goroutines. Check it once with
// [Writer.Validate]; Write treats a field that Validate rejects as its zero
// value.
//
// Header names are written in Go's canonical form
// ([http.CanonicalHeaderKey]), computed once: X-Ratelimit-Limit,
// X-Ratelimit-Remaining, X-Ratelimit-Reset, Retry-After, Ratelimit-Policy
// and Ratelimit. Field names are case-insensitive (RFC 9110), and HTTP/2
// and HTTP/3 send them in lowercase, so clients see the same fields as
// with the draft's spelling "RateLimit-Policy", and [http.Header.Get],
// [http.Header.Set] and [http.Header.Del] with any spelling find them.
// Writing the draft's exact casing as a map key would make Get miss it and
// let a later Set add a duplicate field.
type Writer struct {
	// Style selects which fields are written.
	Style Style

	// Reset selects what X-RateLimit-Reset holds. It does not affect the
	// IETF fields.
	Reset ResetFormat
}

// Validate reports whether w's fields hold known values. The error is an
// [*algorithms.ConfigError] (matching [algorithms.ErrInvalidConfig]) naming the
// field, for example "redlimit: headers.Writer.Style unknown value 9".
func (w Writer) Validate() error {
	switch {
	case w.Style > None:
		return unknown("headers.Writer.Style", uint8(w.Style))
	case w.Reset > DeltaSeconds:
		return unknown("headers.Writer.Reset", uint8(w.Reset))
	}
	return nil
}

func unknown(field string, v uint8) error {
	return &algorithms.ConfigError{Field: field, Reason: "unknown value " + strconv.Itoa(int(v))}
}

// Write sets the rate-limit fields for the policies of one request on h,
// replacing any values those fields already have and leaving every other
// field alone. now is the wall clock an epoch X-RateLimit-Reset is computed
// from. With no policies, or with Style [None], Write does nothing. h must
// not be nil (pass [http.ResponseWriter].Header()), and policies is only
// read.
//
// Write overwrites the fields it writes (set semantics) and never removes
// a field it does not write: an allowed request leaves an existing
// Retry-After alone. It may be called concurrently, each call on its own
// header map.
//
// All values of one Write are appended into one byte buffer (on the stack
// up to 256 bytes), converted to one string and sliced; one []string backs
// every field value, each header getting its own length-1, capacity-1
// slice. So Write allocates one string for all the values and one
// []string backing them (one more when the values exceed 256 bytes), plus
// what h needs to add new keys. The tests enforce this budget.
func (w Writer) Write(h http.Header, now time.Time, policies []Policy) {
	style := w.Style
	if style > None {
		style = XRateLimit
	}
	if len(policies) == 0 || style == None {
		return
	}
	xFields := style == XRateLimit || style == Both
	ietfFields := style == IETF || style == Both
	retry, sendRetry := RetryAfter(policies)

	var (
		arr  [stackBuf]byte
		buf  = arr[:0]
		keys [maxFields]string
		ends [maxFields]int
		n    int
	)
	if ietfFields {
		if size := ietfSize(policies); size > stackBuf {
			buf = make([]byte, 0, size)
		}
	}
	end := func(key string) {
		keys[n], ends[n] = key, len(buf)
		n++
	}

	if xFields {
		r := policies[Decisive(policies)].Result
		buf = appendCount(buf, r.Limit)
		end(keyLimit)
		buf = appendCount(buf, r.Remaining)
		end(keyRemaining)
		if w.Reset == DeltaSeconds {
			buf = strconv.AppendInt(buf, ceilSeconds(r.ResetAfter), 10)
		} else {
			buf = strconv.AppendInt(buf, ceilUnix(now.Add(max(r.ResetAfter, 0))), 10)
		}
		end(keyReset)
	}
	if sendRetry {
		buf = strconv.AppendInt(buf, retry, 10)
		end(keyRetryAfter)
	}
	if ietfFields {
		for i := range policies {
			p := &policies[i]
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendSFString(buf, p.Name)
			buf = append(buf, ";q="...)
			buf = appendCount(buf, p.Result.Limit)
			if p.Window > 0 {
				buf = append(buf, ";w="...)
				buf = strconv.AppendInt(buf, ceilSeconds(p.Window), 10)
			}
		}
		end(keyPolicy)
		for i := range policies {
			p := &policies[i]
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendSFString(buf, p.Name)
			buf = append(buf, ";r="...)
			buf = appendCount(buf, p.Result.Remaining)
			buf = append(buf, ";t="...)
			buf = strconv.AppendInt(buf, ceilSeconds(p.Result.ResetAfter), 10)
		}
		end(keyRateLimit)
	}

	s := string(buf)
	vals := make([]string, n)
	start := 0
	for i := range n {
		vals[i] = s[start:ends[i]]
		h[keys[i]] = vals[i : i+1 : i+1]
		start = ends[i]
	}
}

// appendCount appends a count of units, clamped at 0 so that a value is
// always a non-negative integer.
func appendCount(b []byte, v int64) []byte {
	return strconv.AppendInt(b, max(v, 0), 10)
}

// appendSFString appends s as an RFC 9651 sf-string: quoted, with '"' and '\'
// escaped and every character outside printable ASCII (including each byte of
// invalid UTF-8) replaced by '?'.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', byte(c))
		case c >= 0x20 && c <= 0x7e:
			b = append(b, byte(c))
		default:
			b = append(b, '?')
		}
	}
	return append(b, '"')
}

// ietfSize returns the bytes Write needs for the IETF values of policies,
// plus room for the X- values and Retry-After, so that one allocation holds
// them all when they outgrow the stack buffer. It is exact for names in
// printable ASCII and an upper bound otherwise.
func ietfSize(policies []Policy) int {
	const (
		xAndRetry = 4 * 20          // three X- values and Retry-After, 20 digits at most each
		perItem   = 2*2 + 2*2 + 4*3 // in both fields: ", ", quotes, and ";q=", ";w=", ";r=", ";t="
	)
	size := xAndRetry
	for i := range policies {
		p := &policies[i]
		size += perItem + 2*sfLen(p.Name) +
			digits(max(p.Result.Limit, 0)) + digits(ceilSeconds(p.Window)) +
			digits(max(p.Result.Remaining, 0)) + digits(ceilSeconds(p.Result.ResetAfter))
	}
	return size
}

// sfLen returns an upper bound of the length of appendSFString's output for
// s, without the quotes: exact for printable ASCII, since every other
// character shrinks to one '?'.
func sfLen(s string) int {
	n := len(s)
	for i := range len(s) {
		if s[i] == '"' || s[i] == '\\' {
			n++
		}
	}
	return n
}

// digits returns the number of decimal digits of v >= 0.
func digits(v int64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}
