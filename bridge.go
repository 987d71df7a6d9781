package redlimit

import (
	"context"

	"github.com/redlimit/redlimit/internal/bridge"
)

// The module's own adapters peek and reset chosen rules' keys, and read a
// Limiter's clock, logger and fallback, through internal/bridge (see there).
func init() {
	bridge.PeekInputs = func(e *Limiter, ctx context.Context, in []Input, d *Decision) { e.peekInputs(ctx, in, d) }
	bridge.ResetInputs = func(e *Limiter, ctx context.Context, in []Input) error { return e.resetInputs(ctx, in) }
	bridge.LimiterTraits = func(e *Limiter) bridge.Traits {
		return bridge.Traits{Now: e.s.now, Injected: e.s.injectedNow, Logger: e.s.logger, LocalFallback: e.s.fallback == nil || inProcess(e.s.fallback)}
	}
}
