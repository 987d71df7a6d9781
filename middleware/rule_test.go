package middleware_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// TestNewInvalid: every invalid configuration fails in New with a message
// naming the rule and the field, and matches algorithms.ErrInvalidConfig.
func TestNewInvalid(t *testing.T) {
	ip := ipFunc(t)
	good := middleware.Rule{Name: "ip", Key: ip, Algorithm: algorithms.GCRA, Limit: gcra3}
	rule := func(edit func(r *middleware.Rule)) []middleware.Rule {
		r := good
		edit(&r)
		return []middleware.Rule{r}
	}
	plan := func(*http.Request) string { return "" }
	mem := newMemory(t, fixed)
	tests := []struct {
		name    string
		backend algorithms.Backend
		cfg     middleware.Config
		want    string
	}{
		{"nil backend", nil, middleware.Config{Rules: []middleware.Rule{good}},
			`redlimit: backend must not be nil`},
		{"no rules", mem, middleware.Config{},
			`redlimit: Config.Rules must hold at least one rule`},
		{"negative burst", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name, r.Limit = "login", gcra3.WithBurst(-1) })},
			`redlimit: rule "login": Limit.Burst must be >= 0, got -1`},
		{"zero rate", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Limit.Rate = 0 })},
			`redlimit: rule "ip": Limit.Rate must be > 0, got 0`},
		{"zero limit", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Limit = algorithms.Limit{} })},
			`redlimit: rule "ip": Limit.Rate must be > 0, got 0`},
		{"sub-microsecond period", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Limit.Period = 1500 })},
			`redlimit: rule "ip": Limit.Period must be a whole number of microseconds, got 1.5µs`},
		{"burst on a window", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Algorithm, r.Limit = algorithms.FixedWindow, gcra3.WithBurst(5) })},
			`redlimit: rule "ip": Limit.Burst is not used by fixed_window and must be 0, got 5`},
		{"no algorithm", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Algorithm = 0 })},
			`redlimit: rule "ip": Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)`},
		{"empty name", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name = "" })},
			`redlimit: Name must be 1-64 characters from [A-Za-z0-9_.-], got ""`},
		{"name with a space", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name = "per ip" })},
			`redlimit: rule "per ip": Name must be 1-64 characters from [A-Za-z0-9_.-], got "per ip"`},
		{"name with braces", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name = "{ip}" })},
			`redlimit: rule "{ip}": Name must be 1-64 characters from [A-Za-z0-9_.-], got "{ip}"`},
		{"name with a colon", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name = "a:b" })},
			`redlimit: rule "a:b": Name must be 1-64 characters from [A-Za-z0-9_.-], got "a:b"`},
		{"name too long", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Name = strings.Repeat("n", 65) })},
			`redlimit: rule "` + strings.Repeat("n", 65) + `": Name must be 1-64 characters from [A-Za-z0-9_.-], got "` + strings.Repeat("n", 65) + `"`},
		{"duplicate names", mem, middleware.Config{Rules: []middleware.Rule{good, good}},
			`redlimit: rule "ip": Name is used by two rules`},
		{"nil key", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Key = nil })},
			`redlimit: rule "ip": Key must be set (a keyfunc.Func)`},
		{"unknown MissingKey", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.MissingKey = 7 })},
			`redlimit: rule "ip": MissingKey unknown value`},
		{"prefix with braces", mem, middleware.Config{Prefix: "rate{x}", Rules: []middleware.Rule{good}},
			`redlimit: Config.Prefix must not contain braces or spaces, got "rate{x}"`},
		{"prefix with a space", mem, middleware.Config{Prefix: "my app", Rules: []middleware.Rule{good}},
			`redlimit: Config.Prefix must not contain braces or spaces, got "my app"`},
		{"Tiers without Tier", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) {
			r.Tiers = map[string]algorithms.Limit{"pro": algorithms.PerMinute(10)}
		})}, `redlimit: rule "ip": Tier must be set when Tiers is`},
		{"Tier without Tiers", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) { r.Tier = plan })},
			`redlimit: rule "ip": Tiers must list at least one tier when Tier is set`},
		{"invalid tier limit", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"pro": {Rate: 0, Period: 1e9}}
		})}, `redlimit: rule "api": Tiers["pro"].Limit.Rate must be > 0, got 0`},
		{"invalid tier burst", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"team": gcra3.WithBurst(-2)}
		})}, `redlimit: rule "api": Tiers["team"].Limit.Burst must be >= 0, got -2`},
		{"two invalid tiers: the first by name", mem, middleware.Config{Rules: rule(func(r *middleware.Rule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"z": {}, "m": {}, "b": gcra3.WithBurst(-1), "x": {}}
		})}, `redlimit: rule "api": Tiers["b"].Limit.Burst must be >= 0, got -1`},
		{"unknown OnError", mem, middleware.Config{OnError: 7, Rules: []middleware.Rule{good}},
			`redlimit: Config.OnError unknown policy ErrorPolicy(7)`},
		{"bad headers style", mem, middleware.Config{Headers: headers.Writer{Style: 9}, Rules: []middleware.Rule{good}},
			`redlimit: headers.Writer.Style unknown value 9`},
		{"bad headers reset", mem, middleware.Config{Headers: headers.Writer{Reset: 4}, Rules: []middleware.Rule{good}},
			`redlimit: headers.Writer.Reset unknown value 4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := middleware.New(tt.backend, tt.cfg)
			if err == nil {
				mw.Close()
				t.Fatalf("New succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("New error\n got %q\nwant %q", err, tt.want)
			}
			if !errors.Is(err, algorithms.ErrInvalidConfig) {
				t.Errorf("New error %q does not match algorithms.ErrInvalidConfig", err)
			}
			var ce *algorithms.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("New error %T is not an *algorithms.ConfigError", err)
			}
		})
	}
}

// TestWithInvalid: rules added by With are validated like New's, against
// the rules already there.
func TestWithInvalid(t *testing.T) {
	base := newMW(t, newMemory(t, fixed), middleware.Config{Rules: []middleware.Rule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}}})
	for _, tt := range []struct {
		rule middleware.Rule
		want string
	}{
		{middleware.Rule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}, `redlimit: rule "ip": Name is used by two rules`},
		{middleware.Rule{Name: "login", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3.WithBurst(-1)}, `redlimit: rule "login": Limit.Burst must be >= 0, got -1`},
	} {
		mw, err := base.With(tt.rule)
		if err == nil || err.Error() != tt.want || !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Errorf("With(%q) = %v, %v; want %q", tt.rule.Name, mw, err, tt.want)
		}
	}
}

// TestValidConfigs: the edge of what is valid builds.
func TestValidConfigs(t *testing.T) {
	ip := ipFunc(t)
	for _, cfg := range []middleware.Config{
		{Rules: []middleware.Rule{{Name: strings.Repeat("n", 64), Key: ip, Algorithm: algorithms.GCRA, Limit: gcra3}}},
		{Rules: []middleware.Rule{{Name: "A-z_0.9", Key: ip, Algorithm: algorithms.SlidingLog, Limit: gcra3}}, Prefix: "svc:v2"},
		{Rules: []middleware.Rule{{Name: "ip", Key: ip, Algorithm: algorithms.TokenBucket, Limit: gcra3.WithBurst(10), MissingKey: redlimit.SkipMissingKey}},
			OnError: redlimit.FailClosed, Headers: headers.Writer{Style: headers.None, Reset: headers.DeltaSeconds}, Timeout: -1},
	} {
		mw, err := middleware.New(newMemory(t, fixed), cfg)
		if err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
			continue
		}
		mw.Close()
	}
}

// TestMissingKey: DenyMissingKey (the zero value) answers 429 without
// Retry-After and charges nothing; SkipMissingKey leaves the rule out and
// the other rules apply; keyfunc.Or falls back to another key.
func TestMissingKey(t *testing.T) {
	ipRule := middleware.Rule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}
	userRule := middleware.Rule{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}

	t.Run("deny", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), middleware.Config{Rules: []middleware.Rule{ipRule, userRule}, OnDecision: rec.hook})
		h := mw.Handler(ok)
		for i := range 5 {
			w := serve(h, req("GET", "/", "192.0.2.1:1"))
			checkResponse(t, "anonymous "+itoa(int64(i)), w, http.StatusTooManyRequests, map[string]string{})
			if got, want := w.Body.String(), "rate limit exceeded: user; this request can never be allowed (no key, invalid cost, or cost above the limit)\n"; got != want {
				t.Errorf("body %q, want %q", got, want)
			}
		}
		d := rec.last(t)
		if d.Allowed || !d.Rules[1].MissingKey || d.Rules[1].Evaluated || d.Rules[0].Evaluated || d.Source != redlimit.SourceNone || d.Err != nil {
			t.Errorf("decision %+v", d)
		}
		// The anonymous denials charged the IP nothing.
		w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice"))
		checkResponse(t, "signed in", w, 200, xHeaders("3", "2", epoch0+20, ""))
	})
	t.Run("skip", func(t *testing.T) {
		userRule := userRule
		userRule.MissingKey = redlimit.SkipMissingKey
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), middleware.Config{Rules: []middleware.Rule{ipRule, userRule}, OnDecision: rec.hook, Headers: headers.Writer{Style: headers.IETF}})
		h := mw.Handler(ok)
		for i, want := range []map[string]string{
			{"Ratelimit-Policy": `"ip";q=3;w=60`, "Ratelimit": `"ip";r=2;t=20`},
			{"Ratelimit-Policy": `"ip";q=3;w=60`, "Ratelimit": `"ip";r=1;t=40`},
			{"Ratelimit-Policy": `"ip";q=3;w=60`, "Ratelimit": `"ip";r=0;t=60`},
			{"Ratelimit-Policy": `"ip";q=3;w=60`, "Ratelimit": `"ip";r=0;t=60`, "Retry-After": "20"},
		} {
			code := 200
			if i == 3 {
				code = 429
			}
			checkResponse(t, "anonymous "+itoa(int64(i)), serve(h, req("GET", "/", "192.0.2.1:1")), code, want)
			if d := rec.last(t); !d.Rules[1].Skipped || d.Rules[1].MissingKey || d.Rules[1].Evaluated {
				t.Errorf("user rule %+v, want skipped", d.Rules[1])
			}
		}
		// A signed-in client elsewhere gets both rules.
		checkResponse(t, "signed in", serve(h, req("GET", "/", "192.0.2.9:1", "X-User", "bob")), 200, map[string]string{
			"Ratelimit-Policy": `"ip";q=3;w=60, "user";q=10;w=60`, "Ratelimit": `"ip";r=2;t=20, "user";r=9;t=6`,
		})
	})
	t.Run("or", func(t *testing.T) {
		var rec recorder
		client := mustKey(keyfunc.Or(mustKey(keyfunc.Join(keyfunc.Const("user"), userFunc)), mustKey(keyfunc.Join(keyfunc.Const("ip"), ipFunc(t)))))
		mw := newMW(t, newMemory(t, fixed), middleware.Config{
			Rules:      []middleware.Rule{{Name: "client", Key: client, Algorithm: algorithms.GCRA, Limit: gcra3}},
			OnDecision: rec.hook,
		})
		h := mw.Handler(ok)
		for _, tt := range []struct {
			r    *http.Request
			key  string
			want map[string]string
		}{
			{req("GET", "/", "192.0.2.1:1"), "rate:client:gcra:{ip:192.0.2.1}", xHeaders("3", "2", epoch0+20, "")},
			{req("GET", "/", "192.0.2.1:1", "X-User", "alice"), "rate:client:gcra:{user:alice}", xHeaders("3", "2", epoch0+20, "")},
			{req("GET", "/", "192.0.2.1:1"), "rate:client:gcra:{ip:192.0.2.1}", xHeaders("3", "1", epoch0+40, "")},
		} {
			checkResponse(t, tt.key, serve(h, tt.r), 200, tt.want)
			if got := rec.last(t).Rules[0].Key; got != tt.key {
				t.Errorf("key %q, want %q", got, tt.key)
			}
		}
	})
}
