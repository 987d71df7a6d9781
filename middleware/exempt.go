package middleware

import (
	"net/http"
	"net/netip"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// ExemptCIDRs returns a func for Config.Exempt or Rule.Exempt that reports
// whether the request's client address lies in one of prefixes: internal
// networks, health checkers, monitoring.
//
// The client address is the one [keyfunc.IP] finds with ip: the TCP peer,
// or, when the peer is one of ip.TrustedProxies, the address its forwarding
// header names, walked from the right. A forwarding header counts only
// when a trusted proxy sent it, and only the part the trusted proxies
// appended, so a client cannot exempt itself by sending
// "X-Forwarded-For: 10.0.0.1": give the same IPConfig as the rules' IP key,
// and trust exactly your proxies. ip.IPv4Prefix and ip.IPv6Prefix are
// ignored: the whole address is matched. An IPv4-mapped IPv6 address,
// among prefixes or in a request, is treated as the IPv4 address it maps.
// A request whose client address cannot be found is not exempt.
//
// ExemptCIDRs returns an *[algorithms.ConfigError] when ip is invalid (see
// [keyfunc.IP]), when prefixes is empty, or when a prefix is invalid or
// holds every address (/0: remove the rule instead). The func it returns
// is safe for concurrent use; with no trusted proxy and an IPv4 peer it
// does not allocate.
func ExemptCIDRs(ip keyfunc.IPConfig, prefixes ...netip.Prefix) (func(*http.Request) bool, error) {
	ip.IPv4Prefix, ip.IPv6Prefix = 32, 128
	client, err := keyfunc.IP(ip)
	if err != nil {
		return nil, err
	}
	if len(prefixes) == 0 {
		return nil, &algorithms.ConfigError{Field: "ExemptCIDRs prefixes", Reason: "must hold at least one prefix"}
	}
	exempt := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		field := "ExemptCIDRs prefixes[" + strconv.Itoa(i) + "]"
		if !p.IsValid() {
			return nil, &algorithms.ConfigError{Field: field, Reason: "is not a valid prefix: " + p.String()}
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p.Bits() == 0 {
			return nil, &algorithms.ConfigError{Field: field, Reason: "holds every address, got " + prefixes[i].String() + ": exempting every client is removing the limit"}
		}
		exempt[i] = p
	}
	return func(r *http.Request) bool {
		key, err := client(r)
		if err != nil {
			return false
		}
		a, err := netip.ParseAddr(key)
		if err != nil {
			return false
		}
		for _, p := range exempt {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}
