package middleware_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// built returns a func that fails t on err, and otherwise returns mw,
// closed when t ends: built(t)(middleware.PerIP(...)).
func built(t *testing.T) func(*middleware.Middleware, error) *middleware.Middleware {
	return func(mw *middleware.Middleware, err error) *middleware.Middleware {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mw.Close() })
		return mw
	}
}

// TestPerIP: one rule named "ip" on the TCP peer, or on the client a
// trusted proxy names with WithIPConfig.
func TestPerIP(t *testing.T) {
	var rec recorder
	cfg := specOpts(spec{Now: fixed, Logger: quiet, OnDecision: rec.hook})
	mw := built(t)(middleware.PerIP(newMemory(t, fixed), algorithms.GCRA, gcra3, cfg...))
	h := mw.Handler(ok)
	for i, code := range []int{200, 200, 200, 429} {
		w := serve(h, req("GET", "/", "192.0.2.1:1", "X-Forwarded-For", "198.51.100.1"))
		if w.Code != code {
			t.Errorf("request %d: %d, want %d", i, w.Code, code)
		}
	}
	if key := rec.last(t).Rules[0].Key; key != "rate:ip:gcra:{192.0.2.1}" {
		t.Errorf("key %q, want rate:ip:gcra:{192.0.2.1} (the peer: no proxy trusted)", key)
	}
	checkResponse(t, "another IP", serve(h, req("GET", "/", "192.0.2.2:1")), 200, xHeaders("3", "2", epoch0+20, ""))

	lbs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	mw = built(t)(middleware.PerIP(newMemory(t, fixed), algorithms.FixedWindow, gcra3,
		append(cfg, middleware.WithIPConfig(keyfunc.IPConfig{TrustedProxies: lbs}), middleware.WithName("edge"))...))
	serve(mw.Handler(ok), req("GET", "/", "10.0.0.1:1", "X-Forwarded-For", "10.9.9.9, 198.51.100.1"))
	if key := rec.last(t).Rules[0].Key; key != "rate:edge:fw:{198.51.100.1}" {
		t.Errorf("behind a trusted proxy: key %q, want rate:edge:fw:{198.51.100.1}", key)
	}
}

// TestPerHeader: one rule named after the header; a request without it is
// denied, with 429 by default and 401 with MissingKeyDenied.
func TestPerHeader(t *testing.T) {
	var rec recorder
	for _, tt := range []struct {
		header, rule string
	}{
		{"X-API-Key", "x-api-key"},
		{"x_tenant.id", "x_tenant.id"},
		{"X-Key!", "header"},
		{strings.Repeat("K", 65), "header"},
	} {
		mw := built(t)(middleware.PerHeader(newMemory(t, fixed), tt.header, algorithms.GCRA, gcra3,
			specOpts(spec{Now: fixed, Logger: quiet, OnDecision: rec.hook})...))
		h := mw.Handler(ok)
		for i, code := range []int{200, 200, 200, 429} {
			if w := serve(h, req("GET", "/", "192.0.2.1:1", tt.header, "k1")); w.Code != code {
				t.Errorf("%s request %d: %d, want %d", tt.header, i, w.Code, code)
			}
		}
		if d := rec.last(t); d.Rules[0].Name != tt.rule || d.Rules[0].Key != "rate:"+tt.rule+":gcra:{k1}" {
			t.Errorf("%s: rule %q key %q, want rule %q", tt.header, d.Rules[0].Name, d.Rules[0].Key, tt.rule)
		}
		if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != http.StatusTooManyRequests {
			t.Errorf("%s missing: %d, want 429", tt.header, w.Code)
		}
	}
	mw := built(t)(middleware.PerHeader(newMemory(t, fixed), "X-API-Key", algorithms.GCRA, gcra3,
		specOpts(spec{MissingKeyDenied: middleware.Unauthorized, Logger: quiet})...))
	h := mw.Handler(ok)
	if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != http.StatusUnauthorized || w.Body.String() != "unauthorized: no key for rule x-api-key\n" {
		t.Errorf("missing with Unauthorized: %d %q, want 401", w.Code, w.Body.String())
	}
	if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-Api-Key", "")); w.Code != http.StatusUnauthorized {
		t.Errorf("empty with Unauthorized: %d, want 401", w.Code)
	}
}

// TestPerUserAndKey: PerUser keys by the user func, PerKey by any key
// func; WithConfig's rules come first and decide with theirs.
func TestPerUserAndKey(t *testing.T) {
	var rec recorder
	user := func(r *http.Request) (string, bool) { u := r.Header.Get("X-User"); return u, u != "" }
	mw := built(t)(middleware.PerUser(newMemory(t, fixed), user, algorithms.TokenBucket, gcra3, specOpts(spec{
		Rules:      []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}},
		OnDecision: rec.hook, Logger: quiet,
	})...))
	h := mw.Handler(ok)
	for i, code := range []int{200, 200, 200, 429} {
		if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice")); w.Code != code {
			t.Errorf("alice %d: %d, want %d", i, w.Code, code)
		}
	}
	d := rec.last(t)
	if len(d.Rules) != 2 || d.Rules[0].Key != "rate:ip:gcra:{192.0.2.1}" || d.Rules[1].Key != "rate:user:tb:{alice}" || d.Rules[0].Result.Remaining != 7 {
		t.Errorf("decision %+v, want the ip rule then the user rule, ip charged 3 times", d.Rules)
	}
	if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != 429 || !rec.last(t).Rules[1].MissingKey {
		t.Errorf("anonymous: %d, want 429 for the missing user", w.Code)
	}

	mw = built(t)(middleware.PerKey(newMemory(t, fixed), mustKey(keyfunc.Join(keyfunc.Method(), keyfunc.Const("x"))), algorithms.SlidingWindow, gcra3,
		specOpts(spec{OnDecision: rec.hook, Logger: quiet})...))
	serve(mw.Handler(ok), req("POST", "/", "192.0.2.1:1"))
	if key := rec.last(t).Rules[0].Key; key != "rate:key:sw:{POST:x}" {
		t.Errorf("PerKey key %q, want rate:key:sw:{POST:x}", key)
	}
}

