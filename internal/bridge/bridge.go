// Package bridge gives the module's own adapters the calls of package
// redlimit that the public API leaves out: a peek and a reset of chosen
// rules' keys (the admin page peeks and resets one rule's key; the chaos
// harness resets keys rule by rule). Package redlimit sets the funcs when
// it is initialised; their types are written out in their comments.
// Nothing outside this module can import it.
package bridge

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
