// Package admin is an admin page for redlimit limiters: an http.Handler a
// service mounts on an internal listener, in the manner of net/http/pprof
// and expvar, that shows what an on-call engineer asks at 3 a.m.:
//
//   - the rules: name, algorithm, limit, key, shadow or enforced, tiers;
//   - decisions per rule over the last 1, 5 and 15 minutes: allowed,
//     denied (by the backend, or locally by the deny cache), shadow
//     denied, missing key, exempt, skipped, errors, decided by the
//     fallback; and the decision latency (p50, p99, max);
//   - the hottest and the most denied keys of each rule, from a
//     Space-Saving heavy-hitters summary (fixed memory per rule, O(1) per
//     request) over the current and previous minute;
//   - fallback state, the last backend error and when, the deny cache's
//     size;
//   - a key lookup: one key's state under one rule, from the backend,
//     consuming nothing (as redlimit.Limiter.Peek does), and a Reset of that
//     key (as redlimit.Limiter.Reset does, for that rule alone), which every instance sees since
//     the state is in Redis.
//
// The page is server-rendered HTML (html/template, no script; an optional
// meta refresh), and the same data is JSON with ?format=json.
//
// # Wiring
//
//	adm, err := admin.New(admin.Config{Authorize: admin.Token(os.Getenv("ADMIN_TOKEN")), Logger: logger})
//	api, err := adm.Source("api")
//	lim, err := redlimit.New(backend, redlimit.Config{Rules: rules})
//	mw, err := middleware.New(lim, middleware.Config{Rules: keys, OnDecision: api.OnHTTP})
//	api.Attach(lim)
//	go http.ListenAndServe("127.0.0.1:9090", adm) // an internal listener
//
// # Safe by default
//
// New refuses a Config without Authorize: the page serves nobody until the
// service says who may see it. POSTs (Reset) need the page's CSRF token
// and are refused when the browser says they come from another origin
// (net/http.CrossOriginProtection). Key material is masked (IPv4 to its
// /24, IPv6 to its /48, other keys by an HMAC under a secret random per
// process unless Config.MaskSecret sets one: see [MaskKey]) unless
// Config.ShowKeys; html/template escapes every value; a bad lookup gets a
// 400 that says what is wrong; every Reset is logged through
// Config.Logger with who asked, the rule and the key.
//
// # Cost
//
// Nothing when no Source is wired. Wired, a decision costs a few atomic
// additions and one summary update per evaluated rule, no allocation (see
// BenchmarkHandler in package middleware and docs/admin.md).
package admin
