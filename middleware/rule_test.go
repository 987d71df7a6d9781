package middleware_test

import (
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

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
	good := specRule{Name: "ip", Key: ip, Algorithm: algorithms.GCRA, Limit: gcra3}
	rule := func(edit func(r *specRule)) []specRule {
		r := good
		edit(&r)
		return []specRule{r}
	}
	plan := func(*http.Request) string { return "" }
	mem := newMemory(t, fixed)
	tests := []struct {
		name    string
		backend algorithms.Backend
		cfg     spec
		want    string
	}{
		{"nil backend", nil, spec{Rules: []specRule{good}},
			`redlimit: backend must not be nil`},
		{"no rules", mem, spec{},
			`redlimit: Config.Rules must hold at least one rule`},
		{"negative burst", mem, spec{Rules: rule(func(r *specRule) { r.Name, r.Limit = "login", gcra3.WithBurst(-1) })},
			`redlimit: rule "login": Limit.Burst must be >= 0, got -1`},
		{"zero rate", mem, spec{Rules: rule(func(r *specRule) { r.Limit.Rate = 0 })},
			`redlimit: rule "ip": Limit.Rate must be > 0, got 0`},
		{"zero limit", mem, spec{Rules: rule(func(r *specRule) { r.Limit = algorithms.Limit{} })},
			`redlimit: rule "ip": Limit.Rate must be > 0, got 0`},
		{"sub-microsecond period", mem, spec{Rules: rule(func(r *specRule) { r.Limit.Period = 1500 })},
			`redlimit: rule "ip": Limit.Period must be a whole number of microseconds, got 1.5µs`},
		{"burst on a window", mem, spec{Rules: rule(func(r *specRule) { r.Algorithm, r.Limit = algorithms.FixedWindow, gcra3.WithBurst(5) })},
			`redlimit: rule "ip": Limit.Burst is not used by fixed_window and must be 0, got 5`},
		{"no algorithm", mem, spec{Rules: rule(func(r *specRule) { r.Algorithm = 0 })},
			`redlimit: rule "ip": Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)`},
		{"empty name", mem, spec{Rules: rule(func(r *specRule) { r.Name = "" })},
			`redlimit: Name must be 1-64 characters from [A-Za-z0-9_.-], got ""`},
		{"name with a space", mem, spec{Rules: rule(func(r *specRule) { r.Name = "per ip" })},
			`redlimit: rule "per ip": Name must be 1-64 characters from [A-Za-z0-9_.-], got "per ip"`},
		{"name with braces", mem, spec{Rules: rule(func(r *specRule) { r.Name = "{ip}" })},
			`redlimit: rule "{ip}": Name must be 1-64 characters from [A-Za-z0-9_.-], got "{ip}"`},
		{"name with a colon", mem, spec{Rules: rule(func(r *specRule) { r.Name = "a:b" })},
			`redlimit: rule "a:b": Name must be 1-64 characters from [A-Za-z0-9_.-], got "a:b"`},
		{"name too long", mem, spec{Rules: rule(func(r *specRule) { r.Name = strings.Repeat("n", 65) })},
			`redlimit: rule "` + strings.Repeat("n", 65) + `": Name must be 1-64 characters from [A-Za-z0-9_.-], got "` + strings.Repeat("n", 65) + `"`},
		{"duplicate names", mem, spec{Rules: []specRule{good, good}},
			`redlimit: rule "ip": Name is used by two rules`},
		{"nil key", mem, spec{Rules: rule(func(r *specRule) { r.Key = nil })},
			`redlimit: rule "ip": Key must be set (a keyfunc.Func)`},
		{"unknown MissingKey", mem, spec{Rules: rule(func(r *specRule) { r.MissingKey = 7 })},
			`redlimit: rule "ip": MissingKey unknown value`},
		{"prefix with braces", mem, spec{Prefix: "rate{x}", Rules: []specRule{good}},
			`redlimit: Config.Prefix must not contain braces or spaces, got "rate{x}"`},
		{"prefix with a space", mem, spec{Prefix: "my app", Rules: []specRule{good}},
			`redlimit: Config.Prefix must not contain braces or spaces, got "my app"`},
		{"Tiers without Tier", mem, spec{Rules: rule(func(r *specRule) {
			r.Tiers = map[string]algorithms.Limit{"pro": algorithms.PerMinute(10)}
		})}, `redlimit: rule "ip": Tier must be set: the Limiter's rule has Tiers (redlimit.Rule.Tiers)`},
		{"Tier without Tiers", mem, spec{Rules: rule(func(r *specRule) { r.Tier = plan })},
			`redlimit: rule "ip": Tier must be nil: the Limiter's rule has no Tiers (redlimit.Rule.Tiers)`},
		{"invalid tier limit", mem, spec{Rules: rule(func(r *specRule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"pro": {Rate: 0, Period: 1e9}}
		})}, `redlimit: rule "api": Tiers["pro"].Limit.Rate must be > 0, got 0`},
		{"invalid tier burst", mem, spec{Rules: rule(func(r *specRule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"team": gcra3.WithBurst(-2)}
		})}, `redlimit: rule "api": Tiers["team"].Limit.Burst must be >= 0, got -2`},
		{"two invalid tiers: the first by name", mem, spec{Rules: rule(func(r *specRule) {
			r.Name, r.Tier = "api", plan
			r.Tiers = map[string]algorithms.Limit{"z": {}, "m": {}, "b": gcra3.WithBurst(-1), "x": {}}
		})}, `redlimit: rule "api": Tiers["b"].Limit.Burst must be >= 0, got -1`},
		{"unknown OnError", mem, spec{OnError: 7, Rules: []specRule{good}},
			`redlimit: Config.OnError unknown policy ErrorPolicy(7)`},
		{"bad headers style", mem, spec{Headers: headers.Writer{Style: 9}, Rules: []specRule{good}},
			`redlimit: headers.Writer.Style unknown value 9`},
		{"bad headers reset", mem, spec{Headers: headers.Writer{Reset: 4}, Rules: []specRule{good}},
			`redlimit: headers.Writer.Reset unknown value 4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := build(tt.backend, tt.cfg)
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

// TestNewPairing: New pairs each Rule with the Limiter's rule it names,
// and refuses, naming the rule and field, a Rule naming no rule of the
// Limiter or naming one twice, a rule of the Limiter without a Rule (it
// would have no key material: every request denied), a Rule without a
// Key, a Tier the Limiter's rule has no Tiers for (or Tiers without a
// Tier), and a ResponseCost on a rule that is not Refundable.
func TestNewPairing(t *testing.T) {
	ip := ipFunc(t)
	tier := func(*http.Request) string { return "pro" }
	costs := func(int, int64) int64 { return 0 }
	lim, err := redlimit.New(newMemory(t, fixed), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: gcra3},
		{Name: "plan", Algorithm: algorithms.GCRA, Limit: gcra3, Tiers: map[string]algorithms.Limit{"pro": gcra3.WithBurst(9)}},
		{Name: "login", Algorithm: algorithms.FixedWindow, Limit: gcra3, Refundable: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	good := []middleware.Rule{{Name: "ip", Key: ip}, {Name: "plan", Key: ip, Tier: tier}, {Name: "login", Key: ip, ResponseCost: costs}}
	edit := func(i int, f func(r *middleware.Rule)) []middleware.Rule {
		rs := slices.Clone(good)
		f(&rs[i])
		return rs
	}
	for _, tt := range []struct {
		name  string
		lim   *redlimit.Limiter
		rules []middleware.Rule
		want  string
	}{
		{"nil Limiter", nil, good, `redlimit: lim must not be nil`},
		{"unknown rule", lim, append(slices.Clone(good), middleware.Rule{Name: "user", Key: ip}),
			`redlimit: rule "user": Name names no rule of the Limiter (its rules: "ip", "plan", "login")`},
		{"a rule twice", lim, append(slices.Clone(good), middleware.Rule{Name: "ip", Key: ip}),
			`redlimit: rule "ip": Name is used by two rules`},
		{"a rule of the Limiter without a Rule", lim, good[1:],
			`redlimit: rule "ip": Config.Rules has no Rule for this rule of the Limiter: give it a Rule with its Key`},
		{"no Key", lim, edit(0, func(r *middleware.Rule) { r.Key = nil }),
			`redlimit: rule "ip": Key must be set (a keyfunc.Func)`},
		{"Tier without Tiers", lim, edit(0, func(r *middleware.Rule) { r.Tier = tier }),
			`redlimit: rule "ip": Tier must be nil: the Limiter's rule has no Tiers (redlimit.Rule.Tiers)`},
		{"Tiers without Tier", lim, edit(1, func(r *middleware.Rule) { r.Tier = nil }),
			`redlimit: rule "plan": Tier must be set: the Limiter's rule has Tiers (redlimit.Rule.Tiers)`},
		{"ResponseCost on a rule not Refundable", lim, edit(0, func(r *middleware.Rule) { r.ResponseCost = costs }),
			`redlimit: rule "ip": ResponseCost needs a refundable rule: set redlimit.Rule.Refundable on the Limiter's rule`},
	} {
		mw, err := middleware.New(tt.lim, middleware.Config{Rules: tt.rules})
		var ce *algorithms.ConfigError
		if mw != nil || !errors.As(err, &ce) || err.Error() != tt.want {
			t.Errorf("%s: New = %v, %v; want the *algorithms.ConfigError %q", tt.name, mw, err, tt.want)
		}
	}
	// in any order: the Limiter's order decides
	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{good[2], good[0], good[1]}})
	if err != nil {
		t.Fatalf("New, Rules in another order: %v", err)
	}
	defer mw.Close()
	d, _ := mw.Check(req("GET", "/", "192.0.2.1:1"))
	if len(d.Rules) != 3 || d.Rules[0].Name != "ip" || d.Rules[1].Name != "plan" || d.Rules[1].Limit != gcra3.WithBurst(9) || d.Rules[2].Name != "login" {
		t.Errorf("Check: %+v, want ip, plan (its pro tier), login", d.Rules)
	}
}

