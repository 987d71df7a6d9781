package middleware_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
)

// gcra3 is 3 requests a minute: with the fixed clock, each request moves
// the reset 20s further and a denial waits 20s.
var gcra3 = algorithms.PerMinute(3)

// threeAndDenied is what a GCRA 3/min rule answers to four requests at
// t0 with the default X-RateLimit fields.
var threeAndDenied = []struct {
	code    int
	headers map[string]string
}{
	{200, xHeaders("3", "2", epoch0+20, "")},
	{200, xHeaders("3", "1", epoch0+40, "")},
	{200, xHeaders("3", "0", epoch0+60, "")},
	{429, xHeaders("3", "0", epoch0+60, "20")},
}

// TestChi mounts the middleware on a chi router in each supported way: the
// route pattern is known, so "/users/1" and "/users/2" share the route's
// bucket; statuses and headers are exact.
func TestChi(t *testing.T) {
	mounts := []struct {
		name  string
		mount func(r chi.Router, mw func(http.Handler) http.Handler)
	}{
		{"With", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Get("/users/{id}", ok)
		}},
		{"Group", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.Group(func(r chi.Router) {
				r.Use(mw)
				r.Get("/users/{id}", ok)
			})
		}},
		{"Route+With", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.Route("/users", func(r chi.Router) {
				r.With(mw).Get("/{id}", ok)
			})
		}},
	}
	for _, tt := range mounts {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			mw := newMW(t, newMemory(t, fixed), spec{
				Rules:      []specRule{{Name: "route", Key: mustKey(keyfunc.Join(keyfunc.Route(), ipFunc(t))), Algorithm: algorithms.GCRA, Limit: gcra3}},
				OnDecision: rec.hook,
			})
			r := chi.NewRouter()
			tt.mount(r, mw.Handler)
			for i, want := range threeAndDenied {
				w := serve(r, req("GET", "/users/"+strconv.Itoa(i+1), "192.0.2.1:1234"))
				checkResponse(t, "request "+strconv.Itoa(i+1), w, want.code, want.headers)
			}
			if got, want := rec.last(t).Rules[0].Key, "rate:route:gcra:{/users/%7Bid%7D:192.0.2.1}"; got != want {
				t.Errorf("storage key %q, want %q", got, want)
			}
			w := serve(r, req("GET", "/users/9", "192.0.2.2:1234"))
			checkResponse(t, "other client", w, 200, xHeaders("3", "2", epoch0+20, ""))
		})
	}
}

// TestChiTopLevelUse shows what the package documentation warns about: a
// top-level r.Use runs before routing, keyfunc.Route finds no pattern, and
// the rule's MissingKey policy applies.
func TestChiTopLevelUse(t *testing.T) {
	route := specRule{Name: "route", Key: mustKey(keyfunc.Join(keyfunc.Route(), ipFunc(t))), Algorithm: algorithms.GCRA, Limit: gcra3}
	ip := specRule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}

	t.Run("deny", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{route}, OnDecision: rec.hook})
		r := chi.NewRouter()
		r.Use(mw.Handler)
		r.Get("/users/{id}", ok)
		w := serve(r, req("GET", "/users/1", "192.0.2.1:1234"))
		checkResponse(t, "GET /users/1", w, http.StatusTooManyRequests, map[string]string{})
		d := rec.last(t)
		if d.Allowed || !d.Rules[0].MissingKey || d.Rules[0].Evaluated || d.Source != redlimit.SourceNone {
			t.Errorf("decision %+v, want denied for a missing key, not evaluated", d)
		}
	})
	t.Run("skip", func(t *testing.T) {
		route := route
		route.MissingKey = redlimit.SkipMissingKey
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{ip, route}, OnDecision: rec.hook})
		r := chi.NewRouter()
		r.Use(mw.Handler)
		r.Get("/users/{id}", ok)
		for i, want := range threeAndDenied {
			w := serve(r, req("GET", "/users/"+strconv.Itoa(i+1), "192.0.2.1:1234"))
			checkResponse(t, "request "+strconv.Itoa(i+1), w, want.code, want.headers)
		}
		if d := rec.last(t); !d.Rules[1].Skipped || d.Rules[1].Key != "" {
			t.Errorf("route rule %+v, want skipped", d.Rules[1])
		}
	})
}

