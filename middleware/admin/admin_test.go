package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

var t0 = time.Unix(1_700_000_000, 0)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// remote hides a memstore's traits: the engine treats it as a remote
// backend that honours deadlines, with a deny cache in front of it.
type remote struct {
	contract.Carrier
	mem *memstore.Store
}

func (r remote) Allow(ctx context.Context, c []algorithms.Check, res []algorithms.Result) error {
	return r.mem.Allow(ctx, c, res)
}
func (r remote) Reset(ctx context.Context, keys []string) error { return r.mem.Reset(ctx, keys) }

// fixture is a service: a middleware with an "ip" rule (3 per minute,
// fixed window) and a "user" rule (X-User header, skipped when absent),
// on memstore, and its admin Handler.
type fixture struct {
	clk   *clock
	adm   *Handler
	src   *Source
	mw    *middleware.Middleware
	app   http.Handler
	logs  *bytes.Buffer
	token string
}

func newFixture(t testing.TB, cfg Config, backend func(now func() time.Time) algorithms.Backend) *fixture {
	t.Helper()
	f := &fixture{clk: &clock{now: t0}, logs: &bytes.Buffer{}, token: "s3cret"}
	if cfg.Authorize == nil {
		cfg.Authorize = Token(f.token)
	}
	cfg.Now = f.clk.Now
	cfg.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	adm, err := newHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := adm.Source("api")
	if err != nil {
		t.Fatal(err)
	}
	var b algorithms.Backend
	if backend != nil {
		b = backend(f.clk.Now)
	} else {
		mem, err := memstore.New(memstore.Config{Now: f.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		b = mem
	}
	ip, _ := keyfunc.IP(keyfunc.IPConfig{})
	lim, err := redlimit.New(b, redlimit.Config{
		Rules: []redlimit.Rule{
			{Name: "ip", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(3)},
			{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100),
				MissingKey: redlimit.SkipMissingKey, Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(1000)}},
		},
		Logger:        slog.New(slog.DiscardHandler),
		ProbeInterval: time.Hour,
		FallbackAfter: time.Nanosecond, // the second failure switches
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{
			{Name: "ip", Key: ip},
			{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Tier: func(*http.Request) string { return "" }},
		},
		OnDecision: src.OnHTTP,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Close() })
	src.Attach(mw.Limiter())
	src.DescribeKeys(map[string]string{"ip": "client IP", "user": "X-User header"})
	f.adm, f.src, f.mw = adm, src, mw
	f.app = mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	return f
}

// hit sends one request from remote to the service and returns its status.
func (f *fixture) hit(remote, user string) int {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	if user != "" {
		r.Header.Set("X-User", user)
	}
	w := httptest.NewRecorder()
	f.app.ServeHTTP(w, r)
	return w.Code
}

