package middleware_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// countingKey is a key func that counts its calls.
type countingKey struct {
	calls atomic.Int64
	key   keyfunc.Func
}

func (c *countingKey) fn(r *http.Request) (string, error) {
	c.calls.Add(1)
	return c.key(r)
}

// TestConfigExempt: a request exempt from every rule reaches the next
// handler without a backend call, without headers and without any rule's
// funcs being called; the others are limited as usual, uncharged by it.
func TestConfigExempt(t *testing.T) {
	cb := &countingBackend{next: newMemory(t, fixed)}
	key := &countingKey{key: ipFunc(t)}
	var costs, limits atomic.Int64
	var rec recorder
	mw := newMW(t, cb, spec{
		Rules: []specRule{
			{Name: "ip", Key: key.fn, Algorithm: algorithms.GCRA, Limit: gcra3,
				Cost: func(*http.Request) int64 { costs.Add(1); return 1 }},
			{Name: "plan", Key: userFunc, Algorithm: algorithms.GCRA, MissingKey: redlimit.DenyMissingKey,
				LimitFunc: func(*http.Request) (algorithms.Limit, error) { limits.Add(1); return gcra3, nil }},
		},
		Exempt:     func(r *http.Request) bool { return r.Header.Get("X-Admin") == "yes" },
		OnDecision: rec.hook,
	})
	h := mw.Handler(ok)
	for i := range 10 {
		// Anonymous too: an exempt request needs no key.
		w := serve(h, req("GET", "/", "192.0.2.1:1", "X-Admin", "yes"))
		checkResponse(t, "exempt "+itoa(int64(i)), w, 200, map[string]string{})
		if w.Body.String() != "ok" {
			t.Fatalf("exempt request did not reach the handler: %q", w.Body.String())
		}
		d := rec.last(t)
		if !d.Allowed || d.Source != redlimit.SourceNone || d.Err != nil || !d.Rules[0].Exempt || !d.Rules[1].Exempt || d.Rules[0].Evaluated {
			t.Fatalf("exempt decision %+v", d)
		}
	}
	if cb.calls.Load() != 0 || key.calls.Load() != 0 || costs.Load() != 0 || limits.Load() != 0 {
		t.Errorf("exempt requests: %d backend calls, %d key, %d cost, %d limit calls; want none", cb.calls.Load(), key.calls.Load(), costs.Load(), limits.Load())
	}
	// The same client, not exempt: its full capacity, then denied.
	for i, want := range []int{200, 200, 200, 429} {
		if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice")); w.Code != want {
			t.Errorf("not exempt, request %d: %d, want %d", i, w.Code, want)
		}
	}
	// Exempt still, when over the limit.
	if w := serve(h, req("GET", "/", "192.0.2.1:1", "X-Admin", "yes")); w.Code != 200 {
		t.Errorf("exempt over the limit: %d, want 200", w.Code)
	}
}

// TestRuleExempt: a rule's Exempt leaves that rule alone out: not
// charged, not in the headers; the other rules decide.
func TestRuleExempt(t *testing.T) {
	internal, err := middleware.ExemptCIDRs(keyfunc.IPConfig{}, netip.MustParsePrefix("10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	key := &countingKey{key: ipFunc(t)}
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: key.fn, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1), Exempt: internal},
			{Name: "global", Key: keyfunc.Const("all"), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(5)},
		},
		OnDecision: rec.hook,
	})
	h := mw.Handler(ok)
	for i := range 4 {
		w := serve(h, req("GET", "/", "10.1.2.3:1"))
		checkResponse(t, "internal "+itoa(int64(i)), w, 200, xHeaders("5", itoa(int64(4-i)), epoch0+40, ""))
		if d := rec.last(t); !d.Rules[0].Exempt || d.Rules[0].Evaluated || d.Rules[1].Exempt || !d.Rules[1].Evaluated {
			t.Errorf("internal %d: %+v, want ip exempt, global decided", i, d.Rules)
		}
	}
	if key.calls.Load() != 0 {
		t.Errorf("the exempt rule's key func ran %d times, want 0", key.calls.Load())
	}
	// An outside client gets both rules: its one per minute, the global's last unit.
	checkResponse(t, "outside", serve(h, req("GET", "/", "203.0.113.9:1")), 200, xHeaders("1", "0", epoch0+60, ""))
	if w := serve(h, req("GET", "/", "203.0.113.9:1")); w.Code != 429 {
		t.Errorf("outside, second: %d, want 429", w.Code)
	}
	// The global limit still binds the internal client.
	if w := serve(h, req("GET", "/", "10.1.2.3:1")); w.Code != 429 {
		t.Errorf("internal past the global limit: %d, want 429", w.Code)
	}
}