// TestChiSubRouterUse documents a chi subtlety: inside r.Route (or a
// mounted router) r.Use runs when the parent router has matched only the
// mount point, so keyfunc.Route sees the mount's pattern "/users/*" and
// every route of the sub-router shares one bucket. Use r.With there.
func TestChiSubRouterUse(t *testing.T) {
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:      []specRule{{Name: "route", Key: keyfunc.Route(), Algorithm: algorithms.GCRA, Limit: gcra3}},
		OnDecision: rec.hook,
	})
	r := chi.NewRouter()
	r.Route("/users", func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/{id}", ok)
		r.Get("/{id}/posts", ok)
	})
	serve(r, req("GET", "/users/1", "192.0.2.1:1"))
	w := serve(r, req("GET", "/users/1/posts", "192.0.2.1:1"))
	checkResponse(t, "second route", w, 200, xHeaders("3", "1", epoch0+40, ""))
	if got, want := rec.last(t).Rules[0].Key, "rate:route:gcra:{/users/*}"; got != want {
		t.Errorf("storage key %q, want %q", got, want)
	}
}

// TestServeMuxStyles runs four requests through an http.ServeMux with Go
// 1.22 patterns under every header style, checking every field exactly.
func TestServeMuxStyles(t *testing.T) {
	x := threeAndDenied
	ietf := func(r, t int, retry string) map[string]string {
		h := map[string]string{
			"Ratelimit-Policy": `"orders";q=3;w=60`,
			"Ratelimit":        `"orders";r=` + strconv.Itoa(r) + ";t=" + strconv.Itoa(t),
		}
		if retry != "" {
			h["Retry-After"] = retry
		}
		return h
	}
	delta := func(h map[string]string) map[string]string {
		c := map[string]string{}
		for k, v := range h {
			c[k] = v
		}
		reset, _ := strconv.ParseInt(c["X-Ratelimit-Reset"], 10, 64)
		c["X-Ratelimit-Reset"] = itoa(reset - epoch0)
		return c
	}
	both := func(a, b map[string]string) map[string]string {
		c := map[string]string{}
		for k, v := range a {
			c[k] = v
		}
		for k, v := range b {
			c[k] = v
		}
		return c
	}
	ietfSteps := []map[string]string{ietf(2, 20, ""), ietf(1, 40, ""), ietf(0, 60, ""), ietf(0, 60, "20")}
	tests := []struct {
		name   string
		writer headers.Writer
		want   []map[string]string
	}{
		{"x-ratelimit/epoch", headers.Writer{}, []map[string]string{x[0].headers, x[1].headers, x[2].headers, x[3].headers}},
		{"x-ratelimit/delta", headers.Writer{Reset: headers.DeltaSeconds},
			[]map[string]string{delta(x[0].headers), delta(x[1].headers), delta(x[2].headers), delta(x[3].headers)}},
		{"ietf", headers.Writer{Style: headers.IETF}, ietfSteps},
		{"both", headers.Writer{Style: headers.Both}, []map[string]string{
			both(x[0].headers, ietfSteps[0]), both(x[1].headers, ietfSteps[1]), both(x[2].headers, ietfSteps[2]), both(x[3].headers, ietfSteps[3])}},
		{"none", headers.Writer{Style: headers.None}, []map[string]string{{}, {}, {}, {}}},
	}
	codes := []int{200, 200, 200, 429}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mw := newMW(t, newMemory(t, fixed), spec{
				Rules:   []specRule{{Name: "orders", Key: mustKey(keyfunc.Join(keyfunc.Route(), ipFunc(t))), Algorithm: algorithms.GCRA, Limit: gcra3}},
				Headers: tt.writer,
			})
			mux := http.NewServeMux()
			mux.Handle("POST /api/orders", mw.Handler(ok))
			mux.Handle("GET /api/orders/{id}", mw.Handler(ok))
			for i, want := range tt.want {
				w := serve(mux, req("POST", "/api/orders", "192.0.2.1:1234"))
				checkResponse(t, "POST "+strconv.Itoa(i+1), w, codes[i], want)
				if codes[i] == 200 && w.Body.String() != "ok" {
					t.Errorf("POST %d: body %q, want the next handler's", i+1, w.Body.String())
				}
			}
			// Another pattern is another bucket, whatever the path value.
			w := serve(mux, req("GET", "/api/orders/42", "192.0.2.1:1234"))
			if w.Code != 200 {
				t.Errorf("GET /api/orders/42: status %d, want 200", w.Code)
			}
			// A method the pattern does not match never reaches the limiter.
			w = serve(mux, req("DELETE", "/api/orders", "192.0.2.1:1234"))
			checkResponse(t, "DELETE", w, http.StatusMethodNotAllowed, map[string]string{})
		})
	}
}