// admin sends a request to the admin handler, authorized.
func (f *fixture) admin(method, target string, form url.Values, hdr ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if form != nil {
		r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r.SetBasicAuth("alice", f.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.adm.ServeHTTP(w, r)
	return w
}

// page is the JSON of the page.
type page struct {
	CSRF    string `json:"csrf_token"`
	Sources []struct {
		Name       string `json:"name"`
		OnFallback bool   `json:"on_fallback"`
		DenyCache  bool   `json:"deny_cache"`
		DenyKeys   int    `json:"deny_cache_keys"`
		LastError  *struct {
			Message string    `json:"message"`
			At      time.Time `json:"at"`
		} `json:"last_error"`
		Latency []latencyView `json:"latency"`
		Rules   []struct {
			Name      string            `json:"name"`
			Algorithm string            `json:"algorithm"`
			Limit     string            `json:"limit"`
			Key       string            `json:"key"`
			Tiers     map[string]string `json:"tiers"`
			Totals    map[string]uint64 `json:"totals"`
			Windows   []struct {
				Window  string            `json:"window"`
				Seconds float64           `json:"seconds"`
				Counts  map[string]uint64 `json:"counts"`
			} `json:"windows"`
			Hottest    []keyView `json:"hottest"`
			MostDenied []keyView `json:"most_denied"`
		} `json:"rules"`
	} `json:"sources"`
	Lookup  *lookupView `json:"lookup"`
	Message string      `json:"message"`
	Error   string      `json:"error"`
}

func (f *fixture) page(t *testing.T, query string) (page, int) {
	t.Helper()
	w := f.admin("GET", "/debug/redlimit/?format=json&"+query, nil)
	var p page
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("GET %s: %d %s: %v", query, w.Code, w.Body, err)
	}
	return p, w.Code
}

func TestNewRequiresAuthorize(t *testing.T) {
	_, err := New(Config{})
	var ce *algorithms.ConfigError
	if !errors.As(err, &ce) || ce.Field != "admin.Config.Authorize" {
		t.Fatalf("New(Config{}) = %v, want a ConfigError on admin.Config.Authorize", err)
	}
}

func TestUnauthorized(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.hit("192.0.2.1:1", "")
	for _, auth := range []string{"", "Bearer wrong", "Basic " + "YWxpY2U6d3Jvbmc="} {
		r := httptest.NewRequest("GET", "/?format=json", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		f.adm.ServeHTTP(w, r)
		if w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" || strings.Contains(w.Body.String(), "192.0.2") {
			t.Errorf("Authorization %q: %d %q, WWW-Authenticate %q; want 401 and nothing else", auth, w.Code, w.Body, w.Header().Get("WWW-Authenticate"))
		}
	}
	r := httptest.NewRequest("GET", "/?format=json", nil)
	r.Header.Set("Authorization", "Bearer "+f.token)
	w := httptest.NewRecorder()
	f.adm.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("bearer token: %d, want 200", w.Code)
	}
}

