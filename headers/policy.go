package headers

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Policy is one rule's contribution to a response: the rule's name and
// window, and the Result of checking the request against it. A request
// checked against several rules (layered limits) has one Policy per rule.
type Policy struct {
	// Name is the rule's name, written as the IETF list item's value (an
	// sf-string). Use printable ASCII: '"' and '\' are escaped, any other
	// character is replaced by '?'.
	Name string

	// Window is the rule's period, written as the IETF RateLimit-Policy w=
	// parameter in whole seconds rounded up. Zero means not applicable: w=
	// is left out.
	Window time.Duration

	// Result is the outcome of checking the request against the rule.
	Result algorithms.Result
}

// Decisive returns the index in policies of the rule the X-RateLimit fields
// describe, or -1 when policies is empty.
//
// When any rule denies the request, it is the denied rule with the longest
// RetryAfter, a rule that can never allow the request
// (denied with a zero RetryAfter, see [algorithms.Result]) counting as the longest. Otherwise it is the rule
// with the least Remaining; ties go to the longest ResetAfter. Remaining ties
// go to the first rule.
//
// The X- fields have room for one rule only. A denied request shows the
// rule the client must wait out; an allowed one shows the rule the client
// will run into first, rather than, say, a generous per-IP limit that
// hides a nearly exhausted per-user one. The IETF fields list every rule,
// in the order given.
func Decisive(policies []Policy) int {
	best, denied := -1, false
	for i := range policies {
		r := &policies[i].Result
		switch {
		case !r.Allowed && !denied:
			best, denied = i, true
		case !r.Allowed:
			if longerWait(r, &policies[best].Result) {
				best = i
			}
		case denied:
			// An allowed rule never describes a denied request.
		case best < 0:
			best = i
		default:
			b := &policies[best].Result
			if r.Remaining < b.Remaining || r.Remaining == b.Remaining && r.ResetAfter > b.ResetAfter {
				best = i
			}
		}
	}
	return best
}

// longerWait reports whether denial a makes the client wait strictly longer
// than denial b, a Never denial being longer than any finite wait.
func longerWait(a, b *algorithms.Result) bool {
	switch {
	case !b.Allowed && b.RetryAfter == 0:
		return false
	case !a.Allowed && a.RetryAfter == 0:
		return true
	}
	return a.RetryAfter > b.RetryAfter
}

// RetryAfter returns the value Retry-After carries for policies, in whole
// seconds, and whether to send it at all.
//
// The value is the longest RetryAfter among the denied rules, rounded up and
// at least 1: a client is never told to retry immediately. ok is false when
// nothing is denied, and when any denied rule can never allow the request
// (denied with a zero RetryAfter: its cost exceeds its capacity): the request can never pass, so waiting
// cannot help, and inviting a retry would only repeat the denial.
//
// When the IETF fields are present too, the draft gives Retry-After
// precedence over t; for the bucket algorithms Retry-After (enough
// capacity for this request) can be earlier than t (full capacity).
func RetryAfter(policies []Policy) (seconds int64, ok bool) {
	var longest time.Duration
	for i := range policies {
		r := &policies[i].Result
		switch {
		case !r.Allowed && r.RetryAfter == 0:
			return 0, false
		case !r.Allowed:
			longest = max(longest, r.RetryAfter)
			ok = true
		}
	}
	if !ok {
		return 0, false
	}
	return max(ceilSeconds(longest), 1), true
}

// ceilSeconds returns d in whole seconds rounded up; 0 when d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// ceilUnix returns t as Unix time in whole seconds rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 {
		s++
	}
	return s
}
