package algorithms

import (
	"errors"
	"strings"
)

// Error categories. Test for them with [errors.Is].
var (
	// ErrInvalidConfig reports a limit, check or backend configuration that
	// can never be evaluated: a non-positive rate, an unknown algorithm, ...
	ErrInvalidConfig = errors.New("redlimit: invalid configuration")

	// ErrBackend reports that a backend could not answer (Redis down, timeout,
	// unexpected reply). The request's fate is then up to the caller's error
	// policy; nothing was decided.
	ErrBackend = errors.New("redlimit: backend error")

	// ErrKeyState reports that the state stored under a call's keys could
	// not be used, while the backend itself answered: a key holds a value of
	// another Redis type (WRONGTYPE: a stray key, or the state of another
	// algorithm written under the same key), or a script failed on what it
	// read (a Lua runtime error: the scripts' arguments are validated before
	// they are sent, what they read is the one input they do not control).
	// It concerns the keys of one call, not the backend's health: calls on
	// other keys are decided as usual. An error matching ErrKeyState also
	// matches [ErrBackend] (nothing was decided); its *[BackendError] lists
	// the keys. The middleware applies its error policy to that request
	// alone, without switching to its fallback.
	ErrKeyState = errors.New("redlimit: unusable key state")
)

// ConfigError is the detailed form of [ErrInvalidConfig]: which rule, which
// field and why. Its message reads like
//
//	redlimit: rule "login": Limit.Burst must be >= 0, got -1
type ConfigError struct {
	Rule   string // the rule's name, when known
	Field  string // the offending field, for example "Limit.Rate"
	Reason string // what is wrong, including the value
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("redlimit: ")
	if e.Rule != "" {
		b.WriteString("rule ")
		b.WriteString(quote(e.Rule))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(" ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// BackendError is the detailed form of [ErrBackend].
type BackendError struct {
	// Backend names who failed: "redis" (redisstore), "memory"
	// (memstore), "denycache" (denycache, a call canceled while waiting),
	// or "engine" (the decision engine: a call past its timeout from a
	// backend that does not honour deadlines, too many such calls still
	// running, a panic). A user's Backend may set its own.
	Backend string
	Err     error // the underlying error

	// Keys is set, to the keys of the failed script, when the error
	// concerns the state stored under one of them rather than the backend
	// ([ErrKeyState]); nil otherwise.
	Keys []string
}

func (e *BackendError) Error() string {
	if e.Keys != nil {
		return "redlimit: " + e.Backend + " backend: unusable state under " + strings.Join(e.Keys, ", ") + ": " + e.Err.Error()
	}
	return "redlimit: " + e.Backend + " backend: " + e.Err.Error()
}

// Unwrap returns [ErrBackend], [ErrKeyState] when Keys is set, and the
// underlying error, so errors.Is matches any of them (for example
// context.DeadlineExceeded).
func (e *BackendError) Unwrap() []error {
	if e.Keys != nil {
		return []error{ErrBackend, ErrKeyState, e.Err}
	}
	return []error{ErrBackend, e.Err}
}

func quote(s string) string { return `"` + s + `"` }