// TestPageCounts plays a burst from one client: 3 allowed, then 4 denied,
// and checks the exact counts, the rules and the masked top keys.
func TestPageCounts(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	for range 7 {
		f.hit("192.0.2.7:1000", "")
	}
	f.hit("198.51.100.1:1", "bob")
	p, code := f.page(t, "")
	if code != 200 || len(p.Sources) != 1 || len(p.Sources[0].Rules) != 2 {
		t.Fatalf("page: %d %+v", code, p)
	}
	ip, user := p.Sources[0].Rules[0], p.Sources[0].Rules[1]
	if ip.Name != "ip" || ip.Algorithm != "fixed_window" || ip.Limit != "3/1m0s" || ip.Key != "client IP" {
		t.Errorf("rule ip = %+v", ip)
	}
	if user.Tiers["pro"] != "1000/1m0s" {
		t.Errorf("rule user tiers = %v", user.Tiers)
	}
	want := map[string]uint64{"allowed": 4, "denied": 4}
	for name, n := range want {
		if ip.Totals[name] != n || ip.Windows[0].Counts[name] != n || ip.Windows[2].Counts[name] != n {
			t.Errorf("ip %s: totals %d, 1m %d, 15m %d; want %d", name, ip.Totals[name], ip.Windows[0].Counts[name], ip.Windows[2].Counts[name], n)
		}
	}
	// user: skipped 7 times (no X-User), allowed once (bob)
	if user.Totals["skipped"] != 7 || user.Totals["allowed"] != 1 {
		t.Errorf("user totals = %v, want skipped 7, allowed 1", user.Totals)
	}
	wantHot := []keyView{{Key: "192.0.2.0/24", Keys: 1, Count: 7}, {Key: "198.51.100.0/24", Keys: 1, Count: 1}}
	if len(ip.Hottest) != 2 || ip.Hottest[0] != wantHot[0] || ip.Hottest[1] != wantHot[1] {
		t.Errorf("ip hottest = %+v, want %+v", ip.Hottest, wantHot)
	}
	if len(ip.MostDenied) != 1 || ip.MostDenied[0] != (keyView{Key: "192.0.2.0/24", Keys: 1, Count: 4}) {
		t.Errorf("ip most denied = %+v", ip.MostDenied)
	}
	if len(user.Hottest) != 1 || user.Hottest[0].Key != MaskKey(nil, "bob") {
		t.Errorf("user hottest = %+v, want bob hashed %s", user.Hottest, MaskKey(nil, "bob"))
	}
	// The HTML page has the same numbers, and no unmasked key.
	w := f.admin("GET", "/debug/redlimit/", nil)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("HTML: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	for _, s := range []string{"192.0.2.0/24", "3/1m0s", "client IP", MaskKey(nil, "bob")} {
		if !strings.Contains(body, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	for _, s := range []string{"192.0.2.7", ">bob<"} {
		if strings.Contains(body, s) {
			t.Errorf("HTML shows %q unmasked", s)
		}
	}
}

// TestMaskedRowsMerge: keys of one /24 are one row, their counts summed.
func TestMaskedRowsMerge(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.hit("192.0.2.1:1", "")
	f.hit("192.0.2.2:1", "")
	f.hit("192.0.2.2:1", "")
	f.hit("[2001:db8:1:2::5]:1", "")
	p, _ := f.page(t, "")
	hot := p.Sources[0].Rules[0].Hottest
	want := []keyView{{Key: "192.0.2.0/24", Keys: 2, Count: 3}, {Key: "2001:db8:1::/48", Keys: 1, Count: 1}}
	if len(hot) != 2 || hot[0] != want[0] || hot[1] != want[1] {
		t.Fatalf("hottest = %+v, want %+v", hot, want)
	}
	f2 := newFixture(t, Config{ShowKeys: true}, nil)
	f2.hit("192.0.2.1:1", "")
	p, _ = f2.page(t, "")
	if hot := p.Sources[0].Rules[0].Hottest; len(hot) != 1 || hot[0].Key != "192.0.2.1" {
		t.Fatalf("ShowKeys: hottest = %+v", hot)
	}
}

// TestEscaping: hostile key material is escaped in the HTML.
func TestEscaping(t *testing.T) {
	f := newFixture(t, Config{ShowKeys: true}, nil)
	f.hit("192.0.2.1:1", `<script>alert(1)</script>`)
	w := f.admin("GET", "/?rule=api/user&key="+url.QueryEscape(`"><img src=x onerror=alert(1)>`), nil)
	body := w.Body.String()
	for _, bad := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(body, bad) {
			t.Errorf("HTML holds %q unescaped", bad)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("HTML lacks the escaped key")
	}
}

func TestLookup(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	for range 2 {
		f.hit("192.0.2.7:1", "")
	}
	p, code := f.page(t, "rule=api/ip&key=192.0.2.7")
	l := p.Lookup
	if code != 200 || l == nil || !l.Evaluated || !l.Allowed || l.Limit != 3 || l.Remaining != 1 || l.ResetAfter != 40 || l.Shown != "192.0.2.0/24" {
		t.Fatalf("lookup = %d %+v", code, l)
	}
	if l.StorageKey != "rate:ip:fw:{192.0.2.0/24}" {
		t.Errorf("storage key %q, want it masked", l.StorageKey)
	}
	// The lookup consumed nothing; the bare rule name works too.
	p, _ = f.page(t, "rule=ip&key=192.0.2.7")
	if p.Lookup.Remaining != 1 {
		t.Errorf("second lookup: remaining %d, want 1", p.Lookup.Remaining)
	}
	f.hit("192.0.2.7:1", "")
	f.hit("192.0.2.7:1", "")
	p, _ = f.page(t, "rule=api/ip&key=192.0.2.7")
	if l := p.Lookup; l.Allowed || l.Remaining != 0 || l.RetryAfter != 40 {
		t.Errorf("lookup of a denied key = %+v", l)
	}
	p, _ = f.page(t, "rule=api/user&key=carol&tier=pro")
	// fixed windows follow the clock: t0 is 20 s into its minute
	if l := p.Lookup; !l.Allowed || l.Limit != 1000 || l.Remaining != 1000 {
		t.Errorf("lookup with tier pro = %+v", l)
	}
}

func TestLookupBadInput(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	tests := []struct{ query, want string }{
		{"rule=api/nope&key=x", `unknown rule "api/nope"; the rules are api/ip, api/user`},
		{"rule=&key=x", "choose a rule"},
		{"rule=api/ip&key=", "the key is empty"},
		{"rule=api/ip&key=a%0Ab", "control characters"},
		{"rule=api/ip&key=" + strings.Repeat("x", 1025), "longer than 1024 bytes"},
		{"rule=api/ip&key=%FF", "not valid UTF-8"},
		{"rule=api/user&key=x&tier=gold", `has no tier "gold"`},
	}
	for _, tt := range tests {
		p, code := f.page(t, tt.query)
		if code != 400 || !strings.Contains(p.Error, tt.want) {
			t.Errorf("GET ?%.40s: %d %q, want 400 %q", tt.query, code, p.Error, tt.want)
		}
		w := f.admin("GET", "/?"+tt.query, nil)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "Error:") {
			t.Errorf("HTML ?%.40s: %d, want 400 with the error shown", tt.query, w.Code)
		}
	}
}

func TestReset(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	for range 4 {
		f.hit("192.0.2.7:1", "")
	}
	if got := f.hit("192.0.2.7:1", ""); got != 429 {
		t.Fatalf("setup: status %d, want 429", got)
	}
	p, _ := f.page(t, "")
	form := url.Values{"action": {"reset"}, "rule": {"api/ip"}, "key": {"192.0.2.7"}, "csrf": {p.CSRF}}

	// No token, a wrong one, a cross-site request: refused, nothing reset.
	bad := url.Values{"action": {"reset"}, "rule": {"api/ip"}, "key": {"192.0.2.7"}}
	if w := f.admin("POST", "/", bad); w.Code != 403 || !strings.Contains(w.Body.String(), "CSRF") {
		t.Errorf("POST without token: %d %s", w.Code, w.Body)
	}
	// A wrong token: the real one with its first character changed (the
	// token is random base64, so a fixed first character is sometimes its own).
	wrong := "x"
	if p.CSRF[0] == 'x' {
		wrong = "y"
	}
	bad.Set("csrf", wrong+p.CSRF[1:])
	if w := f.admin("POST", "/", bad); w.Code != 403 {
		t.Errorf("POST with a wrong token: %d", w.Code)
	}
	if w := f.admin("POST", "/", form, "Sec-Fetch-Site", "cross-site"); w.Code != 403 || !strings.Contains(w.Body.String(), "cross-origin") {
		t.Errorf("cross-site POST: %d %s", w.Code, w.Body)
	}
	if w := f.admin("POST", "/", form, "Origin", "https://evil.example"); w.Code != 403 {
		t.Errorf("POST from another Origin: %d", w.Code)
	}
	if got := f.hit("192.0.2.7:1", ""); got != 429 {
		t.Fatalf("after refused resets: status %d, want 429", got)
	}
	// Another user's token is not alice's.
	if tok := f.adm.csrfToken("mallory"); tok == p.CSRF {
		t.Fatal("CSRF tokens of two users are equal")
	}

	w := f.admin("POST", "/?format=json", form, "Sec-Fetch-Site", "same-origin")
	var after page
	if err := json.Unmarshal(w.Body.Bytes(), &after); err != nil || w.Code != 200 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if l := after.Lookup; l == nil || !l.Reset || l.Remaining != 3 || !l.Allowed {
		t.Errorf("lookup after reset = %+v", after.Lookup)
	}
	if got := f.hit("192.0.2.7:1", ""); got != 200 {
		t.Errorf("after reset: status %d, want 200", got)
	}
	log := f.logs.String()
	for _, s := range []string{"redlimit admin: key reset", "who=alice", "source=api", "rule=ip", "key=192.0.2.7"} {
		if !strings.Contains(log, s) {
			t.Errorf("log %q lacks %q", log, s)
		}
	}
	// The HTML answer to a reset says so.
	w = f.admin("POST", "/", form)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "just reset") {
		t.Errorf("HTML reset: %d", w.Code)
	}
	if w := f.admin("POST", "/", url.Values{"action": {"reset"}, "rule": {"api/ip"}, "key": {""}, "csrf": {p.CSRF}}); w.Code != 400 {
		t.Errorf("reset of an empty key: %d, want 400", w.Code)
	}
	if w := f.admin("PUT", "/", nil); w.Code != 405 {
		t.Errorf("PUT: %d, want 405", w.Code)
	}
}

