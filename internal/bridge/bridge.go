// Package bridge gives the module's own adapters the calls of package
// redlimit that the public API leaves out: a peek and a reset of chosen
// rules' keys (the admin page peeks and resets one rule's key; the chaos
// harness resets keys rule by rule), and the clock, logger and fallback
// of a Limiter (the HTTP middleware writes its headers on the Limiter's
// clock and logs to its Logger, without a second config field for either). Package redlimit sets the funcs when
// it is initialised; their types are written out in their comments.
// Nothing outside this module can import it.
package bridge

import (
	"log/slog"
	"time"
)

var (
	// PeekInputs is a func(*redlimit.Limiter, context.Context,
	// []redlimit.Input, *redlimit.Decision): what Decide would decide for
	// the Inputs (keyed by rule name), consuming nothing, as
	// Limiter.Peek does for one material.
	PeekInputs any

	// ResetInputs is a func(*redlimit.Limiter, context.Context,
	// []redlimit.Input) error: Limiter.Reset of the keys of the rules the
	// Inputs name (a rule without an Input, or whose Input is Missing, is
	// left alone).
	ResetInputs any
)

// Traits is what an adapter reads of a Limiter's configuration beyond
// its public API (see LimiterTraits).
type Traits struct {
	// Now is the Limiter's clock (redlimit.Config.Now, time.Now by
	// default); Injected reports that the Config gave one.
	Now      func() time.Time
	Injected bool
	// Logger is redlimit.Config.Logger (slog.Default() by default).
	Logger *slog.Logger
	// LocalFallback reports that the Limiter's fallback runs in process
	// (or that it has none): its calls make no round trip.
	LocalFallback bool
}

// LimiterTraits is a func(*redlimit.Limiter) Traits.
var LimiterTraits any