// TestCloseOwnership: a Middleware's Close leaves a Limiter given to New
// open (its quota blocks' sweeper still runs); the Limiter built by a
// shortcut is the Middleware's, and its Close closes it.
func TestCloseOwnership(t *testing.T) {
	blocks := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{}}
	base := sweepers()
	lim, err := redlimit.New(newMemory(t, fixed), redlimit.Config{Rules: []redlimit.Rule{blocks}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() }) // again, when a check below fails
	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{{Name: "hot", Key: keyfunc.Const("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Limiter's sweeper to start", func() bool { return sweepers() == base+1 })
	mw.Close()
	time.Sleep(20 * time.Millisecond) // Limiter.Close waits for its sweeper's end; let the goroutine exit too
	if n := sweepers(); n != base+1 {
		t.Errorf("Middleware.Close closed the Limiter given to New: %d sweepers, %d before", n, base)
	}
	lim.Close()
	waitFor(t, "the Limiter's sweeper to end", func() bool { return sweepers() == base })

	mw, err = middleware.PerIP(newMemory(t, fixed), algorithms.GCRA, gcra3,
		middleware.WithLimiterConfig(redlimit.Config{Rules: []redlimit.Rule{blocks}}),
		middleware.WithConfig(middleware.Config{Rules: []middleware.Rule{{Name: "hot", Key: keyfunc.Const("x")}}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Limiter().Close() })
	waitFor(t, "the shortcut's Limiter's sweeper to start", func() bool { return sweepers() == base+1 })
	mw.Close()
	waitFor(t, "the shortcut's Limiter's sweeper to end", func() bool { return sweepers() == base })
}

// sweepers counts the goroutines sweeping quota blocks: one per Limiter
// with blocks (and those derived from it) until it is closed. A sweeper
// just started may not have reached its func yet (its stack shows the
// go statement's wrapper): wait for the count.
func sweepers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "redlimit.(*blocks).sweeper(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWithInvalid: rules added by With are validated like New's, against
// the rules already there.
func TestWithInvalid(t *testing.T) {
	base := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}}})
	for _, tt := range []struct {
		rule specRule
		want string
	}{
		{specRule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}, `redlimit: rule "ip": Name is used by two rules`},
		{specRule{Name: "login", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3.WithBurst(-1)}, `redlimit: rule "login": Limit.Burst must be >= 0, got -1`},
	} {
		mw, err := with(base, tt.rule)
		if err == nil || err.Error() != tt.want || !errors.Is(err, algorithms.ErrInvalidConfig) {
			t.Errorf("With(%q) = %v, %v; want %q", tt.rule.Name, mw, err, tt.want)
		}
	}
}

