// Package promlimit exports redlimit's decisions as Prometheus metrics.
//
// It lives in a module of its own, so that a service that limits with
// redlimit compiles no Prometheus client unless it imports this package.
// A [Metrics] is fed by the decision hooks: give [Metrics.HTTP] to
// middleware.Config.OnDecision, or [Metrics.Engine] to
// redlimit.Config.OnDecision, [Metrics.SettleError] to
// middleware.Config.OnSettleError and [Metrics.RefundError] to
// redisstore.Config.OnRefundError; then register it:
//
//	m, err := promlimit.New(promlimit.Config{Rules: []string{"ip", "user"}})
//	lim, err := redlimit.New(backend, redlimit.Config{Rules: rules})
//	mw, err := middleware.New(lim, middleware.Config{Rules: keys, OnDecision: m.HTTP, OnSettleError: m.SettleError})
//	m.Watch(lim) // deny-cache hits and stalled calls, read at each scrape
//	prometheus.MustRegister(m)
//
// # Metrics
//
//	redlimit_decisions_total{source, outcome}        counter, one per decision (request)
//	redlimit_rule_decisions_total{rule, outcome}     counter, one per rule of each decision
//	redlimit_decision_duration_seconds{source}       histogram of Decision.Latency
//	redlimit_unlisted_rule_decisions_total           counter, rules not named in Config.Rules
//	redlimit_refund_errors_total                     counter, refunds that failed (see below)
//	redlimit_local_denials_total                     counter, deny-cache hits of the watched engines
//	redlimit_stalled_backend_calls                   gauge, abandoned backend calls of the watched engines
//
// source is which backend decided: "primary", "fallback" (the in-process
// fallback of the Fallback error policy, while the primary is down) or
// "none" (no backend answered: every rule exempt or skipped, a missing
// key, or the error policy decided). A fallback that decides shows as
// decisions with source="fallback": alert on their rate.
//
// A decision's outcome is "allowed", "denied", "shadow_denied" (allowed, but
// a shadow rule would have denied it) or "error" (not decided because of an
// error: let through under FailOpen or Fallback, refused under FailClosed).
//
// A rule's outcome is its own verdict, whatever the other rules said:
// "allowed", "denied", "shadow_denied" (a shadow rule that would deny),
// "error" (not decided because of an error, its limit unknown included),
// "missing_key" (no key material under DenyMissingKey), "invalid_cost" (a
// negative cost), "exempt", "skipped" (no key material under
// SkipMissingKey) or "unevaluated" (not decided because the request was
// denied without it: another rule's missing key or cost, or another rule
// denied from the deny cache). Each rule of each decision is counted once,
// so the outcomes of a rule sum to the decisions it took part in.
//
// redlimit_refund_errors_total counts the refunds that failed: cluster
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
// Labels are rule names, sources and outcomes, never keys. The rule names
// are fixed by [Config].Rules: a decision about a rule not listed there is
// counted in redlimit_unlisted_rule_decisions_total and creates no series.
// Every series exists, at zero, from the start.
//
// # Cost
//
// The series are resolved when New runs: observing a decision allocates
// nothing and takes no lock (one map lookup per rule, atomic adds).
package promlimit
