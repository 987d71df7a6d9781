package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/admin"
)

// app holds the service's limiters: base (per IP and per user) for every
// API route, and two layered ones adding a per-user endpoint rule. Each
// route's rules are decided together: one Redis round trip per request.
type app struct {
	lim                    *redlimit.Limiter // base's; orders' and payments' derive from it
	base, orders, payments *middleware.Middleware
}

// newApp builds the limiters on backend. src, when not nil, is the admin
// page's view of them: it hears every decision
// (middleware.Config.OnDecision) and gets their limiters.
func newApp(backend algorithms.Backend, trusted []netip.Prefix, logger *slog.Logger, src *admin.Source) (*app, error) {
	ip, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: trusted})
	if err != nil {
		return nil, err
	}
	user, err := keyfunc.Header("X-User-ID") // stands in for authentication
	if err != nil {
		return nil, err
	}
	var onDecision func(*http.Request, *redlimit.Decision)
	if src != nil {
		onDecision = src.OnHTTP
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Logger: logger,
		Rules: []redlimit.Rule{
			{Name: "ip", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(1000)},
			// Anonymous requests have no user: this rule skips them.
			{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100), MissingKey: redlimit.SkipMissingKey},
		},
	})
	if err != nil {
		return nil, err
	}
	base, err := middleware.New(lim, middleware.Config{
		OnDecision: onDecision,
		Rules:      []middleware.Rule{{Name: "ip", Key: ip}, {Name: "user", Key: user}},
	})
	if err != nil {
		lim.Close()
		return nil, err
	}
	orderLim, err := lim.With(redlimit.Rule{Name: "orders", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: redlimit.SkipMissingKey})
	if err != nil {
		lim.Close()
		return nil, err
	}
	orders, err := base.With(orderLim, middleware.Rule{Name: "orders", Key: user})
	if err != nil {
		lim.Close()
		return nil, err
	}
	// The seed's compound key "rate:api:payment:user:{id}" is this rule:
	// stored as "rate:payments:sl:{<id>}", in the same hash slot as the user
	// rule, so a user's rules share one Redis Cluster node.
	payLim, err := lim.With(redlimit.Rule{Name: "payments", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerMinute(5), MissingKey: redlimit.SkipMissingKey})
	if err != nil {
		lim.Close()
		return nil, err
	}
	payments, err := base.With(payLim, middleware.Rule{Name: "payments", Key: user})
	if err != nil {
		lim.Close()
		return nil, err
	}
	if src != nil {
		src.Attach(base.Limiter(), orders.Limiter(), payments.Limiter())
		src.DescribeKeys(map[string]string{"ip": "client IP", "user": "X-User-ID header", "orders": "X-User-ID header", "payments": "X-User-ID header"})
	}
	return &app{lim: lim, base: base, orders: orders, payments: payments}, nil
}

// Close waits for the middlewares' work after responses, then stops the
// limiter's background fallback probe (shared with the limiters derived
// from it).
func (a *app) Close() {
	a.base.Close() // and orders and payments, which share its queue
	a.lim.Close()
}

// chiRouter mounts the limiters per route with r.With, after routing, so
// every rule sees the matched route.
func (a *app) chiRouter() http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", healthz)
	r.With(a.base.Handler).Get("/api/profile", profile)
	r.With(a.orders.Handler).Post("/api/orders", order)
	r.With(a.payments.Handler).Post("/api/payments", payment)
	return r
}

// stdMux mounts the same routes on net/http's ServeMux by wrapping each
// handler.
func (a *app) stdMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.Handle("GET /api/profile", a.base.Handler(http.HandlerFunc(profile)))
	mux.Handle("POST /api/orders", a.orders.Handler(http.HandlerFunc(order)))
	mux.Handle("POST /api/payments", a.payments.Handler(http.HandlerFunc(payment)))
	return mux
}

func healthz(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }

func profile(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusOK, map[string]string{"user": userOf(r)})
}

func order(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusCreated, map[string]string{"order": "accepted", "user": userOf(r)})
}

func payment(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusCreated, map[string]string{"payment": "accepted", "user": userOf(r)})
}

func userOf(r *http.Request) string {
	if u := r.Header.Get("X-User-ID"); u != "" {
		return u
	}
	return "anonymous"
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