// TestShortcutsInvalid: every bad argument is an *algorithms.ConfigError
// naming what is wrong; nothing panics.
func TestShortcutsInvalid(t *testing.T) {
	mem := newMemory(t, fixed)
	user := func(*http.Request) (string, bool) { return "", false }
	ipCfg := middleware.WithIPConfig(keyfunc.IPConfig{})
	for _, tt := range []struct {
		name string
		new  func() (*middleware.Middleware, error)
		want string
	}{
		{"nil backend", func() (*middleware.Middleware, error) { return middleware.PerIP(nil, algorithms.GCRA, gcra3) },
			`redlimit: backend must not be nil`},
		{"zero limit", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, algorithms.Limit{})
		},
			`redlimit: rule "ip": Limit.Rate must be > 0, got 0`},
		{"no algorithm", func() (*middleware.Middleware, error) { return middleware.PerUser(mem, user, 0, gcra3) },
			`redlimit: rule "user": Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)`},
		{"bad IPConfig", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, gcra3, middleware.WithIPConfig(keyfunc.IPConfig{IPv4Prefix: 33}))
		}, `redlimit: rule "ip": IPConfig.IPv4Prefix must be in 1..32, got 33`},
		{"trust everyone", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, gcra3, middleware.WithIPConfig(keyfunc.IPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}))
		}, `redlimit: rule "ip": IPConfig.TrustedProxies[0] is 0.0.0.0/0, which trusts every address and lets any client choose its key`},
		{"empty header", func() (*middleware.Middleware, error) { return middleware.PerHeader(mem, "", algorithms.GCRA, gcra3) },
			`redlimit: PerHeader name must not be empty`},
		{"header with a space", func() (*middleware.Middleware, error) {
			return middleware.PerHeader(mem, "X API", algorithms.GCRA, gcra3)
		},
			`redlimit: PerHeader name "X API" is not a valid header field name`},
		{"header with a colon", func() (*middleware.Middleware, error) {
			return middleware.PerHeader(mem, "X-Key:", algorithms.GCRA, gcra3)
		},
			`redlimit: PerHeader name "X-Key:" is not a valid header field name`},
		{"header with a newline", func() (*middleware.Middleware, error) {
			return middleware.PerHeader(mem, "X-Key\r\nX-Admin", algorithms.GCRA, gcra3)
		}, `redlimit: PerHeader name "X-Key\r\nX-Admin" is not a valid header field name`},
		{"nil user", func() (*middleware.Middleware, error) { return middleware.PerUser(mem, nil, algorithms.GCRA, gcra3) },
			`redlimit: PerUser user must not be nil`},
		{"nil key", func() (*middleware.Middleware, error) { return middleware.PerKey(mem, nil, algorithms.GCRA, gcra3) },
			`redlimit: PerKey key must not be nil`},
		{"WithIPConfig on PerHeader", func() (*middleware.Middleware, error) {
			return middleware.PerHeader(mem, "X-API-Key", algorithms.GCRA, gcra3, ipCfg)
		}, `redlimit: WithIPConfig applies to PerIP only`},
		{"WithIPConfig on PerUser", func() (*middleware.Middleware, error) {
			return middleware.PerUser(mem, user, algorithms.GCRA, gcra3, ipCfg)
		},
			`redlimit: WithIPConfig applies to PerIP only`},
		{"nil Option", func() (*middleware.Middleware, error) { return middleware.PerIP(mem, algorithms.GCRA, gcra3, nil) },
			`redlimit: Option must not be nil`},
		{"bad name", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, gcra3, middleware.WithName("per ip"))
		}, `redlimit: rule "per ip": Name must be 1-64 characters from [A-Za-z0-9_.-], got "per ip"`},
		{"name used by WithConfig's rule", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, gcra3, specOpts(spec{
				Rules: []specRule{{Name: "ip", Key: keyfunc.Const("x"), Algorithm: algorithms.GCRA, Limit: gcra3}}})...)
		}, `redlimit: rule "ip": Name is used by two rules`},
		{"bad Config", func() (*middleware.Middleware, error) {
			return middleware.PerIP(mem, algorithms.GCRA, gcra3, specOpts(spec{OnError: 9})...)
		}, `redlimit: Config.OnError unknown policy ErrorPolicy(9)`},
	} {
		var mw *middleware.Middleware
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s: panic %v", tt.name, v)
				}
			}()
			mw, err = tt.new()
		}()
		var ce *algorithms.ConfigError
		if mw != nil || !errors.As(err, &ce) || err.Error() != tt.want {
			t.Errorf("%s: %v, %v; want the *algorithms.ConfigError %q", tt.name, mw, err, tt.want)
		}
	}
}
