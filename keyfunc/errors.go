package keyfunc

import (
	"errors"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
)

// ErrNoKey reports that a request carries no key material for a [Func]: an
// anonymous request for [User], an absent header for [Header], a RemoteAddr
// that is not an IP address for [IP]. It is a per-request fact, not a bug:
// the middleware lets each rule decide whether such a request is skipped,
// denied, or keyed by a fallback through [Or]. Test for it with [errors.Is].
//
// Configuration mistakes are of the module's one category,
// [algorithms.ErrInvalidConfig], detailed by an [*algorithms.ConfigError].
var ErrNoKey = errors.New("redlimit: no key")

// Error is the detailed form of a [Func]'s failure on one request: which key
// func and why. Its message reads like
//
//	redlimit: keyfunc Header("X-API-Key"): header absent
//
// and it unwraps to its category: [ErrNoKey], or
// [algorithms.ErrInvalidConfig] when the request holds something the Func
// was not built for (a context value of an unusable type for
// [ContextValue]).
type Error struct {
	Func   string // the key func as it was built, for example `Header("X-API-Key")`
	Reason string // what was wrong with this request, for example "header absent"
	Err    error  // the category: ErrNoKey or algorithms.ErrInvalidConfig
}

func (e *Error) Error() string {
	return "redlimit: keyfunc " + e.Func + ": " + e.Reason
}

// Unwrap returns the category, [ErrNoKey] or [algorithms.ErrInvalidConfig].
func (e *Error) Unwrap() error { return e.Err }

// noKey returns an *Error of category ErrNoKey.
func noKey(fn, reason string) *Error {
	return &Error{Func: fn, Reason: reason, Err: ErrNoKey}
}

// badValue returns an *Error of category algorithms.ErrInvalidConfig, for a
// request that holds a value the Func was not built for.
func badValue(fn, reason string) *Error {
	return &Error{Func: fn, Reason: reason, Err: algorithms.ErrInvalidConfig}
}

// configError returns the error a constructor reports for an invalid
// argument or field.
func configError(field, reason string) *algorithms.ConfigError {
	return &algorithms.ConfigError{Field: field, Reason: reason}
}

// quoteTrunc quotes s for an error message, cutting it to a readable length
// first: values in messages may come from clients and may be huge.
func quoteTrunc(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		return strconv.Quote(s[:maxLen]) + "..."
	}
	return strconv.Quote(s)
}
