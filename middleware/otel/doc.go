// Package otellimit records redlimit's decisions as OpenTelemetry metrics.
//
// It lives in a module of its own, so that a service that limits with
// redlimit compiles no OpenTelemetry API unless it imports this package.
// A [Metrics] is fed by the decision hooks: give [Metrics.HTTP] to
// middleware.Config.OnDecision, or [Metrics.Engine] to
// redlimit.Config.OnDecision, [Metrics.SettleError] to
// middleware.Config.OnSettleError and [Metrics.RefundError] to
// redisstore.Config.OnRefundError:
//
//	m, err := otellimit.New(otel.GetMeterProvider(), otellimit.Config{Rules: []string{"ip", "user"}})
//	lim, err := redlimit.New(backend, redlimit.Config{Rules: rules})
//	mw, err := middleware.New(lim, middleware.Config{Rules: keys, OnDecision: m.HTTP, OnSettleError: m.SettleError})
//	m.Watch(lim) // deny-cache hits and stalled calls, observed at each collection
//
// # Instruments
//
// The meter is named "github.com/redlimit/redlimit/middleware/otel".
//
//	redlimit.decisions                 counter {decision}, by redlimit.source and redlimit.outcome
//	redlimit.rule.decisions            counter {decision}, by redlimit.rule and redlimit.outcome
//	redlimit.decision.duration         histogram, s, of Decision.Latency, by redlimit.source
//	redlimit.rule.decisions.unlisted   counter {decision}, rules not named in Config.Rules
//	redlimit.refund.errors             counter {refund}, refunds that failed (see below)
//	redlimit.local_denials             observable counter {decision}, deny-cache hits of the watched engines
//	redlimit.stalled_calls             observable gauge {call}, abandoned backend calls of the watched engines
//
// The attributes are those of the Prometheus adapter
// (github.com/redlimit/redlimit/middleware/prometheus), with the same
// values: redlimit.source is "primary", "fallback" or "none";
// redlimit.outcome of a decision is "allowed", "denied", "shadow_denied"
// or "error"; redlimit.outcome of a rule is its own verdict: "allowed",
// "denied", "shadow_denied", "error", "missing_key", "invalid_cost",
// "exempt", "skipped" or "unevaluated" (not decided because the request
// was denied without it). Each rule of each decision is counted once.
//
// redlimit.refund.errors counts the refunds that failed: cluster
// compensation (a Redis Cluster or Ring store giving back what the
// other slots of a denied or failed call committed, reported by
// redisstore.Config.OnRefundError) and charges after the response (a
// request's ResponseCost rules settled with an error: a refund refused,
// failed or made after the refund window, a cost out of range; and a
// concurrency rule's release that failed, whose slots stay taken until
// their leases expire: both reported by middleware.Config.OnSettleError).
// Either way units stay consumed that the limit meant to give back.
//
// # Cardinality
//
// Attributes are rule names, sources and outcomes, never keys. The rule
// names are fixed by [Config].Rules: a decision about a rule not listed
// there is counted in redlimit.rule.decisions.unlisted and creates no
// attribute set.
//
// # Cost
//
// The attribute sets are built when New runs; recording a decision builds
// none.
package otellimit