// TestValidConfigs: the edge of what is valid builds.
func TestValidConfigs(t *testing.T) {
	ip := ipFunc(t)
	for _, cfg := range []spec{
		{Rules: []specRule{{Name: strings.Repeat("n", 64), Key: ip, Algorithm: algorithms.GCRA, Limit: gcra3}}},
		{Rules: []specRule{{Name: "A-z_0.9", Key: ip, Algorithm: algorithms.SlidingLog, Limit: gcra3}}, Prefix: "svc:v2"},
		{Rules: []specRule{{Name: "ip", Key: ip, Algorithm: algorithms.TokenBucket, Limit: gcra3.WithBurst(10), MissingKey: redlimit.SkipMissingKey}},
			OnError: redlimit.FailClosed, Headers: headers.Writer{Style: headers.None, Reset: headers.DeltaSeconds}, Timeout: -1},
	} {
		mw, err := build(newMemory(t, fixed), cfg)
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
	ipRule := specRule{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}
	userRule := specRule{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}

	t.Run("deny", func(t *testing.T) {
		var rec recorder
		mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{ipRule, userRule}, OnDecision: rec.hook})
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
		mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{ipRule, userRule}, OnDecision: rec.hook, Headers: headers.Writer{Style: headers.IETF}})
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
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules:      []specRule{{Name: "client", Key: client, Algorithm: algorithms.GCRA, Limit: gcra3}},
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
