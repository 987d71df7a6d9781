// Package mwspec is the tests' shorthand for a Limiter and the HTTP
// middleware that wraps it, each rule written once (the tests of
// middleware, ginlimit and the Echo example share it).
package mwspec

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// Spec is a Limiter's and its Middleware's configuration in one literal,
// each rule written once. Configs gives the two Configs.
type Spec struct {
	Rules []Rule

	// the Limiter's (redlimit.Config)
	Prefix          string
	Timeout         time.Duration
	NoDenyCache     bool
	DenyCache       denycache.Config
	OnError         redlimit.ErrorPolicy
	FallbackBackend algorithms.Backend
	FallbackAfter   time.Duration
	ProbeInterval   time.Duration
	Instances       int
	Shadow          bool
	RefundWindow    time.Duration
	Now             func() time.Time
	Logger          *slog.Logger

	// the Middleware's (middleware.Config)
	Headers           headers.Writer
	Denied            http.Handler
	MissingKeyDenied  http.Handler
	ErrorHandler      http.Handler
	Exempt            func(*http.Request) bool
	DecisionInContext bool
	OnDecision        func(*http.Request, *redlimit.Decision)
	OnSettleError     func(*http.Request, error)
}

// Rule is a redlimit.Rule and its middleware.Rule in one literal. A
// rule with a ResponseCost is Refundable; a rule with a LimitFunc and no
// Limit gets a Limiter LimitFunc that fails (its limit comes from the
// request alone).
type Rule struct {
	Name         string
	Key          keyfunc.Func
	Algorithm    algorithms.Algorithm
	Limit        algorithms.Limit
	Tier         func(*http.Request) string
	Tiers        map[string]algorithms.Limit
	LimitFunc    func(*http.Request) (algorithms.Limit, error)
	Exempt       func(*http.Request) bool
	Cost         func(*http.Request) int64
	ResponseCost func(status int, written int64) int64
	Blocks       *redlimit.BlockConfig
	MissingKey   redlimit.MissingKey
	Shadow       bool
}

var errHTTPOnly = errors.New("the limit comes from the HTTP request")

func httpOnly(context.Context, string) (algorithms.Limit, error) {
	return algorithms.Limit{}, errHTTPOnly
}

// Split returns the rules of rs as the Limiter's and the Middleware's.
func Split(rs []Rule) ([]redlimit.Rule, []middleware.Rule) {
	var lr []redlimit.Rule
	var mr []middleware.Rule
	for _, r := range rs {
		l := redlimit.Rule{Name: r.Name, Algorithm: r.Algorithm, Limit: r.Limit, Tiers: r.Tiers,
			Refundable: r.ResponseCost != nil, Blocks: r.Blocks, MissingKey: r.MissingKey, Shadow: r.Shadow}
		if r.LimitFunc != nil && r.Limit == (algorithms.Limit{}) && r.Tiers == nil {
			l.LimitFunc = httpOnly
		}
		lr = append(lr, l)
		mr = append(mr, middleware.Rule{Name: r.Name, Key: r.Key, Tier: r.Tier, LimitFunc: r.LimitFunc,
			Exempt: r.Exempt, Cost: r.Cost, ResponseCost: r.ResponseCost})
	}
	return lr, mr
}

// Configs returns the two Configs of s.
func (s Spec) Configs() (redlimit.Config, middleware.Config) {
	lr, mr := Split(s.Rules)
	return redlimit.Config{
			Rules: lr, Prefix: s.Prefix, Timeout: s.Timeout, NoDenyCache: s.NoDenyCache, DenyCache: s.DenyCache,
			OnError: s.OnError, FallbackBackend: s.FallbackBackend, FallbackAfter: s.FallbackAfter,
			ProbeInterval: s.ProbeInterval, Instances: s.Instances, Shadow: s.Shadow,
			RefundWindow: s.RefundWindow, Now: s.Now, Logger: s.Logger,
		}, middleware.Config{
			Rules: mr, Headers: s.Headers, Denied: s.Denied, MissingKeyDenied: s.MissingKeyDenied,
			ErrorHandler: s.ErrorHandler, Exempt: s.Exempt, DecisionInContext: s.DecisionInContext,
			OnDecision: s.OnDecision, OnSettleError: s.OnSettleError,
		}
}

// New builds the Limiter of s on b and the Middleware that wraps it,
// failing tb on an error of either, and closes both when tb ends.
func (s Spec) New(tb testing.TB, b algorithms.Backend) *middleware.Middleware {
	tb.Helper()
	lc, mc := s.Configs()
	lim, err := redlimit.New(b, lc)
	if err != nil {
		tb.Fatalf("redlimit.New: %v", err)
	}
	tb.Cleanup(func() { lim.Close() })
	mw, err := middleware.New(lim, mc)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { mw.Close() })
	return mw
}
