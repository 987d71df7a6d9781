package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// newRequest returns a GET request from remote carrying headers, given as
// name, value pairs added in order (a repeated name adds a line).
func newRequest(remote string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	return r
}

func mustIP(t testing.TB, cfg IPConfig) Func {
	t.Helper()
	fn, err := IP(cfg)
	if err != nil {
		t.Fatalf("IP(%+v) = %v", cfg, err)
	}
	return fn
}

func mustProxies(t testing.TB, cidrs ...string) []netip.Prefix {
	t.Helper()
	ps, err := ParseTrustedProxies(cidrs...)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// lbs is the proxy fleet of most cases: an IPv4 /8 and an IPv6 /48.
var lbs = []string{"10.0.0.0/8", "2001:db8:ffff::/48"}

func TestIP(t *testing.T) {
	t.Parallel()
	trusted := mustProxies(t, lbs...)
	direct := IPConfig{}
	xff := IPConfig{TrustedProxies: trusted}
	realIP := IPConfig{TrustedProxies: trusted, Header: "X-Real-IP"}
	fwd := IPConfig{TrustedProxies: trusted, Header: "Forwarded"}
	const XFF, XRI, FWD = "X-Forwarded-For", "X-Real-IP", "Forwarded"

	tests := []struct {
		name    string
		cfg     IPConfig
		remote  string
		headers []string // name, value pairs
		want    string
	}{
		// RemoteAddr forms.
		{"ipv4 with port", direct, "203.0.113.7:1234", nil, "203.0.113.7"},
		{"ipv4 bare", direct, "203.0.113.7", nil, "203.0.113.7"},
		{"ipv6 bracketed", direct, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::/64"},
		{"ipv6 bracketed no port", direct, "[2001:db8:1:2::6]", nil, "2001:db8:1:2::/64"},
		{"ipv6 bare", direct, "2001:db8:1:2::9", nil, "2001:db8:1:2::/64"},
		{"ipv6 same /64 same key", direct, "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", nil, "2001:db8:1:2::/64"},
		{"ipv6 next /64 other key", direct, "[2001:db8:1:3::1]:1", nil, "2001:db8:1:3::/64"},
		{"ipv6 loopback", direct, "[::1]:80", nil, "::/64"},
		{"ipv6 loopback /128", IPConfig{IPv6Prefix: 128}, "[::1]:80", nil, "::1"},
		{"ipv6 upper case /128", IPConfig{IPv6Prefix: 128}, "[2001:DB8::0001]:80", nil, "2001:db8::1"},
		{"ipv6 /48", IPConfig{IPv6Prefix: 48}, "[2001:db8:1:2::1]:80", nil, "2001:db8:1::/48"},
		{"ipv6 /56 odd bits", IPConfig{IPv6Prefix: 56}, "[2001:db8:1:2ff::1]:80", nil, "2001:db8:1:200::/56"},
		{"ipv6 /1", IPConfig{IPv6Prefix: 1}, "[ffff::1]:80", nil, "8000::/1"},
		{"ipv6 zone bare", direct, "fe80::1%eth0", nil, "fe80::/64"},
		{"ipv6 zone bracketed /128", IPConfig{IPv6Prefix: 128}, "[fe80::1%eth0]:8080", nil, "fe80::1"},
		{"ipv4-mapped bracketed", direct, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},
		{"ipv4-mapped bare", direct, "::ffff:192.0.2.1", nil, "192.0.2.1"},
		{"ipv4-mapped hex", direct, "[::ffff:c000:201]:80", nil, "192.0.2.1"},
		{"ipv4-mapped uses ipv4 prefix", IPConfig{IPv4Prefix: 24}, "[::ffff:192.0.2.1]:80", nil, "192.0.2.0/24"},
		{"ipv4 /24", IPConfig{IPv4Prefix: 24}, "203.0.113.7:1", nil, "203.0.113.0/24"},
		{"ipv4 /1", IPConfig{IPv4Prefix: 1}, "203.0.113.7:1", nil, "128.0.0.0/1"},
		{"ipv4 prefixes do not touch ipv6", IPConfig{IPv4Prefix: 8}, "[2001:db8::1]:1", nil, "2001:db8::/64"},
		{"ipv4 in brackets", direct, "[192.0.2.1]:80", nil, "192.0.2.1"},

		// Nobody trusted: headers change nothing.
		{"xff from untrusted peer ignored", direct, "203.0.113.7:1", []string{XFF, "198.51.100.9"}, "203.0.113.7"},
		{"spoofed xff of a proxy ignored", xff, "203.0.113.7:1", []string{XFF, "198.51.100.9, 10.0.0.1"}, "203.0.113.7"},
		{"x-real-ip from untrusted peer ignored", realIP, "203.0.113.7:1", []string{XRI, "198.51.100.9"}, "203.0.113.7"},
		{"forwarded from untrusted peer ignored", fwd, "203.0.113.7:1", []string{FWD, "for=198.51.100.9"}, "203.0.113.7"},
		{"untrusted ipv6 peer ignored", xff, "[2001:db8:1:2::1]:1", []string{XFF, "198.51.100.9"}, "2001:db8:1:2::/64"},

		// X-Forwarded-For from a trusted peer.
		{"xff one hop", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9"}, "198.51.100.9"},
		{"xff spoofed left entry", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, 198.51.100.9"}, "198.51.100.9"},
		{"xff several trusted hops", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, 198.51.100.9, 10.1.1.1, 10.2.2.2"}, "198.51.100.9"},
		{"xff trusted ipv6 hops", xff, "[2001:db8:ffff::1]:1", []string{XFF, "198.51.100.9, 2001:db8:ffff:1::1"}, "198.51.100.9"},
		{"xff ipv6 client", xff, "10.0.0.1:1", []string{XFF, "2001:db8:1:2::5"}, "2001:db8:1:2::/64"},
		{"xff client with port", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9:5555"}, "198.51.100.9"},
		{"xff bracketed ipv6 with port", xff, "10.0.0.1:1", []string{XFF, "[2001:db8:1:2::5]:443"}, "2001:db8:1:2::/64"},
		{"xff ipv4-mapped client", xff, "10.0.0.1:1", []string{XFF, "::ffff:198.51.100.9"}, "198.51.100.9"},
		{"xff ipv4-mapped proxy is trusted", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9, ::ffff:10.1.1.1"}, "198.51.100.9"},
		{"xff zoned client", xff, "10.0.0.1:1", []string{XFF, "fe80::1%eth0"}, "fe80::/64"},
		{"xff mapped peer is trusted", xff, "[::ffff:10.0.0.1]:1", []string{XFF, "198.51.100.9"}, "198.51.100.9"},
		{"xff all trusted uses leftmost", xff, "10.0.0.1:1", []string{XFF, "10.3.3.3, 10.2.2.2, 10.1.1.1"}, "10.3.3.3"},
		{"xff garbage stops at last trusted hop", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9, garbage, 10.1.1.1"}, "10.1.1.1"},
		{"xff garbage next to peer", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, garbage"}, "10.0.0.1"},
		{"xff garbage left of client", xff, "10.0.0.1:1", []string{XFF, "garbage, 198.51.100.9"}, "198.51.100.9"},
		{"xff bad port is garbage", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, 198.51.100.9:http"}, "10.0.0.1"},
		{"xff hostname is garbage", xff, "10.0.0.1:1", []string{XFF, "example.com"}, "10.0.0.1"},
		{"xff unknown is garbage", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, unknown"}, "10.0.0.1"},
		{"xff empty entries skipped", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9,, \t ,10.1.1.1,"}, "198.51.100.9"},
		{"xff blank", xff, "10.0.0.1:1", []string{XFF, " "}, "10.0.0.1"},
		{"xff absent", xff, "10.0.0.1:1", nil, "10.0.0.1"},
		{"xff lines read as one list", xff, "10.0.0.1:1", []string{XFF, "1.1.1.1, 198.51.100.9", XFF, "10.1.1.1"}, "198.51.100.9"},
		{"xff spoofed first line", xff, "10.0.0.1:1", []string{XFF, "6.6.6.6", XFF, "198.51.100.9"}, "198.51.100.9"},
		{"xff client on first line", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9", XFF, "10.1.1.1, 10.2.2.2"}, "198.51.100.9"},
		{"xff garbage line", xff, "10.0.0.1:1", []string{XFF, "198.51.100.9", XFF, "garbage", XFF, "10.1.1.1"}, "10.1.1.1"},
		{"xff /24 grouping", IPConfig{TrustedProxies: trusted, IPv4Prefix: 24}, "10.0.0.1:1", []string{XFF, "198.51.100.9"}, "198.51.100.0/24"},
		{"xff ignores x-real-ip and forwarded", xff, "10.0.0.1:1", []string{XRI, "1.1.1.1", FWD, "for=2.2.2.2", XFF, "198.51.100.9"}, "198.51.100.9"},
		{"xff explicit header name any case", IPConfig{TrustedProxies: trusted, Header: "x-forwarded-for"}, "10.0.0.1:1", []string{XFF, "198.51.100.9"}, "198.51.100.9"},

		// X-Real-IP from a trusted peer.
		{"x-real-ip", realIP, "10.0.0.1:1", []string{XRI, "198.51.100.9"}, "198.51.100.9"},
		{"x-real-ip ipv6", realIP, "10.0.0.1:1", []string{XRI, "2001:db8:1:2::5"}, "2001:db8:1:2::/64"},
		{"x-real-ip trusted address used", realIP, "10.0.0.1:1", []string{XRI, "10.9.9.9"}, "10.9.9.9"},
		{"x-real-ip last line wins", realIP, "10.0.0.1:1", []string{XRI, "6.6.6.6", XRI, "198.51.100.9"}, "198.51.100.9"},
		{"x-real-ip list is garbage", realIP, "10.0.0.1:1", []string{XRI, "6.6.6.6, 198.51.100.9"}, "10.0.0.1"},
		{"x-real-ip garbage", realIP, "10.0.0.1:1", []string{XRI, "nope"}, "10.0.0.1"},
		{"x-real-ip absent", realIP, "10.0.0.1:1", []string{XFF, "198.51.100.9"}, "10.0.0.1"},

		// Forwarded (RFC 7239) from a trusted peer.
		{"forwarded token", fwd, "10.0.0.1:1", []string{FWD, "for=198.51.100.9"}, "198.51.100.9"},
		{"forwarded quoted ipv4 with port", fwd, "10.0.0.1:1", []string{FWD, `for="198.51.100.9:8080"`}, "198.51.100.9"},
		{"forwarded quoted ipv6", fwd, "10.0.0.1:1", []string{FWD, `for="[2001:db8:cafe::17]"`}, "2001:db8:cafe::/64"},
		{"forwarded quoted ipv6 with port", fwd, "10.0.0.1:1", []string{FWD, `for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::/64"},
		{"forwarded obfuscated port", fwd, "10.0.0.1:1", []string{FWD, `for="[2001:db8:cafe::17]:_p1"`}, "2001:db8:cafe::/64"},
		{"forwarded with other params", fwd, "10.0.0.1:1", []string{FWD, "proto=https;for=198.51.100.9;by=10.0.0.1"}, "198.51.100.9"},
		{"forwarded param name any case", fwd, "10.0.0.1:1", []string{FWD, "For=198.51.100.9"}, "198.51.100.9"},
		{"forwarded chain", fwd, "10.0.0.1:1", []string{FWD, `for=1.1.1.1, for=198.51.100.9;proto=https, for="[2001:db8:ffff::2]"`}, "198.51.100.9"},
		{"forwarded comma in quoted param", fwd, "10.0.0.1:1", []string{FWD, `for=1.1.1.1, for=198.51.100.9;host="a,b;c", for=10.1.1.1`}, "198.51.100.9"},
		{"forwarded escaped quote in param", fwd, "10.0.0.1:1", []string{FWD, `for=198.51.100.9;ext="x\",y", for=10.1.1.1`}, "198.51.100.9"},
		{"forwarded lines read as one list", fwd, "10.0.0.1:1", []string{FWD, "for=6.6.6.6", FWD, "for=198.51.100.9", FWD, "for=10.1.1.1"}, "198.51.100.9"},
		{"forwarded unknown is garbage", fwd, "10.0.0.1:1", []string{FWD, "for=1.1.1.1, for=unknown, for=10.1.1.1"}, "10.1.1.1"},
		{"forwarded obfuscated is garbage", fwd, "10.0.0.1:1", []string{FWD, `for=1.1.1.1, for="_hidden"`}, "10.0.0.1"},
		{"forwarded element without for is garbage", fwd, "10.0.0.1:1", []string{FWD, "for=1.1.1.1, proto=https"}, "10.0.0.1"},
		{"forwarded two for in one element is garbage", fwd, "10.0.0.1:1", []string{FWD, "for=1.1.1.1;for=198.51.100.9"}, "10.0.0.1"},
		{"forwarded unterminated quote is garbage", fwd, "10.0.0.1:1", []string{FWD, `for="198.51.100.9`}, "10.0.0.1"},
		{"forwarded quoted-pair is garbage", fwd, "10.0.0.1:1", []string{FWD, `for="198.51.100\.9"`}, "10.0.0.1"},
		{"forwarded ignores xff", fwd, "10.0.0.1:1", []string{XFF, "1.1.1.1", FWD, "for=198.51.100.9"}, "198.51.100.9"},
		{"forwarded all trusted uses leftmost", fwd, "10.0.0.1:1", []string{FWD, "for=10.3.3.3, for=10.2.2.2"}, "10.3.3.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn := mustIP(t, tt.cfg)
			got, err := fn(newRequest(tt.remote, tt.headers...))
			if err != nil || got != tt.want {
				t.Errorf("IP(%s)(RemoteAddr %q, headers %q) = %q, %v; want %q", cfgString(tt.cfg), tt.remote, tt.headers, got, err, tt.want)
			}
		})
	}
}

func cfgString(c IPConfig) string {
	return "{TrustedProxies:" + strconv.Itoa(len(c.TrustedProxies)) + " Header:" + strconv.Quote(c.Header) +
		" IPv4Prefix:" + strconv.Itoa(c.IPv4Prefix) + " IPv6Prefix:" + strconv.Itoa(c.IPv6Prefix) + "}"
}

func TestIPNoKey(t *testing.T) {
	t.Parallel()
	for _, remote := range []string{
		"",
		"garbage",
		"example.com:80",
		"localhost",
		"1.2.3.4:",
		"1.2.3.4:abc",
		"1.2.3.4:123456",
		"1.2.3.256:80",
		"01.2.3.4:80",
		"1.2.3.4%eth0",
		"[::1",
		"[::1]x",
		"[::1]:",
		"::1]:80",
		"[]:80",
		":80",
		"@",
		strings.Repeat("1", 1<<20),
	} {
		for _, cfg := range []IPConfig{{}, {TrustedProxies: mustProxies(t, "0.0.0.0/1", "128.0.0.0/1")}} {
			fn := mustIP(t, cfg)
			r := newRequest(remote, "X-Forwarded-For", "198.51.100.9")
			got, err := fn(r)
			if !errors.Is(err, ErrNoKey) || got != "" {
				t.Errorf("IP(%s)(RemoteAddr %s) = %q, %v; want ErrNoKey", cfgString(cfg), quoteTrunc(remote), got, err)
			}
		}
	}
}

func TestIPErrorMessage(t *testing.T) {
	t.Parallel()
	fn := mustIP(t, IPConfig{})
	for remote, want := range map[string]string{
		"":           "redlimit: keyfunc IP: empty RemoteAddr",
		"nope:80":    `redlimit: keyfunc IP: RemoteAddr "nope:80" is not an IP address`,
		"1.2.3.4:xx": `redlimit: keyfunc IP: RemoteAddr "1.2.3.4:xx" is not an IP address`,
	} {
		_, err := fn(newRequest(remote))
		if err == nil || err.Error() != want {
			t.Errorf("IP(RemoteAddr %q) error = %v, want %s", remote, err, want)
		}
		var e *Error
		if !errors.As(err, &e) || e.Func != "IP" {
			t.Errorf("IP(RemoteAddr %q) error = %#v, want *Error for IP", remote, err)
		}
	}
}

func TestIPConfigErrors(t *testing.T) {
	t.Parallel()
	lb := mustProxies(t, "10.0.0.0/8")
	tests := []struct {
		name string
		cfg  IPConfig
		want string
	}{
		{"ipv4 prefix too big", IPConfig{IPv4Prefix: 33}, "redlimit: IPConfig.IPv4Prefix must be in 1..32, got 33"},
		{"ipv4 prefix negative", IPConfig{IPv4Prefix: -1}, "redlimit: IPConfig.IPv4Prefix must be in 1..32, got -1"},
		{"ipv6 prefix too big", IPConfig{IPv6Prefix: 200}, "redlimit: IPConfig.IPv6Prefix must be in 1..128, got 200"},
		{"ipv6 prefix negative", IPConfig{IPv6Prefix: -64}, "redlimit: IPConfig.IPv6Prefix must be in 1..128, got -64"},
		{"unknown header", IPConfig{TrustedProxies: lb, Header: "CF-Connecting-IP"},
			`redlimit: IPConfig.Header must be "X-Forwarded-For", "X-Real-IP" or "Forwarded", got "CF-Connecting-IP"`},
		{"header without proxies", IPConfig{Header: "X-Forwarded-For"},
			`redlimit: IPConfig.Header is "X-Forwarded-For" but IPConfig.TrustedProxies is empty: the header would be believed from no one and every client behind a proxy would share the proxy's key`},
		{"zero prefix", IPConfig{TrustedProxies: []netip.Prefix{lb[0], {}}},
			"redlimit: IPConfig.TrustedProxies[1] is not a valid prefix (the zero netip.Prefix, or bits out of range)"},
		{"trust all ipv4", IPConfig{TrustedProxies: mustProxies(t, "0.0.0.0/0")},
			"redlimit: IPConfig.TrustedProxies[0] is 0.0.0.0/0, which trusts every address and lets any client choose its key"},
		{"trust all ipv6", IPConfig{TrustedProxies: []netip.Prefix{lb[0], netip.MustParsePrefix("::/0")}},
			"redlimit: IPConfig.TrustedProxies[1] is ::/0, which trusts every address and lets any client choose its key"},
		{"trust all mapped ipv4", IPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:0.0.0.0/96")}},
			"redlimit: IPConfig.TrustedProxies[0] is 0.0.0.0/0, which trusts every address and lets any client choose its key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn, err := IP(tt.cfg)
			if fn != nil || err == nil || err.Error() != tt.want {
				t.Fatalf("IP(%s) = %v, %v; want error %s", cfgString(tt.cfg), fn != nil, err, tt.want)
			}
			var ce *algorithms.ConfigError
			if !errors.Is(err, algorithms.ErrInvalidConfig) || !errors.As(err, &ce) {
				t.Errorf("IP(%s) error %#v is not an *algorithms.ConfigError wrapping ErrInvalidConfig", cfgString(tt.cfg), err)
			}
		})
	}
}

// TestIPDoesNotKeepConfig checks that IP copies TrustedProxies: changing the
// caller's slice later must not change whom the Func trusts.
func TestIPDoesNotKeepConfig(t *testing.T) {
	t.Parallel()
	ps := mustProxies(t, "10.0.0.0/8")
	fn := mustIP(t, IPConfig{TrustedProxies: ps})
	ps[0] = netip.MustParsePrefix("203.0.113.0/24")
	r := newRequest("203.0.113.7:1", "X-Forwarded-For", "198.51.100.9")
	if got, err := fn(r); err != nil || got != "203.0.113.7" {
		t.Errorf("IP after changing the caller's slice = %q, %v; want %q", got, err, "203.0.113.7")
	}
}

// TestIPBounds feeds huge and long forwarding headers. It measures
// allocations, so it and its subtests are not parallel.
func TestIPBounds(t *testing.T) {
	fn := mustIP(t, IPConfig{TrustedProxies: mustProxies(t, lbs...)})
	const XFF = "X-Forwarded-For"

	hops := func(n int) string { // n trusted hops, leftmost first: "10.0.0.n, ..., 10.0.0.1"
		var b strings.Builder
		for i := n; i >= 1; i-- {
			b.WriteString(", 10.0.0.")
			b.WriteString(strconv.Itoa(i))
		}
		return b.String()
	}
	mb := 1 << 20
	lines := make([]string, 0, 2*1024)
	for range 1024 {
		lines = append(lines, XFF, strings.Repeat("9", 1023))
	}
	lines = append(lines, XFF, "198.51.100.9, 10.1.1.1")
	blankLines := []string{XFF, "198.51.100.9"}
	for range 9000 {
		blankLines = append(blankLines, XFF, " ")
	}
	blankLines = append(blankLines, XFF, "10.1.1.1")

	tests := []struct {
		name    string
		headers []string
		want    string
	}{
		{"31 trusted hops then client", []string{XFF, "198.51.100.9" + hops(31)}, "198.51.100.9"},
		{"32 trusted hops hide the client", []string{XFF, "198.51.100.9" + hops(32)}, "10.0.0.32"},
		{"1 MB of digits left of client", []string{XFF, strings.Repeat("1", mb) + ", 198.51.100.9, 10.1.1.1"}, "198.51.100.9"},
		{"1 MB without comma", []string{XFF, strings.Repeat("1", mb)}, "10.0.0.1"},
		{"1 MB of blanks", []string{XFF, strings.Repeat(" ", mb)}, "10.0.0.1"},
		{"1 MB of commas", []string{XFF, strings.Repeat(",", mb)}, "10.0.0.1"},
		{"1 MB of untrusted entries", []string{XFF, strings.Repeat("6.6.6.6, ", mb/9) + "198.51.100.9"}, "198.51.100.9"},
		{"1 MB of trusted entries", []string{XFF, strings.Repeat("10.9.9.9, ", mb/10) + "10.1.1.1"}, "10.9.9.9"},
		{"1 MB in 1024 lines", lines, "198.51.100.9"},
		{"client beyond 8 KiB", []string{XFF, "198.51.100.9," + strings.Repeat(" ", 9000) + ", 10.1.1.1"}, "10.1.1.1"},
		{"entry cut by the 8 KiB window", []string{XFF, "198.51.100.9, " + strings.Repeat(" ", 9000) + "10.1.1.1"}, "10.0.0.1"},
		{"client beyond 8 KiB of blank lines", blankLines, "10.1.1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest("10.0.0.1:1", tt.headers...)
			start := time.Now()
			got, err := fn(r)
			elapsed := time.Since(start)
			if err != nil || got != tt.want {
				t.Errorf("IP(%s) = %q, %v; want %q", tt.name, got, err, tt.want)
			}
			// The work is bounded by 8 KiB and 32 hops: well under a
			// millisecond. The limit is loose for slow, loaded CI machines.
			if elapsed > 100*time.Millisecond {
				t.Errorf("IP(%s) took %v", tt.name, elapsed)
			}
			// A bounded walk reads substrings and copies nothing: the only
			// allocation is the key.
			if n := testing.AllocsPerRun(10, func() { _, _ = fn(r) }); n > 1 {
				t.Errorf("IP(%s) allocates %v times, want at most 1", tt.name, n)
			}
		})
	}
}

// TestIPAllocs enforces the allocation budget of IP's hot paths. Not
// parallel: testing.AllocsPerRun forbids it.
func TestIPAllocs(t *testing.T) {
	trusted := mustProxies(t, lbs...)
	tests := []struct {
		name    string
		cfg     IPConfig
		remote  string
		headers []string
		allocs  float64
	}{
		// The key is a substring of RemoteAddr: nothing to allocate.
		{"remote ipv4", IPConfig{}, "203.0.113.7:1234", nil, 0},
		{"remote ipv4 with proxies configured", IPConfig{TrustedProxies: trusted}, "203.0.113.7:1234", nil, 0},
		// The key is a new string: the prefix or the canonical form.
		{"remote ipv6 /64", IPConfig{}, "[2001:db8:1:2::1]:1234", nil, 1},
		{"remote ipv4 /24", IPConfig{IPv4Prefix: 24}, "203.0.113.7:1234", nil, 1},
		{"xff 3 hops", IPConfig{TrustedProxies: trusted}, "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.9, 10.2.2.2, 10.1.1.1"}, 1},
		{"forwarded 3 hops", IPConfig{TrustedProxies: trusted, Header: "Forwarded"}, "10.0.0.1:1", []string{"Forwarded", `for=198.51.100.9;proto=https, for="[2001:db8:ffff::2]:80", for=10.1.1.1`}, 1},
		{"x-real-ip", IPConfig{TrustedProxies: trusted, Header: "X-Real-IP"}, "10.0.0.1:1", []string{"X-Real-IP", "198.51.100.9"}, 1},
	}
	for _, tt := range tests {
		fn := mustIP(t, tt.cfg)
		r := newRequest(tt.remote, tt.headers...)
		if n := testing.AllocsPerRun(100, func() { _, _ = fn(r) }); n > tt.allocs {
			t.Errorf("IP %s: %v allocs per call, budget %v", tt.name, n, tt.allocs)
		}
	}
}

func BenchmarkIP(b *testing.B) {
	trusted := mustProxies(b, lbs...)
	benchmarks := []struct {
		name    string
		cfg     IPConfig
		remote  string
		headers []string
	}{
		{"remote-only", IPConfig{}, "203.0.113.7:1234", nil},
		{"remote-only-ipv6", IPConfig{}, "[2001:db8:1:2::1]:1234", nil},
		{"xff-3-hops", IPConfig{TrustedProxies: trusted}, "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.9, 10.2.2.2, 10.1.1.1"}},
		{"forwarded-3-hops", IPConfig{TrustedProxies: trusted, Header: "Forwarded"}, "10.0.0.1:1", []string{"Forwarded", `for=198.51.100.9;proto=https, for="[2001:db8:ffff::2]:80", for=10.1.1.1`}},
		{"xff-1MB", IPConfig{TrustedProxies: trusted}, "10.0.0.1:1", []string{"X-Forwarded-For", strings.Repeat("10.9.9.9, ", 100_000) + "198.51.100.9"}},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			fn := mustIP(b, bm.cfg)
			r := newRequest(bm.remote, bm.headers...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fn(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzIP(f *testing.F) {
	f.Add("203.0.113.7:1234", "198.51.100.9", "", "", "")
	f.Add("10.0.0.1:1", "1.1.1.1, 198.51.100.9, 10.1.1.1", "10.2.2.2", "198.51.100.9", `for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https`)
	f.Add("[2001:db8:ffff::1]:80", "garbage, ::ffff:10.1.1.1", "fe80::1%eth0", "6.6.6.6, 7.7.7.7", `for="_x";by=unknown, for=10.0.0.2`)
	f.Add("[::ffff:10.0.0.1]:1", ",,,", " ", "[::1]:80", `for="\"";x="a,b"`)
	f.Add("fe80::1%eth0", "[2001:db8::1", "10.0.0.1:http", "", `For=10.1.1.1;for=2.2.2.2`)
	f.Add("", "", "", "", "")

	trusted := mustProxies(f, lbs...)
	direct := mustIP(f, IPConfig{})
	directV6 := mustIP(f, IPConfig{IPv4Prefix: 20, IPv6Prefix: 56})
	withProxies := []Func{
		mustIP(f, IPConfig{TrustedProxies: trusted}),
		mustIP(f, IPConfig{TrustedProxies: trusted, Header: "X-Real-IP"}),
		mustIP(f, IPConfig{TrustedProxies: trusted, Header: "Forwarded", IPv6Prefix: 128}),
	}
	f.Fuzz(func(t *testing.T, remote, xff1, xff2, realIP, fwd string) {
		bare := newRequest(remote)
		full := newRequest(remote, "X-Forwarded-For", xff1, "X-Forwarded-For", xff2, "X-Real-IP", realIP, "Forwarded", fwd)

		// With nobody trusted, the key depends on RemoteAddr alone.
		want, wantErr := direct(bare)
		for i, fn := range []Func{direct, directV6} {
			_, bareErr := fn(bare)
			got, err := fn(full)
			checkIPKey(t, got, err)
			if i == 0 && (got != want || (err == nil) != (wantErr == nil)) {
				t.Fatalf("IP({}) with headers = %q, %v; without = %q, %v", got, err, want, wantErr)
			}
			if (err == nil) != (bareErr == nil) {
				t.Fatalf("IP with headers err %v, without %v", err, bareErr)
			}
		}

		peer, _, peerOK := parseNode(remote)
		for _, fn := range withProxies {
			got, err := fn(full)
			checkIPKey(t, got, err)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("IP err %v, but without proxies %v", err, wantErr)
			}
			// An untrusted peer's headers are ignored.
			if peerOK && !trustedBy(trusted, peer) {
				if bareGot, _ := fn(bare); got != bareGot {
					t.Fatalf("untrusted peer %q: key %q with headers, %q without", remote, got, bareGot)
				}
			}
		}
	})
}

// checkIPKey fails unless key, err is a valid result of an IP Func: ErrNoKey,
// or a canonical address or prefix.
func checkIPKey(t *testing.T, key string, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrNoKey) || key != "" {
			t.Fatalf("IP = %q, %v; want a key or ErrNoKey", key, err)
		}
		return
	}
	if strings.IndexByte(key, '/') >= 0 {
		p, perr := netip.ParsePrefix(key)
		if perr != nil || p.String() != key || p.Masked() != p || p.Addr().Is4In6() {
			t.Fatalf("IP key %q is not a canonical masked prefix (%v)", key, perr)
		}
		return
	}
	a, aerr := netip.ParseAddr(key)
	if aerr != nil || a.String() != key || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("IP key %q is not a canonical address (%v)", key, aerr)
	}
}

func trustedBy(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
