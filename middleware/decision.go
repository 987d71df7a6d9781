package middleware

import (
	"context"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Decision is what the middleware decided for one request.
type Decision struct {
	// Allowed reports whether the request goes on to the next handler. It is
	// true in shadow mode even when a rule would have denied.
	Allowed bool

	// WouldDeny reports that a shadow rule (or, with Config.Shadow, any
	// rule) would have denied the request.
	WouldDeny bool

	// Rules holds one entry per rule of the Middleware, in order.
	Rules []RuleDecision

	// Source says which backend decided.
	Source Source

	// Err is the error the error policy handled (backend failure, timeout,
	// key func failure), the negative cost that denied the request (see
	// RuleDecision.InvalidCost), or nil.
	Err error

	// Latency is the time spent deciding, backend call included. It is
	// measured when something can read it: Config.OnDecision, debug
	// logging, Config.DecisionInContext, a custom Config.Denied or
	// Config.ErrorHandler, or Check. Otherwise it is zero, which saves two
	// clock reads a request.
	Latency time.Duration
}

// RuleDecision is one rule's part of a [Decision].
type RuleDecision struct {
	Name string
	// Key is the storage key ("<prefix>:<rule>:<tag>:{<material>}", see
	// Rule.Name); empty when the rule was skipped or its key func failed.
	Key string
	// Skipped reports that the rule did not apply: its key was missing and
	// its MissingKey is SkipMissingKey.
	Skipped bool
	// MissingKey reports that the request was denied because the rule found
	// no key (DenyMissingKey).
	MissingKey bool
	// InvalidCost reports that the rule's Cost returned a negative cost:
	// the request was denied without being decided (Decision.Err says
	// which cost), or, for a shadow rule, would have been.
	InvalidCost bool
	// Evaluated is false when the backend answered without evaluating this
	// rule (a local deny-cache hit on another rule of the request, or an
	// error); Result is then the zero Result.
	Evaluated bool
	// Shadow reports that the rule is in shadow mode.
	Shadow bool
	Result algorithms.Result

	limit algorithms.Limit // the limit applied: the tier's or the rule's
}

// Source is which backend produced a Decision.
type Source uint8

const (
	// SourceNone: no backend answered (no rule applied, a key was missing,
	// or the error policy decided).
	SourceNone Source = iota
	// SourcePrimary: the backend given to New.
	SourcePrimary
	// SourceFallback: the in-process fallback, while the primary is down,
	// or for a request whose keys' state the primary could not use
	// (algorithms.ErrKeyState; Decision.Err says which).
	SourceFallback
)

func (s Source) String() string {
	switch s {
	case SourcePrimary:
		return "primary"
	case SourceFallback:
		return "fallback"
	}
	return "none"
}

// clone returns a copy of d that owns its Rules.
func (d *Decision) clone() *Decision {
	c := *d
	c.Rules = append([]RuleDecision(nil), d.Rules...)
	return &c
}

type decisionKey struct{}

// FromContext returns the Decision for the request whose context is ctx. It
// is set for the deny and error handlers, and for the next handler when
// Config.DecisionInContext is true.
func FromContext(ctx context.Context) (*Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(*Decision)
	return d, ok
}

func withDecision(ctx context.Context, d *Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}