// TestLayered puts a per-IP, a per-user and a per-endpoint rule on the
// payments route (the first two shared with the rest of the API through
// With). A request the endpoint rule denies consumes nothing from the IP and
// user rules; X- fields follow the most restrictive rule, IETF lists all.
func TestLayered(t *testing.T) {
	var rec recorder
	base := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)},
			{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(8)},
		},
		Headers:    headers.Writer{Style: headers.Both},
		OnDecision: rec.hook,
	})
	payments, err := with(base, specRule{Name: "payments", Key: mustKey(keyfunc.Join(keyfunc.Route(), userFunc)), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(5)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /api/payments", payments.Handler(ok))
	mux.Handle("GET /api/profile", base.Handler(ok))
	pay := func() *http.Request { return req("POST", "/api/payments", "192.0.2.1:1234", "X-User", "alice") }

	// ip: 6s per request, user: 7.5s, payments: 12s.
	policy := `"ip";q=10;w=60, "user";q=8;w=60, "payments";q=5;w=60`
	steps := []struct {
		code int
		want map[string]string
	}{
		{200, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "4", "X-Ratelimit-Reset": itoa(epoch0 + 12),
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=9;t=6, "user";r=7;t=8, "payments";r=4;t=12`}},
		{200, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "3", "X-Ratelimit-Reset": itoa(epoch0 + 24),
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=8;t=12, "user";r=6;t=15, "payments";r=3;t=24`}},
		{200, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": itoa(epoch0 + 36),
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=7;t=18, "user";r=5;t=23, "payments";r=2;t=36`}},
		{200, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": itoa(epoch0 + 48),
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=6;t=24, "user";r=4;t=30, "payments";r=1;t=48`}},
		{200, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(epoch0 + 60),
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=5;t=30, "user";r=3;t=38, "payments";r=0;t=60`}},
		// Denied by payments: ip and user are reported unchanged.
		{429, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(epoch0 + 60), "Retry-After": "12",
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=5;t=30, "user";r=3;t=38, "payments";r=0;t=60`}},
		{429, map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(epoch0 + 60), "Retry-After": "12",
			"Ratelimit-Policy": policy, "Ratelimit": `"ip";r=5;t=30, "user";r=3;t=38, "payments";r=0;t=60`}},
	}
	for i, st := range steps {
		checkResponse(t, "payment "+strconv.Itoa(i+1), serve(mux, pay()), st.code, st.want)
	}
	d := rec.last(t)
	if d.Allowed || !d.Rules[0].Result.Allowed || !d.Rules[1].Result.Allowed || d.Rules[2].Result.Allowed {
		t.Errorf("last payment decision %+v, want denied by payments alone", d)
	}

	// The two denials consumed nothing: the next request elsewhere takes the
	// 6th unit of ip (4 left) and of user (2 left, the tighter: X- fields).
	checkResponse(t, "profile", serve(mux, req("GET", "/api/profile", "192.0.2.1:1234", "X-User", "alice")), 200, map[string]string{
		"X-Ratelimit-Limit": "8", "X-Ratelimit-Remaining": "2", "X-Ratelimit-Reset": itoa(epoch0 + 45),
		"Ratelimit-Policy": `"ip";q=10;w=60, "user";q=8;w=60`, "Ratelimit": `"ip";r=4;t=36, "user";r=2;t=45`,
	})
	// Check agrees without a response.
	cd, err := base.Check(req("GET", "/api/profile", "192.0.2.1:1234", "X-User", "alice"))
	if err != nil || !cd.Allowed || cd.Rules[0].Result.Remaining != 3 || cd.Rules[1].Result.Remaining != 1 {
		t.Errorf("Check = %+v, %v; want allowed with ip 3 and user 1 remaining", cd, err)
	}
}

