package algorithms

import (
	"errors"
	"strconv"
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

// WithRule returns a copy of err naming rule when err is a *ConfigError
// without a rule, and err unchanged otherwise.
func WithRule(err error, rule string) error {
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Rule == "" {
		c := *ce
		c.Rule = rule
		return &c
	}
	return err
}

// BackendError is the detailed form of [ErrBackend].
type BackendError struct {
	Backend string // "redis" or "memory"
	Err     error  // the underlying error
}

func (e *BackendError) Error() string {
	return "redlimit: " + e.Backend + " backend: " + e.Err.Error()
}

// Unwrap returns both [ErrBackend] and the underlying error, so errors.Is
// matches either (for example context.DeadlineExceeded).
func (e *BackendError) Unwrap() []error { return []error{ErrBackend, e.Err} }

func quote(s string) string { return `"` + s + `"` }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
