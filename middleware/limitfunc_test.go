package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware"
)

// planLimits is a LimitFunc: the limit of the request's X-Plan header (a
// stand-in for a plan the application trusts), an error for an unknown
// plan. It counts its calls.
type planLimits struct {
	calls atomic.Int64
	plans map[string]algorithms.Limit
}

var errUnknownPlan = errors.New("unknown plan")

func (p *planLimits) limit(r *http.Request) (algorithms.Limit, error) {
	p.calls.Add(1)
	l, ok := p.plans[r.Header.Get("X-Plan")]
	if !ok {
		return algorithms.Limit{}, errUnknownPlan
	}
	return l, nil
}

// TestRuleLimitFunc: each request is limited by what its rule's LimitFunc
// returns, exactly, and the headers say that limit.
func TestRuleLimitFunc(t *testing.T) {
	p := &planLimits{plans: map[string]algorithms.Limit{"free": algorithms.PerMinute(2), "pro": algorithms.PerMinute(4)}}
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:      []specRule{{Name: "plan", Key: userFunc, Algorithm: algorithms.FixedWindow, LimitFunc: p.limit}},
		OnDecision: rec.hook,
	})
	h := mw.Handler(ok)
	for _, tt := range []struct {
		user, plan string
		codes      []int
		limit      string
	}{
		{"alice", "free", []int{200, 200, 429, 429}, "2"},
		{"bob", "pro", []int{200, 200, 200, 200, 429}, "4"},
	} {
		for i, code := range tt.codes {
			w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", tt.user, "X-Plan", tt.plan))
			if w.Code != code || w.Header().Get("X-Ratelimit-Limit") != tt.limit {
				t.Errorf("%s request %d: %d with limit %q, want %d with %q", tt.user, i, w.Code, w.Header().Get("X-Ratelimit-Limit"), code, tt.limit)
			}
		}
	}
	// alice upgrades: her next request is decided under the new plan.
	w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", "pro"))
	if w.Code != 200 || w.Header().Get("X-Ratelimit-Remaining") != "1" {
		t.Errorf("alice on pro: %d remaining %q, want 200 with 1 (2 of 4 used)", w.Code, w.Header().Get("X-Ratelimit-Remaining"))
	}
	// The function is not called for a request without a key.
	calls := p.calls.Load()
	if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-Plan", "pro")); w.Code != 429 || p.calls.Load() != calls {
		t.Errorf("anonymous: %d, %d LimitFunc calls; want 429 and none", w.Code, p.calls.Load()-calls)
	}
}

// TestRuleLimitFuncErrors: a failing LimitFunc or an invalid limit is
// never replaced by a default. An invalid limit is a programmer error:
// under every policy the ErrorHandler answers 500 and nothing is consumed.
// A failing LimitFunc goes to the policy: under FailClosed the
// ErrorHandler's 503, nothing consumed; under FailOpen and Fallback the
// rule is left out and the other rules still apply.
func TestRuleLimitFuncErrors(t *testing.T) {
	p := &planLimits{plans: map[string]algorithms.Limit{"zero": {}, "burst": algorithms.PerMinute(5).WithBurst(10)}}
	for _, tt := range []struct {
		plan    string
		want    string
		invalid bool
	}{
		{"gold", `redlimit: rule "plan": LimitFunc failed: unknown plan`, false},
		{"zero", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Rate must be > 0, got 0`, true},
		{"burst", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Burst is not used by sliding_window and must be 0, got 10`, true},
	} {
		for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
			var rec recorder
			mw := newMW(t, newMemory(t, fixed), spec{
				Rules: []specRule{
					{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
					{Name: "plan", Key: userFunc, Algorithm: algorithms.SlidingWindow, LimitFunc: p.limit},
				},
				OnError:    policy,
				OnDecision: rec.hook,
			})
			h := mw.Handler(ok)
			w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", tt.plan))
			d := rec.last(t)
			var le *redlimit.LimitError
			if !errors.As(d.Err, &le) || d.Err.Error() != tt.want || !d.Rules[1].LimitFailed || d.Rules[1].Evaluated {
				t.Errorf("%s %v: Err %v, plan rule %+v; want the *redlimit.LimitError %q", tt.plan, policy, d.Err, d.Rules[1], tt.want)
			}
			if tt.invalid {
				checkResponse(t, tt.plan+" "+policy.String(), w, http.StatusInternalServerError, map[string]string{})
				if !d.Failed || d.Rules[0].Evaluated {
					t.Errorf("%s %v: %+v, want refused, nothing decided", tt.plan, policy, d)
				}
				continue
			}
			if policy == redlimit.FailClosed {
				checkResponse(t, tt.plan+" fail-closed", w, http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"})
				continue // nothing consumed: see TestRuleLimitFuncNothingConsumed
			}
			// The ip rule alone decided and was charged.
			checkResponse(t, tt.plan+" "+policy.String(), w, 200, xHeaders("3", "2", epoch0+20, ""))
		}
	}
}

// TestRuleLimitFuncNothingConsumed: under FailClosed a failed LimitFunc
// refuses the request before any rule is charged.
func TestRuleLimitFuncNothingConsumed(t *testing.T) {
	p := &planLimits{plans: map[string]algorithms.Limit{"free": algorithms.PerMinute(10)}}
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
			{Name: "plan", Key: userFunc, Algorithm: algorithms.GCRA, LimitFunc: p.limit},
		},
		OnError: redlimit.FailClosed,
	})
	h := mw.Handler(ok)
	for range 5 {
		if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", "gold")); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("unknown plan: %d, want 503", w.Code)
		}
	}
	checkResponse(t, "known plan", serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", "free")), 200, map[string]string{
		"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": itoa(epoch0 + 20),
	})
}