// TestTiers gives each tier its own limit: exact remaining per tier, and the
// IETF window of the tier's own limit even when two tiers share a capacity.
func TestTiers(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{{
			Name: "api", Key: userFunc, Algorithm: algorithms.GCRA,
			Limit: algorithms.PerMinute(2),
			Tier:  func(r *http.Request) string { return r.Header.Get("X-Plan") },
			Tiers: map[string]algorithms.Limit{
				"pro":    algorithms.PerMinute(10),
				"team":   algorithms.PerHour(100).WithBurst(20),
				"second": algorithms.PerSecond(2), // same capacity as the default: only w differs
			},
		}},
		Headers: headers.Writer{Style: headers.Both, Reset: headers.DeltaSeconds},
	})
	h := mw.Handler(ok)
	tests := []struct {
		user, plan string
		code       int
		want       map[string]string
	}{
		{"free", "", 200, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "30",
			"Ratelimit-Policy": `"api";q=2;w=60`, "Ratelimit": `"api";r=1;t=30`}},
		{"free", "unknown-plan", 200, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "60",
			"Ratelimit-Policy": `"api";q=2;w=60`, "Ratelimit": `"api";r=0;t=60`}},
		{"free", "", 429, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "60", "Retry-After": "30",
			"Ratelimit-Policy": `"api";q=2;w=60`, "Ratelimit": `"api";r=0;t=60`}},
		{"pro", "pro", 200, map[string]string{"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "9", "X-Ratelimit-Reset": "6",
			"Ratelimit-Policy": `"api";q=10;w=60`, "Ratelimit": `"api";r=9;t=6`}},
		{"pro", "pro", 200, map[string]string{"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "8", "X-Ratelimit-Reset": "12",
			"Ratelimit-Policy": `"api";q=10;w=60`, "Ratelimit": `"api";r=8;t=12`}},
		// 100/h with a burst of 20: 36s per unit, 20 units to refill = 720s.
		{"team", "team", 200, map[string]string{"X-Ratelimit-Limit": "20", "X-Ratelimit-Remaining": "19", "X-Ratelimit-Reset": "36",
			"Ratelimit-Policy": `"api";q=20;w=720`, "Ratelimit": `"api";r=19;t=36`}},
		{"sec", "second", 200, map[string]string{"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "1",
			"Ratelimit-Policy": `"api";q=2;w=1`, "Ratelimit": `"api";r=1;t=1`}},
	}
	for i, tt := range tests {
		w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", tt.user, "X-Plan", tt.plan))
		checkResponse(t, strconv.Itoa(i)+": "+tt.user+"/"+tt.plan, w, tt.code, tt.want)
	}
}