// TestExemptCIDRs: the client address is found as keyfunc.IP finds it, so
// nothing a client writes in a forwarding header makes it exempt.
func TestExemptCIDRs(t *testing.T) {
	const XFF, XRI, FWD = "X-Forwarded-For", "X-Real-IP", "Forwarded"
	lbs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	exempt := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),            // the internal network, proxies included
		netip.MustParsePrefix("192.168.0.0/16"),        // the office
		netip.MustParsePrefix("::ffff:172.16.0.0/108"), // mapped: 172.16.0.0/12
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("198.51.100.7/32"), // the health checker
	}
	direct, err := middleware.ExemptCIDRs(keyfunc.IPConfig{}, exempt...)
	if err != nil {
		t.Fatal(err)
	}
	viaXFF, err := middleware.ExemptCIDRs(keyfunc.IPConfig{TrustedProxies: lbs, IPv4Prefix: 8, IPv6Prefix: 16}, exempt...)
	if err != nil {
		t.Fatal(err)
	}
	viaRealIP, err := middleware.ExemptCIDRs(keyfunc.IPConfig{TrustedProxies: lbs, Header: XRI}, exempt...)
	if err != nil {
		t.Fatal(err)
	}
	viaFwd, err := middleware.ExemptCIDRs(keyfunc.IPConfig{TrustedProxies: lbs, Header: FWD}, exempt...)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("10.0.0.1, ", 2000)
	tests := []struct {
		name   string
		fn     func(*http.Request) bool
		remote string
		hdr    []string
		want   bool
	}{
		// Genuine.
		{"office, direct", direct, "192.168.1.5:1", nil, true},
		{"health checker", direct, "198.51.100.7:80", nil, true},
		{"mapped peer", direct, "[::ffff:192.168.1.5]:1", nil, true},
		{"mapped prefix", direct, "172.20.0.1:1", nil, true},
		{"ula v6", direct, "[fd12::1]:1", nil, true},
		{"office via the proxy", viaXFF, "10.0.0.1:1", []string{XFF, "192.168.1.5"}, true},
		{"office via two proxies", viaXFF, "10.0.0.1:1", []string{XFF, "192.168.1.5, 10.9.9.9"}, true},
		{"office via X-Real-IP", viaRealIP, "10.0.0.1:1", []string{XRI, "192.168.1.5"}, true},
		{"office via Forwarded", viaFwd, "10.0.0.1:1", []string{FWD, `for=192.168.1.5`}, true},
		{"prefix bits ignored", viaXFF, "10.0.0.1:1", []string{XFF, "198.51.100.7"}, true},
		// Outside clients, whatever they write.
		{"outside", direct, "203.0.113.9:1", nil, false},
		{"next to the health checker", direct, "198.51.100.8:1", nil, false},
		{"untrusted peer's XFF", direct, "203.0.113.9:1", []string{XFF, "10.0.0.7"}, false},
		{"untrusted peer's XFF, proxies configured", viaXFF, "203.0.113.9:1", []string{XFF, "10.0.0.7"}, false},
		{"spoofed left of the proxy's entry", viaXFF, "10.0.0.1:1", []string{XFF, "10.0.0.7, 203.0.113.9"}, false},
		{"spoofed office", viaXFF, "10.0.0.1:1", []string{XFF, "192.168.1.5, 203.0.113.9"}, false},
		{"spoofed on an earlier line", viaXFF, "10.0.0.1:1", []string{XFF, "192.168.1.5", XFF, "203.0.113.9"}, false},
		{"spoofed mapped", viaXFF, "10.0.0.1:1", []string{XFF, "::ffff:10.0.0.7, 203.0.113.9"}, false},
		{"garbage then the client", viaXFF, "10.0.0.1:1", []string{XFF, "garbage, 203.0.113.9"}, false},
		{"huge header then the client", viaXFF, "10.0.0.1:1", []string{XFF, long + "203.0.113.9"}, false},
		{"spoofed Forwarded", viaFwd, "10.0.0.1:1", []string{FWD, `for=10.0.0.7, for="203.0.113.9:1"`}, false},
		{"X-Real-IP from an untrusted peer", viaRealIP, "203.0.113.9:1", []string{XRI, "10.0.0.7"}, false},
		{"X-Real-IP, the proxy's line last", viaRealIP, "10.0.0.1:1", []string{XRI, "10.0.0.7", XRI, "203.0.113.9"}, false},
		{"XFF where X-Real-IP is read", viaRealIP, "10.0.0.1:1", []string{XFF, "10.0.0.7", XRI, "203.0.113.9"}, false},
		{"no client address", direct, "", nil, false},
		{"garbage RemoteAddr", direct, "10.0.0.1garbage", nil, false},
		{"v6 outside", direct, "[2001:db8::1]:1", nil, false},
	}
	for _, tt := range tests {
		if got := tt.fn(req("GET", "/", tt.remote, tt.hdr...)); got != tt.want {
			t.Errorf("%s: exempt = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzExemptCIDRs: behind a trusted proxy, a client outside the exempt
// prefixes is never exempt, whatever forwarding headers it sends: the
// proxy appends its address to X-Forwarded-For and Forwarded, and
// overwrites X-Real-IP.
func FuzzExemptCIDRs(f *testing.F) {
	f.Add("10.0.0.7", "192.168.1.1", "for=10.0.0.7", "203.0.113.9")
	f.Add("garbage, 10.0.0.7", "", `for="[fd00::1]"`, "2001:db8::1")
	f.Add(strings.Repeat("10.0.0.1,", 40), "10.0.0.1", "for=unknown", "198.51.100.8")
	f.Add("::ffff:10.0.0.7", "::ffff:192.168.0.1", `for="_hidden", for=10.1.1.1`, "::ffff:203.0.113.9")
	lbs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	exempt := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8")}
	var fns []func(*http.Request) bool
	for _, h := range []string{"", "X-Real-IP", "Forwarded"} {
		fn, err := middleware.ExemptCIDRs(keyfunc.IPConfig{TrustedProxies: lbs, Header: h}, exempt...)
		if err != nil {
			f.Fatal(err)
		}
		fns = append(fns, fn)
	}
	f.Fuzz(func(t *testing.T, xff, realIP, fwd, client string) {
		a, err := netip.ParseAddr(client)
		if err != nil || a.Zone() != "" {
			return
		}
		if u := a.Unmap(); exempt[0].Contains(u) || exempt[1].Contains(u) || exempt[2].Contains(u) {
			return
		}
		// What the client sends, as it reaches the proxy...
		r := req("GET", "/", "10.0.0.1:1", "X-Forwarded-For", xff, "Forwarded", fwd, "X-Real-IP", realIP)
		// ...and what the proxy adds.
		r.Header.Add("X-Forwarded-For", a.String())
		r.Header.Add("Forwarded", `for="`+netip.AddrPortFrom(a, 1).String()+`"`)
		r.Header.Add("X-Real-IP", a.String())
		for i, fn := range fns {
			if fn(r) {
				t.Fatalf("ExemptCIDRs #%d: client %s exempt with X-Forwarded-For %q, X-Real-IP %q, Forwarded %q", i, client, xff, realIP, fwd)
			}
		}
		// Without the proxy, headers are not read at all.
		r.RemoteAddr = netip.AddrPortFrom(a, 1).String()
		for i, fn := range fns {
			if fn(r) {
				t.Fatalf("ExemptCIDRs #%d: direct client %s exempt by its headers", i, client)
			}
		}
	})
}

// TestExemptCIDRsInvalid: bad arguments are errors naming what is wrong.
func TestExemptCIDRsInvalid(t *testing.T) {
	for _, tt := range []struct {
		ip       keyfunc.IPConfig
		prefixes []netip.Prefix
		want     string
	}{
		{keyfunc.IPConfig{}, nil, `redlimit: ExemptCIDRs prefixes must hold at least one prefix`},
		{keyfunc.IPConfig{}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}, `redlimit: ExemptCIDRs prefixes[1] is not a valid prefix: invalid Prefix`},
		{keyfunc.IPConfig{}, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, `redlimit: ExemptCIDRs prefixes[0] holds every address, got 0.0.0.0/0: exempting every client is removing the limit`},
		{keyfunc.IPConfig{}, []netip.Prefix{netip.MustParsePrefix("::/0")}, `redlimit: ExemptCIDRs prefixes[0] holds every address, got ::/0: exempting every client is removing the limit`},
		{keyfunc.IPConfig{}, []netip.Prefix{netip.MustParsePrefix("::ffff:0.0.0.0/96")}, `redlimit: ExemptCIDRs prefixes[0] holds every address, got ::ffff:0.0.0.0/96: exempting every client is removing the limit`},
		{keyfunc.IPConfig{Header: "X-Real-IP"}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			`redlimit: IPConfig.Header is "X-Real-IP" but IPConfig.TrustedProxies is empty: the header would be believed from no one and every client behind a proxy would share the proxy's key`},
	} {
		fn, err := middleware.ExemptCIDRs(tt.ip, tt.prefixes...)
		var ce *algorithms.ConfigError
		if fn != nil || !errors.As(err, &ce) || err.Error() != tt.want {
			t.Errorf("ExemptCIDRs(%+v, %v) = %v, want %q", tt.ip, tt.prefixes, err, tt.want)
		}
	}
}

// TestExemptCIDRsAllocs: with no trusted proxy and an IPv4 peer, the check
// allocates nothing.
func TestExemptCIDRsAllocs(t *testing.T) {
	fn, err := middleware.ExemptCIDRs(keyfunc.IPConfig{}, netip.MustParsePrefix("10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"10.1.2.3:4", "203.0.113.9:4"} {
		r := req("GET", "/", remote)
		if got := testing.AllocsPerRun(1000, func() { fn(r) }); got != 0 {
			t.Errorf("%s: %v allocations per check, want 0", remote, got)
		}
	}
}
