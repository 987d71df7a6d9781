package keyfunc

import (
	"net/netip"
	"strconv"
	"strings"
)

// ParseTrustedProxies parses the addresses of trusted proxies for
// [IPConfig].TrustedProxies. Each entry is a CIDR prefix ("10.0.0.0/8",
// "2001:db8::/32") or a bare address, which stands for itself ("192.0.2.10"
// as /32, "::1" as /128). Blanks around an entry are ignored, so a
// comma-separated environment variable can be split and passed as is.
// Host bits set in a prefix are cleared ("10.1.2.3/8" is 10.0.0.0/8), and an
// IPv4-mapped IPv6 entry ("::ffff:10.0.0.0/104") becomes the IPv4 prefix it
// maps.
//
// The first entry that is empty or neither an address nor a prefix is
// reported as an [*algorithms.ConfigError] naming it, which matches
// [algorithms.ErrInvalidConfig].
func ParseTrustedProxies(cidrs ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for i, s := range cidrs {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		var err error
		if strings.IndexByte(s, '/') >= 0 {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			if err == nil && a.Zone() != "" {
				a = a.WithZone("")
			}
			if err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, configError("keyfunc.ParseTrustedProxies entry "+strconv.Itoa(i),
				quoteTrunc(cidrs[i])+" is neither an IP address nor a CIDR prefix")
		}
		out = append(out, normalizePrefix(p))
	}
	return out, nil
}

// normalizePrefixes checks and normalises IPConfig.TrustedProxies into a new
// slice: masked, IPv4-mapped prefixes turned into IPv4 ones.
func normalizePrefixes(ps []netip.Prefix) ([]netip.Prefix, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		field := "IPConfig.TrustedProxies[" + strconv.Itoa(i) + "]"
		if !p.IsValid() {
			return nil, configError(field, "is not a valid prefix (the zero netip.Prefix, or bits out of range)")
		}
		p = normalizePrefix(p)
		if p.Bits() == 0 {
			return nil, configError(field, "is "+p.String()+", which trusts every address and lets any client choose its key")
		}
		out[i] = p
	}
	return out, nil
}

// normalizePrefix masks p and turns an IPv4-mapped IPv6 prefix of at least
// 96 bits into the IPv4 prefix it maps, since addresses are unmapped before
// they are matched.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}