// TestWindows: the 1-minute window forgets what the 5-minute one keeps.
func TestWindows(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.hit("192.0.2.1:1", "")
	f.hit("192.0.2.2:1", "")
	for range 7 {
		f.clk.Add(tickEvery)
		f.adm.advance()
	}
	f.hit("192.0.2.3:1", "")
	p, _ := f.page(t, "")
	ip := p.Sources[0].Rules[0]
	got := []uint64{ip.Windows[0].Counts["allowed"], ip.Windows[1].Counts["allowed"], ip.Windows[2].Counts["allowed"]}
	if got[0] != 1 || got[1] != 3 || got[2] != 3 {
		t.Errorf("allowed over 1m, 5m, 15m = %v, want [1 3 3]", got)
	}
	if ip.Windows[0].Seconds != 60 || ip.Windows[1].Seconds != 70 {
		t.Errorf("spans = %v, %v; want 60 and 70 (the process is 70s old)", ip.Windows[0].Seconds, ip.Windows[1].Seconds)
	}
	// Heavy hitters: the first two keys were counted two generations
	// ago (tick 0..5), so only the last one is left after the second rotation.
	for range 5 {
		f.clk.Add(tickEvery)
		f.adm.advance()
	}
	p, _ = f.page(t, "")
	if hot := p.Sources[0].Rules[0].Hottest; len(hot) != 1 || hot[0].Count != 1 {
		t.Errorf("hottest after two generations = %+v", hot)
	}
}