// TestCost: Rule.Cost takes n units; a cost above the capacity is denied
// without Retry-After and consumes nothing. Negative costs: TestNegativeCost.
func TestCost(t *testing.T) {
	cost := func(r *http.Request) int64 {
		n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		return n
	}
	rule := specRule{Name: "export", Key: ipFunc(t), Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), Cost: cost}
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{rule}})
	h := mw.Handler(ok)
	steps := []struct {
		cost string
		code int
		want map[string]string
	}{
		{"3", 200, xHeaders("10", "7", epoch0+18, "")},
		{"0", 200, xHeaders("10", "6", epoch0+24, "")},  // 0 counts as 1
		{"11", 429, xHeaders("10", "6", epoch0+24, "")}, // never: no Retry-After
		{"6", 200, xHeaders("10", "0", epoch0+60, "")},
		{"1", 429, xHeaders("10", "0", epoch0+60, "6")},
	}
	for _, st := range steps {
		w := serve(h, req("POST", "/export", "192.0.2.1:1", "X-Cost", st.cost))
		checkResponse(t, "cost "+st.cost, w, st.code, st.want)
		if st.cost == "11" && w.Body.String() != "rate limit exceeded: export; this request can never be allowed (no key, invalid cost, or cost above the limit)\n" {
			t.Errorf("cost 11: body %q", w.Body.String())
		}
	}
}

// TestNegativeCost: a negative cost from Rule.Cost, a programmer error,
// refuses that request under every error policy: the ErrorHandler's 500
// (DefaultError), nothing consumed by any rule, the next handler not
// called, the decision naming the rule and the error. In shadow mode the
// rule would have denied, and the live rules decide alone.
func TestNegativeCost(t *testing.T) {
	cost := func(r *http.Request) int64 {
		n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		return n
	}
	for _, tt := range []struct {
		name   string
		policy redlimit.ErrorPolicy
		shadow bool
		code   int
	}{
		{"fallback", redlimit.Fallback, false, 500},
		{"fail open", redlimit.FailOpen, false, 500},
		{"fail closed", redlimit.FailClosed, false, 500},
		{"shadow", redlimit.Fallback, true, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			mw := newMW(t, newMemory(t, fixed), spec{
				Rules: []specRule{
					{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
					{Name: "export", Key: ipFunc(t), Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), Cost: cost, Shadow: tt.shadow},
				},
				OnError:    tt.policy,
				OnDecision: rec.hook,
			})
			h := mw.Handler(ok)
			w := serve(h, req("POST", "/export", "192.0.2.1:1", "X-Cost", "-1"))
			d := rec.last(t)
			if w.Code != tt.code || d.Allowed != (tt.code == 200) || !d.Rules[1].InvalidCost || !errors.Is(d.Err, algorithms.ErrInvalidConfig) {
				t.Errorf("cost -1: status %d, decision %+v; want %d, Rules[1].InvalidCost and an ErrInvalidConfig", w.Code, d, tt.code)
			}
			if want := `redlimit: rule "export": Cost must be >= 0, got -1`; d.Err == nil || d.Err.Error() != want {
				t.Errorf("cost -1: Err %v, want %q", d.Err, want)
			}
			if tt.shadow {
				if !d.WouldDeny || !d.Rules[0].Evaluated || d.Rules[1].Evaluated {
					t.Errorf("cost -1 in shadow: decision %+v, want WouldDeny with rule ip evaluated alone", d)
				}
				checkResponse(t, "cost -1 in shadow", w, 200, xHeaders("3", "2", epoch0+20, ""))
				return
			}
			checkResponse(t, "cost -1", w, 500, map[string]string{})
			if body := "rate limiter misconfigured\n"; w.Body.String() != body || !d.Failed {
				t.Errorf("cost -1: body %q, want %q", w.Body.String(), body)
			}
			// Nothing was consumed: the first valid request takes the first unit.
			w = serve(h, req("POST", "/export", "192.0.2.1:1", "X-Cost", "1"))
			checkResponse(t, "cost 1 after cost -1", w, 200, xHeaders("3", "2", epoch0+20, ""))
		})
	}
}

