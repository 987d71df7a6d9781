package keyfunc

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"none", nil, []string{}},
		{"ipv4 prefix", []string{"10.0.0.0/8"}, []string{"10.0.0.0/8"}},
		{"ipv6 prefix", []string{"2001:db8::/32"}, []string{"2001:db8::/32"}},
		{"bare ipv4", []string{"192.0.2.10"}, []string{"192.0.2.10/32"}},
		{"bare ipv6", []string{"::1"}, []string{"::1/128"}},
		{"bare zoned ipv6", []string{"fe80::1%eth0"}, []string{"fe80::1/128"}},
		{"host bits cleared", []string{"10.1.2.3/8"}, []string{"10.0.0.0/8"}},
		{"mapped prefix becomes ipv4", []string{"::ffff:10.0.0.0/104"}, []string{"10.0.0.0/8"}},
		{"mapped address becomes ipv4", []string{"::ffff:192.0.2.10"}, []string{"192.0.2.10/32"}},
		{"blanks trimmed", []string{" 10.0.0.0/8", "\t::1 "}, []string{"10.0.0.0/8", "::1/128"}},
		{"order kept", []string{"::1", "127.0.0.1", "10.0.0.0/8"}, []string{"::1/128", "127.0.0.1/32", "10.0.0.0/8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTrustedProxies(tt.in...)
			if err != nil {
				t.Fatalf("ParseTrustedProxies(%q) = %v", tt.in, err)
			}
			gotS := make([]string, len(got))
			for i, p := range got {
				gotS[i] = p.String()
			}
			if !slices.Equal(gotS, tt.want) {
				t.Errorf("ParseTrustedProxies(%q) = %q, want %q", tt.in, gotS, tt.want)
			}
		})
	}
}

func TestParseTrustedProxiesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"10.0.0.0/8", "10.0.0.300/8"}, `redlimit: keyfunc.ParseTrustedProxies entry 1 "10.0.0.300/8" is neither an IP address nor a CIDR prefix`},
		{[]string{""}, `redlimit: keyfunc.ParseTrustedProxies entry 0 "" is neither an IP address nor a CIDR prefix`},
		{[]string{"lb.internal"}, `redlimit: keyfunc.ParseTrustedProxies entry 0 "lb.internal" is neither an IP address nor a CIDR prefix`},
		{[]string{"10.0.0.0/33"}, `redlimit: keyfunc.ParseTrustedProxies entry 0 "10.0.0.0/33" is neither an IP address nor a CIDR prefix`},
		{[]string{"10.0.0.0/8, 192.0.2.0/24"}, `redlimit: keyfunc.ParseTrustedProxies entry 0 "10.0.0.0/8, 192.0.2.0/24" is neither an IP address nor a CIDR prefix`},
		{[]string{"10.0.0.1:80"}, `redlimit: keyfunc.ParseTrustedProxies entry 0 "10.0.0.1:80" is neither an IP address nor a CIDR prefix`},
	}
	for _, tt := range tests {
		got, err := ParseTrustedProxies(tt.in...)
		if got != nil || err == nil || err.Error() != tt.want {
			t.Errorf("ParseTrustedProxies(%q) = %v, %v; want error %s", tt.in, got, err, tt.want)
		}
		var ce *algorithms.ConfigError
		if !errors.Is(err, algorithms.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("ParseTrustedProxies(%q) error %#v is not an *algorithms.ConfigError wrapping ErrInvalidConfig", tt.in, err)
		}
	}
}

// TestTrustedProxyAliases checks that an attacker cannot get a trusted
// proxy's address past the trust check, or an untrusted one into it, by
// writing it another way.
func TestTrustedProxyAliases(t *testing.T) {
	t.Parallel()
	fn := mustIP(t, IPConfig{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::ffff:192.0.2.0/120"), // mapped form in the config
		netip.MustParsePrefix("fe80::/10"),
	}})
	tests := []struct {
		remote, xff, want string
	}{
		{"10.0.0.1:1", "198.51.100.9, [::ffff:10.1.1.1]:80", "198.51.100.9"},
		{"192.0.2.1:1", "198.51.100.9", "198.51.100.9"},
		{"[::ffff:192.0.2.1]:1", "198.51.100.9, 192.0.2.7", "198.51.100.9"},
		{"[fe80::1%eth0]:1", "198.51.100.9, fe80::2%lo", "198.51.100.9"},
		{"10.0.0.1:1", "198.51.100.9, ::ffff:11.0.0.1", "11.0.0.1"},
		{"10.0.0.1:1", "198.51.100.9, 10.0.0.1.nip.io", "10.0.0.1"},
	}
	for _, tt := range tests {
		got, err := fn(newRequest(tt.remote, "X-Forwarded-For", tt.xff))
		if err != nil || got != tt.want {
			t.Errorf("IP(RemoteAddr %q, X-Forwarded-For %q) = %q, %v; want %q", tt.remote, tt.xff, got, err, tt.want)
		}
	}
}
