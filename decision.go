package redlimit

import (
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Input is what the caller found for one rule of a request: its key
// material, or why there is none, and what the request weighs. Decide
// takes the Inputs of a request keyed by rule name (Rule), in any order.
type Input struct {
	// Rule names the rule this Input is for (Rule.Name). Every Input of a
	// call names a different rule of the Limiter; a rule that no Input
	// names has no key material (as if its Input were Missing).
	Rule string

	// Material is the key material (a client IP, a user ID, ...). It is
	// sanitised into the storage key (see Rule.Name); any string is safe.
	// An empty Material is no key material: as if Missing were set (one
	// key for every caller without a key would be a shared bucket, and
	// would have no Redis Cluster hash tag).
	Material string

	// Missing reports that the request has no key material for the rule:
	// the rule's MissingKey applies.
	Missing bool

	// Err reports that the key material could not be found for another
	// reason (a bug, a broken configuration): the error policy applies to
	// the whole request. It takes precedence over Missing.
	Err error

	// Exempt leaves the rule out for this request, whatever the other
	// fields say: an allowlisted client (an internal network, a health
	// checker, an admin key). The rule is not charged and not decided, and
	// its RuleDecision reports Exempt. A request whose Inputs are all
	// exempt is allowed without a backend call.
	Exempt bool

	// Tier selects the limit among Rule.Tiers; "" or an unlisted tier
	// selects Rule.Limit.
	Tier string

	// Limit, when not the zero Limit, is this request's limit for the
	// rule, found by the caller (the HTTP middleware calls its own
	// Rule.LimitFunc on the request and passes the outcome here). It takes
	// the place of Rule.Limit, the tier's limit and Rule.LimitFunc, which
	// is then not called, and is validated under the rule's Algorithm like
	// a LimitFunc's.
	Limit algorithms.Limit

	// LimitErr reports that the caller could not find this request's limit
	// for the rule: it is handled as a failed Rule.LimitFunc (see there).
	LimitErr error

	// Cost is how many units the request takes. 0 means 1, as in
	// [algorithms.Check]. A negative cost refuses the request under every
	// error policy (Decision.Failed: a programmer error), nothing
	// consumed: RuleDecision.InvalidCost is set and Decision.Err says
	// which cost. A shadow rule only reports that it would have denied.
	Cost int64
}

// Decision is what the engine decided for one request.
type Decision struct {
	// Allowed reports whether the request may proceed. It is true in
	// shadow mode even when a rule would have denied.
	Allowed bool

	// WouldDeny reports that a shadow rule (or, with Config.Shadow, any
	// rule) would have denied the request.
	WouldDeny bool

	// Failed reports that the request was refused without being decided:
	// Allowed is false, Err says why. It is a backend failure under
	// FailClosed, or under Fallback before the instance switched to its
	// fallback (Config.FallbackAfter), or a programmer error under every
	// policy (Err matches [algorithms.ErrInvalidConfig]: see
	// Limiter.Decide). A denial that is not Failed is a rate-limit denial
	// (or a missing key).
	Failed bool

	// Rules holds one entry per rule of the Limiter, in order.
	Rules []RuleDecision

	// Source says which backend decided.
	Source Source

	// Err is the error the error policy handled (backend failure, timeout,
	// Input.Err, a rule's unknown limit: a *[LimitError], see
	// RuleDecision.LimitFailed), the programmer error that refused the
	// request (an Input naming an unknown rule, two Inputs for one rule,
	// a negative cost, see
	// RuleDecision.InvalidCost, an invalid limit), or nil. When several occur, the last
	// one the engine met.
	Err error

	// Latency is the time spent deciding, backend call included. The
	// engine measures it when something can read it (Config.OnDecision or
	// debug logging); otherwise it is zero, which saves two clock reads.
	Latency time.Duration

	hold *hold // the slots of concurrency rules, nil when none (see Limiter.Settle)
}

// RuleDecision is one rule's part of a [Decision].
type RuleDecision struct {
	Name string
	// Key is the storage key ("<prefix>:<rule>:<tag>:{<material>}", see
	// Rule.Name); empty when the rule was skipped or exempt, its key was
	// missing, its limit unknown (LimitFailed) or the request's Input
	// failed.
	Key string
	// Skipped reports that the rule did not apply: its key was missing and
	// its MissingKey is SkipMissingKey.
	Skipped bool
	// Exempt reports that the rule did not apply because its Input was
	// exempt (Input.Exempt): the request is allowlisted for this rule.
	Exempt bool
	// LimitFailed reports that the rule's limit for this request is
	// unknown: its LimitFunc (or Input.LimitErr) failed or gave an invalid
	// limit, and Decision.Err is the *LimitError. The rule was not decided:
	// left out, or, under FailClosed, the request refused (Failed).
	LimitFailed bool
	// MissingKey reports that the request was denied because the rule found
	// no key (DenyMissingKey).
	MissingKey bool
	// InvalidCost reports that the rule's Input had a negative cost: the
	// request was refused without being decided (Decision.Failed;
	// Decision.Err says which cost), or, for a shadow rule, would have
	// been.
	InvalidCost bool
	// FromBlock reports that the rule was answered from a quota block this
	// Limiter holds (Rule.Blocks), without a backend call: its units were
	// charged in the store when the block was taken. Result.Remaining is
	// then what the store reported after this Limiter's last call for the
	// key plus what its blocks have left (see docs/leasing.md), and
	// Result.ResetAfter the time until the key is full again as the store
	// reported it when the block was taken.
	FromBlock bool
	// Evaluated is false when the backend answered without evaluating this
	// rule (a local deny-cache hit on another rule of the request, or an
	// error); Result is then the zero Result.
	Evaluated bool
	// Shadow reports that the rule is in shadow mode.
	Shadow bool
	// Algorithm and Limit are what the rule applied: its algorithm, and
	// the Input's, LimitFunc's, tier's or rule's limit. They are set with
	// Key, and zero when Key is empty.
	Algorithm algorithms.Algorithm
	Limit     algorithms.Limit
	Result    algorithms.Result
	// Cost is the units the rule's check asked for (the Input's cost, at
	// least 1), set with Key: what a refundable rule reserved (see
	// Limiter.Settle).
	Cost int64
}

// Window is the time the rule's Limit takes to refill its whole capacity
// (the IETF RateLimit-Policy w parameter). It is zero when Limit is not
// set (a RuleDecision built by hand without one: no window is written),
// and for a calendar quota, whose windows have no fixed length.
func (rd *RuleDecision) Window() time.Duration {
	l := rd.Limit
	if l.Rate <= 0 || !rd.Algorithm.Valid() {
		return 0
	}
	return time.Duration(int64(l.Period) / l.Rate * l.Capacity(rd.Algorithm))
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

// Clone returns a copy of d that owns its Rules.
func (d *Decision) Clone() *Decision {
	c := *d
	c.Rules = append([]RuleDecision(nil), d.Rules...)
	return &c
}