// TestShadow: a shadow rule never denies, the decision says it would have,
// the 200 carries no Retry-After, and the live rules are charged exactly
// one unit per request even when the shadow rule denies.
func TestShadow(t *testing.T) {
	t.Run("rule", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules: []specRule{
				{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)},
				{Name: "strict", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2), Shadow: true},
			},
			Headers:    headers.Writer{Style: headers.IETF},
			OnDecision: rec.hook,
		})
		h := mw.Handler(ok)
		for i := range 6 {
			w := serve(h, req("GET", "/", "192.0.2.1:1"))
			if w.Code != 200 || w.Header().Get("Retry-After") != "" {
				t.Fatalf("request %d: status %d, Retry-After %q; want 200 without", i+1, w.Code, w.Header().Get("Retry-After"))
			}
			d := rec.last(t)
			if wantWould := i >= 2; d.WouldDeny != wantWould || !d.Allowed {
				t.Errorf("request %d: Allowed %v WouldDeny %v, want true %v", i+1, d.Allowed, d.WouldDeny, wantWould)
			}
			if got, want := d.Rules[0].Result.Remaining, int64(9-i); got != want {
				t.Errorf("request %d: live rule remaining %d, want %d", i+1, got, want)
			}
			strict := min(2, i+1)
			want := `"ip";r=` + itoa(int64(9-i)) + ";t=" + itoa(int64(6*(i+1))) + `, "strict";r=` + itoa(int64(2-strict)) + ";t=" + itoa(int64(30*strict))
			if got := w.Header().Get("Ratelimit"); got != want {
				t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
			}
			if !d.Rules[1].Shadow || d.Rules[0].Shadow {
				t.Errorf("request %d: Shadow flags %v %v, want false true", i+1, d.Rules[0].Shadow, d.Rules[1].Shadow)
			}
		}
	})
	t.Run("config", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules:      []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
			Shadow:     true,
			OnDecision: rec.hook,
		})
		h := mw.Handler(ok)
		for i := range 5 {
			w := serve(h, req("GET", "/", "192.0.2.1:1"))
			remaining := max(2-i, 0)
			checkResponse(t, "request "+strconv.Itoa(i+1), w, 200, xHeaders("3", strconv.Itoa(remaining), epoch0+int64(20*min(i+1, 3)), ""))
			if d := rec.last(t); d.WouldDeny != (i >= 3) || !d.Allowed {
				t.Errorf("request %d: Allowed %v WouldDeny %v", i+1, d.Allowed, d.WouldDeny)
			}
		}
	})
	t.Run("missing key", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules: []specRule{
				{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
				{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: gcra3, Shadow: true},
			},
			OnDecision: rec.hook,
		})
		w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
		checkResponse(t, "anonymous", w, 200, xHeaders("3", "2", epoch0+20, ""))
		if d := rec.last(t); !d.Allowed || !d.WouldDeny || !d.Rules[1].MissingKey {
			t.Errorf("decision %+v, want allowed, would deny for the user rule's missing key", d)
		}
	})
}

// TestRetryAfterUntouched: an allowed request leaves a Retry-After that an
// outer handler set alone; only a shadow denial's own Retry-After is removed.
func TestRetryAfterUntouched(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
	})
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120") // say, a maintenance notice
			next.ServeHTTP(w, r)
		})
	}
	w := serve(outer(mw.Handler(ok)), req("GET", "/", "192.0.2.1:1"))
	if got := w.Header().Get("Retry-After"); w.Code != 200 || got != "120" {
		t.Errorf("status %d, Retry-After %q; want 200 with the outer handler's 120", w.Code, got)
	}
}

// TestLatencyField: Decision.Latency measures the decision: not zero, and
// within the time the whole request took.
func TestLatencyField(t *testing.T) {
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:      []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		OnDecision: rec.hook,
	})
	start := time.Now()
	serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
	served := time.Since(start)
	if l := rec.last(t).Latency; l <= 0 || l > served {
		t.Errorf("Latency %v, want a positive duration within the %v the request took", l, served)
	}
}
