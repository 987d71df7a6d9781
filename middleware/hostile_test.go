package middleware_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// hostileMW is one rule of 3 per minute keyed by key, recording decisions.
func hostileMW(t *testing.T, name string, key keyfunc.Func, missing redlimit.MissingKey) (http.Handler, *recorder) {
	t.Helper()
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:      []specRule{{Name: name, Key: key, Algorithm: algorithms.GCRA, Limit: gcra3, MissingKey: missing}},
		OnDecision: rec.hook,
	})
	return mw.Handler(ok), &rec
}

// TestSpoofedForwardedFor: a client cannot change its bucket by sending
// forwarding headers, whether or not the server trusts a proxy.
func TestSpoofedForwardedFor(t *testing.T) {
	trusted, err := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	behindProxy, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: trusted})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		key    keyfunc.Func
		remote func(i int) string
		xff    func(i int) string
		want   string
	}{
		{"no trusted proxy", ipFunc(t),
			func(i int) string { return "203.0.113.7:" + strconv.Itoa(40000+i) },
			func(i int) string { return "198.51.100." + strconv.Itoa(i) },
			"rate:ip:gcra:{203.0.113.7}"},
		{"no trusted proxy, a proxy's address claimed", ipFunc(t),
			func(i int) string { return "203.0.113.7:1" },
			func(i int) string { return "10.0.0." + strconv.Itoa(i+1) + ", 127.0.0.1" },
			"rate:ip:gcra:{203.0.113.7}"},
		{"untrusted peer", behindProxy,
			func(i int) string { return "203.0.113.7:1" },
			func(i int) string { return "198.51.100." + strconv.Itoa(i) },
			"rate:ip:gcra:{203.0.113.7}"},
		{"through the proxy, left part forged", behindProxy,
			func(i int) string { return "10.0.0.1:" + strconv.Itoa(40000+i) },
			func(i int) string { return "198.51.100." + strconv.Itoa(i) + ", 10.9.9.9, 203.0.113.7" },
			"rate:ip:gcra:{203.0.113.7}"},
		{"through two proxies", behindProxy,
			func(i int) string { return "10.0.0." + strconv.Itoa(i+1) + ":443" },
			func(i int) string { return "1.1.1." + strconv.Itoa(i) + ", 203.0.113.7, 10.1.1.1" },
			"rate:ip:gcra:{203.0.113.7}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := hostileMW(t, "ip", tt.key, redlimit.DenyMissingKey)
			for i := range 4 {
				w := serve(h, req("GET", "/", tt.remote(i), "X-Forwarded-For", tt.xff(i)))
				if want := []int{200, 200, 200, 429}[i]; w.Code != want {
					t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
				}
				if got := rec.last(t).Rules[0].Key; got != tt.want {
					t.Errorf("request %d: key %q, want %q", i+1, got, tt.want)
				}
			}
		})
	}
}

