package middleware

import (
	"context"

	"github.com/redlimit/redlimit/middleware/engine"
)

type decisionKey struct{}

// FromContext returns the Decision for the request whose context is ctx. It
// is set for the deny and error handlers, and for the next handler when
// Config.DecisionInContext is true.
func FromContext(ctx context.Context) (*engine.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(*engine.Decision)
	return d, ok
}

func withDecision(ctx context.Context, d *engine.Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}
