package middleware

import (
	"context"

	"github.com/redlimit/redlimit"
)

type decisionKey struct{}

// FromContext returns the Decision for the request whose context is ctx. It
// is set for the deny and error handlers, and for the next handler when
// Config.DecisionInContext is true.
func FromContext(ctx context.Context) (*redlimit.Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(*redlimit.Decision)
	return d, ok
}

func withDecision(ctx context.Context, d *redlimit.Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}