// TestHugeHeaders: megabyte-sized key material neither panics nor makes a
// long storage key, and is still limited.
func TestHugeHeaders(t *testing.T) {
	trusted, _ := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	behindProxy, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: trusted})
	if err != nil {
		t.Fatal(err)
	}
	mb := func(c string) string { return strings.Repeat(c, 1<<20) }
	tests := []struct {
		name   string
		rule   string
		key    keyfunc.Func
		remote string
		hdr    func(i int) []string
		want   string // "" when only the length is checked
	}{
		{"1 MB X-Forwarded-For, no trusted proxy", "ip", ipFunc(t), "203.0.113.7:1",
			func(i int) []string { return []string{"X-Forwarded-For", mb("9")} }, "rate:ip:gcra:{203.0.113.7}"},
		{"1 MB junk X-Forwarded-For through the proxy", "ip", behindProxy, "10.0.0.1:1",
			func(i int) []string { return []string{"X-Forwarded-For", mb("x")} }, "rate:ip:gcra:{10.0.0.1}"},
		{"1 MB list of trusted addresses through the proxy", "ip", behindProxy, "10.0.0.1:1",
			func(i int) []string {
				return []string{"X-Forwarded-For", strings.Repeat("10.2.3.4, ", 1<<20/10) + "10.2.3.5"}
			}, ""},
		{"1 MB X-User-ID", "user", mustKey(keyfunc.Header("X-User-ID")), "203.0.113.7:1",
			func(i int) []string { return []string{"X-User-ID", mb("u")} }, ""},
		{"1 MB X-User-ID of braces", "user", mustKey(keyfunc.Header("X-User-ID")), "203.0.113.7:1",
			func(i int) []string { return []string{"X-User-ID", mb("{")} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, rec := hostileMW(t, tt.rule, tt.key, redlimit.DenyMissingKey)
			for i := range 4 {
				w := serve(h, req("GET", "/", tt.remote, tt.hdr(i)...))
				if want := []int{200, 200, 200, 429}[i]; w.Code != want {
					t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
				}
				key := rec.last(t).Rules[0].Key
				if bound := len("rate:gcra:") + len(tt.rule) + 140; len(key) > bound {
					t.Errorf("request %d: key of %d bytes, want at most %d", i+1, len(key), bound)
				}
				if tt.want != "" && key != tt.want {
					t.Errorf("request %d: key %q, want %q", i+1, key, tt.want)
				}
				checkKeyShape(t, key, "rate:"+tt.rule+":gcra:")
			}
		})
	}
	// Two different huge values are two buckets.
	h, rec := hostileMW(t, "user", mustKey(keyfunc.Header("X-User-ID")), redlimit.DenyMissingKey)
	serve(h, req("GET", "/", "203.0.113.7:1", "X-User-ID", mb("a")))
	k1 := rec.last(t).Rules[0].Key
	serve(h, req("GET", "/", "203.0.113.7:1", "X-User-ID", mb("a")+"b"))
	if k2 := rec.last(t).Rules[0].Key; k1 == k2 {
		t.Errorf("two distinct 1 MB values share the key %q", k1)
	}
}

// checkKeyShape fails unless key is prefix + "{" + material + "}" with
// material free of braces, blanks, control and non-ASCII bytes.
func checkKeyShape(t *testing.T, key, prefix string) {
	t.Helper()
	material, found := strings.CutPrefix(key, prefix+"{")
	if !found || !strings.HasSuffix(material, "}") {
		t.Errorf("key %q is not %s{...}", key, prefix)
		return
	}
	material = material[:len(material)-1]
	for i := range len(material) {
		if c := material[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			t.Errorf("key %q: material holds byte %#x at %d", key, c, i)
			return
		}
	}
}

// TestHostileKeyMaterial: braces, control characters and look-alikes in key
// material never appear unescaped in the storage key, and distinct values
// stay distinct.
func TestHostileKeyMaterial(t *testing.T) {
	h, rec := hostileMW(t, "user", mustKey(keyfunc.Header("X-User-ID")), redlimit.DenyMissingKey)
	values := []string{
		"}", "{", "{tag}", "}{", "a}:{b", "x}\r\nSet-Cookie: a=b", "\x00", "\x7f", "a b", "\t",
		"é", "\xff\xfe", "h:abc", "%7B", "%", "{" + strings.Repeat("z", 200) + "}",
	}
	seen := map[string]string{}
	for _, v := range values {
		r := req("GET", "/", "203.0.113.7:1")
		r.Header["X-User-Id"] = []string{v} // set raw: Header.Add would not check either, but be explicit
		if w := serve(h, r); w.Code != 200 {
			t.Errorf("%q: status %d, want 200", v, w.Code)
		}
		key := rec.last(t).Rules[0].Key
		checkKeyShape(t, key, "rate:user:gcra:")
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share the key %q", other, v, key)
		}
		seen[key] = v
	}
	if got := rec.got[0].Rules[0].Key; got != "rate:user:gcra:{%7D}" {
		t.Errorf(`"}" keyed %q, want "rate:user:gcra:{%%7D}"`, got)
	}
}