// TestDenyCacheAndFallback: local denials are told apart, and the page
// shows a failing backend.
func TestDenyCacheAndFallback(t *testing.T) {
	var fail failing
	f := newFixture(t, Config{}, func(now func() time.Time) algorithms.Backend {
		mem, _ := memstore.New(memstore.Config{Now: now})
		fail.remote = remote{contract.Carry(contract.Traits{HonoursDeadline: true}), mem}
		return &fail
	})
	for range 6 {
		f.hit("192.0.2.7:1", "")
	}
	p, _ := f.page(t, "")
	ip := p.Sources[0].Rules[0]
	if ip.Totals["allowed"] != 3 || ip.Totals["denied"] != 1 || ip.Totals["denied_local"] != 2 {
		t.Errorf("totals = %v, want allowed 3, denied 1, denied_local 2", ip.Totals)
	}
	if s := p.Sources[0]; !s.DenyCache || s.DenyKeys != 1 || s.OnFallback || s.LastError != nil {
		t.Errorf("source = %+v", s)
	}
	fail.set(errors.New("connection refused"))
	f.hit("198.51.100.1:1", "") // refused: the first failure
	f.hit("198.51.100.1:1", "") // the fallback decides
	p, _ = f.page(t, "")
	s := p.Sources[0]
	if !s.OnFallback || s.LastError == nil || !strings.Contains(s.LastError.Message, "connection refused") || !s.LastError.At.Equal(t0) {
		t.Errorf("source after a failure = %+v", s)
	}
	if n := s.Rules[0].Totals["fallback"]; n != 1 {
		t.Errorf("fallback = %d, want 1", n)
	}
	w := f.admin("GET", "/", nil)
	if !strings.Contains(w.Body.String(), "ON FALLBACK") || !strings.Contains(w.Body.String(), "connection refused") {
		t.Errorf("HTML does not show the fallback")
	}
}

type failing struct {
	remote
	mu  sync.Mutex
	err error
}

func (f *failing) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *failing) Allow(ctx context.Context, c []algorithms.Check, res []algorithms.Result) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.remote.Allow(ctx, c, res)
}

// TestLatency: quantiles and max of recorded latencies.
func TestLatency(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	d := &redlimit.Decision{Source: redlimit.SourcePrimary, Allowed: true}
	for i := 1; i <= 100; i++ {
		d.Latency = time.Duration(i) * time.Millisecond
		f.src.OnHTTP(nil, d)
	}
	p, _ := f.page(t, "")
	l := p.Sources[0].Latency[0]
	if l.Count != 100 || l.Max != 100 {
		t.Fatalf("latency = %+v, want 100 decisions, max 100ms", l)
	}
	// Bucket upper bounds: at most 25% over the true quantiles (50, 99 ms).
	if l.P50 < 50 || l.P50 > 62.5 || l.P99 < 99 || l.P99 > 100 {
		t.Errorf("p50 %v, p99 %v; want [50, 62.5] and [99, 100] (at most the max)", l.P50, l.P99)
	}
}