// TestRuleLimitFuncInvalid: a request's limit comes from its tier or
// from LimitFunc, not both; the Limiter's rule still needs a limit of its
// own.
func TestRuleLimitFuncInvalid(t *testing.T) {
	fn := func(*http.Request) (algorithms.Limit, error) { return gcra3, nil }
	tier := func(*http.Request) string { return "" }
	tiers := map[string]algorithms.Limit{"pro": gcra3}
	for _, tt := range []struct {
		rule specRule
		want string
	}{
		{specRule{Name: "p", Key: userFunc, Algorithm: algorithms.GCRA, LimitFunc: fn, Tier: tier, Limit: gcra3},
			`redlimit: rule "p": Tier must be nil when LimitFunc is set: a request's limit comes from its tier or from LimitFunc`},
		{specRule{Name: "p", Key: userFunc, Algorithm: algorithms.GCRA, LimitFunc: fn, Tier: tier, Limit: gcra3, Tiers: tiers},
			`redlimit: rule "p": Tier must be nil when LimitFunc is set: a request's limit comes from its tier or from LimitFunc`},
		{specRule{Name: "p", Key: userFunc, Algorithm: algorithms.GCRA, LimitFunc: fn, Limit: gcra3, Tiers: tiers},
			`redlimit: rule "p": LimitFunc must be nil: the Limiter's rule has Tiers, chosen by Tier`},
		{specRule{Name: "p", Key: userFunc, LimitFunc: fn},
			`redlimit: rule "p": Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)`},
	} {
		_, err := build(newMemory(t, fixed), spec{Rules: []specRule{tt.rule}})
		var ce *algorithms.ConfigError
		if !errors.As(err, &ce) || err.Error() != tt.want {
			t.Errorf("New = %v, want the *algorithms.ConfigError %q", err, tt.want)
		}
	}
}

// TestRuleLimitFuncOverLimiterLimit: on a Limiter rule with a Limit of
// its own, an HTTP request's limit is its LimitFunc's; a LimitFunc that
// returns the zero Limit refuses the rule (a *redlimit.LimitError),
// never falling back to the Limiter's Limit, while the Limiter's callers
// without a request keep that Limit.
func TestRuleLimitFuncOverLimiterLimit(t *testing.T) {
	plan := algorithms.PerMinute(5)
	lim, err := redlimit.New(newMemory(t, fixed), redlimit.Config{
		Rules: []redlimit.Rule{{Name: "plan", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(2)}},
		Now:   fixed, Logger: quiet, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	var rec recorder
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{Name: "plan", Key: userFunc, LimitFunc: func(r *http.Request) (algorithms.Limit, error) {
			if r.Header.Get("X-Plan") == "none" {
				return algorithms.Limit{}, nil
			}
			return plan, nil
		}}},
		OnDecision: rec.hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	h := mw.Handler(ok)
	checkResponse(t, "planned", serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice")), 200, xHeaders("5", "4", epoch0+40, ""))
	d := rec.last(t)
	if d.Rules[0].Limit != plan {
		t.Errorf("planned request: limit %v, want the LimitFunc's %v", d.Rules[0].Limit, plan)
	}
	serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "bob", "X-Plan", "none"))
	d = rec.last(t)
	var le *redlimit.LimitError
	if !errors.As(d.Err, &le) || !d.Rules[0].LimitFailed || d.Rules[0].Evaluated {
		t.Errorf("zero Limit: Err %v, rule %+v; want a *redlimit.LimitError, the rule not decided", d.Err, d.Rules[0])
	}
	if want := `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Rate must be > 0, got 0`; d.Err == nil || d.Err.Error() != want {
		t.Errorf("zero Limit: Err %v, want %q", d.Err, want)
	}
	if got := lim.Allow(context.Background(), "carol"); got.Rules[0].Limit != algorithms.PerMinute(2) {
		t.Errorf("Limiter.Allow: limit %v, want the Limiter rule's %v", got.Rules[0].Limit, algorithms.PerMinute(2))
	}
}