// TestRemoteAddr: IPv6 zones are dropped and IPv6 clients grouped by /64;
// an empty or non-IP RemoteAddr has no key and the MissingKey policy
// applies.
func TestRemoteAddr(t *testing.T) {
	h, rec := hostileMW(t, "ip", ipFunc(t), redlimit.DenyMissingKey)
	for _, tt := range []struct {
		remote string
		code   int
		key    string
	}{
		{"[fe80::1%eth0]:443", 200, "rate:ip:gcra:{fe80::/64}"},
		{"[fe80::2%25lo]:1", 200, "rate:ip:gcra:{fe80::/64}"},
		{"[fe80::3]:1", 200, "rate:ip:gcra:{fe80::/64}"},
		{"[fe80::4%eth1]:2", 429, "rate:ip:gcra:{fe80::/64}"},
		{"[2001:db8:1:2::7]:443", 200, "rate:ip:gcra:{2001:db8:1:2::/64}"},
		{"[::ffff:192.0.2.1]:80", 200, "rate:ip:gcra:{192.0.2.1}"},
		{"", 429, ""},
		{"@", 429, ""},
		{"unix:/run/app.sock", 429, ""},
		{strings.Repeat("9", 1<<16), 429, ""},
	} {
		w := serve(h, req("GET", "/", tt.remote))
		d := rec.last(t)
		if w.Code != tt.code || d.Rules[0].Key != tt.key {
			t.Errorf("RemoteAddr %.40q: status %d key %q, want %d %q", tt.remote, w.Code, d.Rules[0].Key, tt.code, tt.key)
		}
		if tt.key == "" && (!d.Rules[0].MissingKey || w.Header().Get("Retry-After") != "") {
			t.Errorf("RemoteAddr %.40q: %+v, Retry-After %q; want a missing key without Retry-After", tt.remote, d.Rules[0], w.Header().Get("Retry-After"))
		}
	}

	// With SkipMissingKey the other rules decide alone.
	var rec2 recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3, MissingKey: redlimit.SkipMissingKey},
			{Name: "global", Key: keyfunc.Const("all"), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
		},
		OnDecision: rec2.hook,
	})
	w := serve(mw.Handler(ok), req("GET", "/", ""))
	checkResponse(t, "empty RemoteAddr, skip", w, 200, xHeaders("100", "99", epoch0+1, ""))
	if d := rec2.last(t); !d.Rules[0].Skipped || d.Rules[1].Key != "rate:global:gcra:{all}" {
		t.Errorf("decision %+v", d)
	}
}

// TestRouteMethodChosenByClient: a client cannot mint buckets of a
// Route-keyed rule by varying the HTTP method, whether the route accepts any
// method (ServeMux pattern without one, chi's Handle) or the standard ones;
// and Join(Route(), Method()) gives a bucket per standard method, every other
// method sharing one.
func TestRouteMethodChosenByClient(t *testing.T) {
	madeUp := make([]string, 100)
	for i := range madeUp {
		madeUp[i] = "M" + strconv.Itoa(i)
	}
	standard := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}
	serveMux := func(mw func(http.Handler) http.Handler) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/api/orders", mw(ok))
		return mux
	}
	chiRouter := func(mw func(http.Handler) http.Handler) http.Handler {
		r := chi.NewRouter()
		r.With(mw).Handle("/api/orders", ok)
		return r
	}
	tests := []struct {
		name    string
		router  func(func(http.Handler) http.Handler) http.Handler
		key     keyfunc.Func
		methods []string
		want    int // requests allowed of 3 per method
	}{
		{"ServeMux, 100 made-up methods", serveMux, keyfunc.Route(), madeUp, 3},
		{"ServeMux, 9 standard methods", serveMux, keyfunc.Route(), standard, 3},
		{"chi, 9 standard methods", chiRouter, keyfunc.Route(), standard, 3},
		{"chi, 100 made-up methods (405 before the limiter)", chiRouter, keyfunc.Route(), madeUp, 0},
		{"ServeMux, Join(Route, Method), 100 made-up methods", serveMux, mustKey(keyfunc.Join(keyfunc.Route(), keyfunc.Method())), madeUp, 3},
		{"ServeMux, Join(Route, Method), 9 standard methods", serveMux, mustKey(keyfunc.Join(keyfunc.Route(), keyfunc.Method())), standard, 27},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw := newMW(t, newMemory(t, fixed), spec{
				Rules: []specRule{{Name: "route", Key: tt.key, Algorithm: algorithms.GCRA, Limit: gcra3}},
			})
			h := tt.router(mw.Handler)
			allowed := 0
			for _, m := range tt.methods {
				for range 3 {
					if w := serve(h, req(m, "/api/orders", "203.0.113.7:1")); w.Code == http.StatusOK {
						allowed++
					}
				}
			}
			if allowed != tt.want {
				t.Errorf("%d methods x 3 requests to /api/orders: %d allowed, want %d", len(tt.methods), allowed, tt.want)
			}
		})
	}
}