// TestObserveAllocs: the hook allocates nothing.
func TestObserveAllocs(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	d := &redlimit.Decision{Source: redlimit.SourcePrimary, Allowed: true, Latency: time.Millisecond, Rules: []redlimit.RuleDecision{
		{Name: "ip", Key: "rate:ip:fw:{192.0.2.1}", Evaluated: true, Result: algorithms.Result{Allowed: true, Limit: 3}},
		{Name: "user", Key: "rate:user:gcra:{bob}", Evaluated: true, Result: algorithms.Result{Limit: 3}},
	}}
	if a := testing.AllocsPerRun(1000, func() { f.src.OnHTTP(nil, d) }); a != 0 {
		t.Fatalf("%v allocations per decision, want 0", a)
	}
}

func TestSources(t *testing.T) {
	adm, _ := newHandler(Config{Authorize: Token("x")})
	if _, err := adm.Source("bad name"); err == nil {
		t.Error("Source(bad name) = nil error")
	}
	a, _ := adm.Source("a")
	if b, _ := adm.Source("a"); a != b {
		t.Error("Source(a) twice gave two Sources")
	}
	_ = strconv.Itoa
}

// BenchmarkObserve is what the hook adds to a decision: one allowed
// request with 1 and 3 rules on known keys. (Attaching it also makes the
// middleware read the clock once more per request: time.Now below.)
func BenchmarkObserve(b *testing.B) {
	f := newFixture(b, Config{}, nil)
	names := []string{"ip", "user", "user"}
	for _, n := range []int{1, 3} {
		d := &redlimit.Decision{Source: redlimit.SourcePrimary, Allowed: true, Latency: 250 * time.Microsecond}
		for i := range n {
			d.Rules = append(d.Rules, redlimit.RuleDecision{Name: names[i], Key: "rate:" + names[i] + ":gcra:{192.0.2.1}", Evaluated: true,
				Result: algorithms.Result{Allowed: true, Limit: 100, Remaining: 50}})
		}
		b.Run("rules="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.src.OnHTTP(nil, d)
			}
		})
		b.Run("rules="+strconv.Itoa(n)+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					f.src.OnHTTP(nil, d)
				}
			})
		})
	}
	b.Run("time.Now", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		_ = t
	})
}

// TestRulesBlocks: the rule list says which rules have quota blocks (with
// their configuration) and a calendar quota's unit and zone, as JSON and
// on the page: the redlimit command resets a key of a rule with blocks
// through the engine's epochs, and must know.
func TestRulesBlocks(t *testing.T) {
	adm, err := newHandler(Config{Authorize: Token("t"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := adm.Source("svc")
	mem, _ := memstore.New(memstore.Config{})
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000), Blocks: &redlimit.BlockConfig{Hold: 50 * time.Millisecond}},
		{Name: "quota", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(5000, berlin)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src.Attach(e)
	r := httptest.NewRequest("GET", "/?format=json", nil)
	r.Header.Set("Authorization", "Bearer t")
	w := httptest.NewRecorder()
	adm.ServeHTTP(w, r)
	var p struct {
		Sources []struct {
			Rules []struct {
				Name     string          `json:"name"`
				Calendar string          `json:"calendar"`
				Location string          `json:"location"`
				Blocks   json.RawMessage `json:"blocks"`
			} `json:"rules"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	rules := p.Sources[0].Rules
	if got := string(rules[0].Blocks); got != `{"hold":"50ms","share":0.25,"max":0,"min_rate":0}` {
		t.Errorf("rule hot: blocks %s, want its BlockConfig", got)
	}
	if got := string(rules[1].Blocks); got != "null" || rules[1].Calendar != "day" || rules[1].Location != "Europe/Berlin" {
		t.Errorf("rule quota: blocks %s, calendar %q %q; want null, day, Europe/Berlin", got, rules[1].Calendar, rules[1].Location)
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer t")
	w = httptest.NewRecorder()
	adm.ServeHTTP(w, r)
	if n := strings.Count(w.Body.String(), `">blocks</span>`); n != 1 {
		t.Errorf("the page marks %d rules with blocks, want 1", n)
	}
}
