package keyfunc

import (
	"errors"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
)

// Error categories. Test for them with [errors.Is].
var (
	// ErrNoKey reports that a request carries no key material for a [Func]:
	// an anonymous request for [User], an absent header for [Header], a
	// RemoteAddr that is not an IP address for [IP]. It is a per-request
	// fact, not a bug: the middleware lets each rule decide whether such a
	// request is skipped, denied, or keyed by a fallback through [Or].
	ErrNoKey = errors.New("redlimit: no key")

	// ErrInvalidConfig reports a key func that was built wrong: an invalid
	// [IPConfig], a nil function, a context value of an unusable type. [IP]
	// and [ParseTrustedProxies] report it when they are called; the few
	// constructors that cannot return an error ([User], [Join], [Or], ...)
	// return a Func that reports it on every request, so the mistake reaches
	// the error policy instead of turning into a shared bucket. It is
	// [algorithms.ErrInvalidConfig]: one category for the whole module.
	ErrInvalidConfig = algorithms.ErrInvalidConfig
)

// Error is the detailed form of a [Func]'s failure: which key func and why.
// Its message reads like
//
//	redlimit: keyfunc Header("X-API-Key"): header absent: redlimit: no key
//
// and it unwraps to its category, [ErrNoKey] or [ErrInvalidConfig].
type Error struct {
	Func   string // the key func as it was built, for example `Header("X-API-Key")`
	Reason string // what was wrong with this request, for example "header absent"
	Err    error  // the category: ErrNoKey or ErrInvalidConfig
}

func (e *Error) Error() string {
	return "redlimit: keyfunc " + e.Func + ": " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the category, [ErrNoKey] or [ErrInvalidConfig].
func (e *Error) Unwrap() error { return e.Err }

// ConfigError is the detailed form of [ErrInvalidConfig] reported by a
// constructor: which field and why. Its message reads like
//
//	redlimit: IPConfig.IPv6Prefix must be in 1..128, got 200
type ConfigError struct {
	Field  string // the offending field or argument, for example "IPConfig.IPv6Prefix"
	Reason string // what is wrong, including the value
}

func (e *ConfigError) Error() string {
	return "redlimit: " + e.Field + " " + e.Reason
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// noKey returns an *Error of category ErrNoKey.
func noKey(fn, reason string) *Error {
	return &Error{Func: fn, Reason: reason, Err: ErrNoKey}
}

// badConfig returns an *Error of category ErrInvalidConfig.
func badConfig(fn, reason string) *Error {
	return &Error{Func: fn, Reason: reason, Err: ErrInvalidConfig}
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