// TestRuleLimitFuncDenyCacheRedis, on a real redis-server: a key denied
// under a small limit is answered by the deny cache while its limit stays,
// and allowed at once, by Redis, when its LimitFunc returns a larger one.
func TestRuleLimitFuncDenyCacheRedis(t *testing.T) {
	srv := redistest.Require(t)
	b, err := redisstore.New(srv.Client(t), redisstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	var limit atomic.Pointer[algorithms.Limit]
	small, large := algorithms.PerHour(2), algorithms.PerHour(100)
	limit.Store(&small)
	mw := newMW(t, b, spec{
		Prefix: strings.ReplaceAll(redistest.Prefix(t), "/", "."),
		Rules: []specRule{{Name: "plan", Key: userFunc, Algorithm: algorithms.FixedWindow,
			LimitFunc: func(*http.Request) (algorithms.Limit, error) { return *limit.Load(), nil }}},
	})
	h := mw.Handler(ok)
	alice := func() *http.Request { return req("GET", "/", "192.0.2.1:1", "X-User", "alice") }
	codes := map[int]int{}
	for range 10 {
		codes[serve(h, alice()).Code]++
	}
	if codes[200] != 2 || codes[429] != 8 || mw.Limiter().Status().LocalDenials != 7 {
		t.Fatalf("under 2/h: %v, %d local denials; want 2 allowed, 8 denied, 7 of them locally", codes, mw.Limiter().Status().LocalDenials)
	}
	limit.Store(&large)
	w := serve(h, alice())
	checkResponse(t, "under 100/h", w, 200, xHeaders("100", "97", epoch0+3600-epoch0%3600, ""))
	if mw.Limiter().Status().LocalDenials != 7 {
		t.Errorf("%d local denials after the limit grew, want still 7", mw.Limiter().Status().LocalDenials)
	}
	// Back to the small limit: denied by Redis, then locally again.
	limit.Store(&small)
	for i := range 2 {
		if w := serve(h, alice()); w.Code != 429 {
			t.Errorf("back under 2/h, request %d: %d, want 429", i, w.Code)
		}
	}
	if mw.Limiter().Status().LocalDenials != 8 {
		t.Errorf("%d local denials back under 2/h, want 8", mw.Limiter().Status().LocalDenials)
	}
}

// TestWithLimitFuncAndExempt: rules added by With take their limit from
// their LimitFunc, and the base's Config.Exempt still exempts from all.
func TestWithLimitFuncAndExempt(t *testing.T) {
	p := &planLimits{plans: map[string]algorithms.Limit{"free": algorithms.PerMinute(1)}}
	base := newMW(t, newMemory(t, fixed), spec{
		Rules:  []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		Exempt: func(r *http.Request) bool { return r.Header.Get("X-Health") != "" },
	})
	mw, err := with(base, specRule{Name: "plan", Key: userFunc, Algorithm: algorithms.GCRA, LimitFunc: p.limit})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(ok)
	for i, code := range []int{200, 429} {
		if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", "free")); w.Code != code {
			t.Errorf("request %d: %d, want %d", i, w.Code, code)
		}
	}
	calls := p.calls.Load()
	for range 3 {
		if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "X-Plan", "free", "X-Health", "1")); w.Code != 200 || len(limitHeaders(w.Header())) != 0 {
			t.Errorf("exempt: %d %v, want 200 without headers", w.Code, w.Header())
		}
	}
	if p.calls.Load() != calls {
		t.Errorf("LimitFunc called %d times for exempt requests, want 0", p.calls.Load()-calls)
	}
}

// TestRuleLimitFuncConcurrentRedis, on a real redis-server: 64 goroutines
// for two customers on different plans let exactly each plan's limit
// through.
func TestRuleLimitFuncConcurrentRedis(t *testing.T) {
	srv := redistest.Require(t)
	b, err := redisstore.New(srv.Client(t), redisstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	p := &planLimits{plans: map[string]algorithms.Limit{"free": algorithms.PerHour(10), "pro": algorithms.PerHour(50)}}
	mw := newMW(t, b, spec{
		Prefix: strings.ReplaceAll(redistest.Prefix(t), "/", "."),
		Rules:  []specRule{{Name: "plan", Key: userFunc, Algorithm: algorithms.SlidingLog, LimitFunc: p.limit}},
	})
	h := mw.Handler(ok)
	var allowed [2]atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			user, plan := "alice", "free"
			if g%2 == 1 {
				user, plan = "bob", "pro"
			}
			for range 4 {
				if serve(h, req("GET", "/", "192.0.2.1:1", "X-User", user, "X-Plan", plan)).Code == 200 {
					allowed[g%2].Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed[0].Load() != 10 || allowed[1].Load() != 50 {
		t.Errorf("allowed free %d, pro %d of 128 each; want 10 and 50", allowed[0].Load(), allowed[1].Load())
	}
}
