package keyfunc

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
)

// Forwarding headers [IPConfig].Header accepts.
const (
	HeaderXForwardedFor = "X-Forwarded-For" // comma-separated addresses, each proxy appends its peer
	HeaderXRealIP       = "X-Real-IP"       // one address, set (overwritten) by the proxy
	HeaderForwarded     = "Forwarded"       // RFC 7239: elements with for= parameters, each proxy appends one
)

// IPConfig configures [IP]. The zero value keys every request by the address
// of its TCP peer (RemoteAddr), grouping IPv6 clients by /64.
type IPConfig struct {
	// TrustedProxies are the prefixes of the proxies whose forwarding header
	// is believed: exactly your load balancers and reverse proxies, nothing
	// wider. Empty means trust no one: the key comes from RemoteAddr and
	// forwarding headers are ignored. Build it with [ParseTrustedProxies].
	// A /0 prefix is rejected: trusting every address lets any client
	// choose its key.
	TrustedProxies []netip.Prefix

	// Header names the forwarding header the trusted proxies set:
	// [HeaderXForwardedFor] (the default when TrustedProxies is not empty),
	// [HeaderXRealIP] or [HeaderForwarded], in any letter case. It must be
	// empty when TrustedProxies is: a header read from no one is a
	// configuration mistake that would key every client by its proxy.
	Header string

	// IPv4Prefix is the number of leading bits of an IPv4 address kept in
	// the key, 1 to 32; 0 means 32 (one bucket per address). 24 puts each
	// /24 network in one bucket.
	IPv4Prefix int

	// IPv6Prefix is the number of leading bits of an IPv6 address kept in
	// the key, 1 to 128; 0 means 64. A single IPv6 client usually holds a
	// whole /64 (and can rotate addresses inside it at will), so /64 is the
	// smallest grouping that limits a client rather than an address.
	IPv6Prefix int
}

// Bounds on the work one request can cause by sending a huge or long
// forwarding header. Only the rightmost maxForwardedBytes bytes and the
// rightmost maxForwardedHops addresses are looked at; reaching either bound
// is treated like garbage (see [IP]).
const (
	maxForwardedBytes = 8 << 10
	maxForwardedHops  = 32
)

type headerKind uint8

const (
	headerNone headerKind = iota
	headerXFF
	headerRealIP
	headerForwarded
)

// ipKey is the state behind the Func returned by IP. It is immutable.
type ipKey struct {
	trusted []netip.Prefix
	kind    headerKind
	header  string // canonical header name
	v4bits  int
	v6bits  int
}

// IP returns a Func whose key is the client's IP address, masked to
// cfg.IPv4Prefix or cfg.IPv6Prefix bits. The address comes from the request's
// RemoteAddr (its TCP peer) unless that peer is one of cfg.TrustedProxies, in
// which case it comes from the forwarding header cfg.Header:
//
//   - X-Forwarded-For and Forwarded are lists to which each proxy appends the
//     address of its own peer. All lines of the header are read as one list,
//     in order, and walked from the right: addresses of trusted proxies are
//     skipped and the first untrusted address is the client. The left part
//     of the list is whatever the client sent and is never believed: a client
//     that writes "X-Forwarded-For: 1.2.3.4" only adds an entry left of the
//     one its proxy appends. When every address is trusted, the leftmost is
//     used. Forwarded elements are read for their for= parameter (quoted or
//     not, IPv6 in brackets, with or without a port).
//   - X-Real-IP holds one address, which must be set or overwritten by the
//     proxy; when it appears on several lines the last one (from the hop
//     nearest to us) is used.
//
// An entry that is not an IP address (garbage, "unknown", an obfuscated
// Forwarded identifier, a list past the bounds below) stops the walk, and the
// last trusted hop seen, the proxy nearest to the garbage, becomes the key:
// never the garbage, and never an address left of it, which a client could
// have chosen. The same happens when a trusted peer sends no forwarding
// header: the peer itself is the client. At most the rightmost 8 KiB and 32
// addresses of a header are examined, so a huge header costs little.
//
// Addresses are normalised before use: an IPv6 zone ("fe80::1%eth0") is
// dropped and an IPv4-mapped IPv6 address ("::ffff:192.0.2.1") is treated as
// the IPv4 address it maps.
//
// The key is the canonical text of the masked address: the address alone
// when all its bits are kept ("203.0.113.7", "2001:db8::1"), otherwise the
// prefix in CIDR notation ("203.0.113.0/24", "2001:db8:1:2::/64"), as
// [netip.Addr.String] and [netip.Prefix.String] write them. A RemoteAddr
// that is empty or not an IP address, with or without a port, reports
// [ErrNoKey].
//
// IP returns an [*algorithms.ConfigError] naming the field when cfg is
// invalid; it matches [algorithms.ErrInvalidConfig]. The Func it returns is
// safe for concurrent use; with no trusted proxy and an IPv4 peer it does not
// allocate.
func IP(cfg IPConfig) (Func, error) {
	k := &ipKey{v4bits: cfg.IPv4Prefix, v6bits: cfg.IPv6Prefix}
	if k.v4bits == 0 {
		k.v4bits = 32
	}
	if k.v6bits == 0 {
		k.v6bits = 64
	}
	if k.v4bits < 1 || k.v4bits > 32 {
		return nil, configError("IPConfig.IPv4Prefix", "must be in 1..32, got "+strconv.Itoa(cfg.IPv4Prefix))
	}
	if k.v6bits < 1 || k.v6bits > 128 {
		return nil, configError("IPConfig.IPv6Prefix", "must be in 1..128, got "+strconv.Itoa(cfg.IPv6Prefix))
	}
	trusted, err := normalizePrefixes(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	k.trusted = trusted
	k.kind, k.header = headerXFF, HeaderXForwardedFor
	switch h := textproto.CanonicalMIMEHeaderKey(cfg.Header); h {
	case "":
	case HeaderXForwardedFor:
	case "X-Real-Ip":
		k.kind, k.header = headerRealIP, h
	case HeaderForwarded:
		k.kind, k.header = headerForwarded, h
	default:
		return nil, configError("IPConfig.Header", `must be "X-Forwarded-For", "X-Real-IP" or "Forwarded", got `+strconv.Quote(cfg.Header))
	}
	if len(trusted) == 0 {
		if cfg.Header != "" {
			return nil, configError("IPConfig.Header", "is "+strconv.Quote(cfg.Header)+
				" but IPConfig.TrustedProxies is empty: the header would be believed from no one and every client behind a proxy would share the proxy's key")
		}
		k.kind, k.header = headerNone, ""
	}
	return k.key, nil
}

var errRemoteAddrEmpty = noKey("IP", "empty RemoteAddr")

func (k *ipKey) key(r *http.Request) (string, error) {
	if r.RemoteAddr == "" {
		return "", errRemoteAddrEmpty
	}
	addr, text, ok := parseNode(r.RemoteAddr)
	if !ok {
		return "", noKey("IP", "RemoteAddr "+quoteTrunc(r.RemoteAddr)+" is not an IP address")
	}
	if k.kind != headerNone && k.isTrusted(addr) {
		addr, text = k.forwarded(r.Header[k.header], addr, text)
	}
	return k.format(addr, text), nil
}

// isTrusted reports whether a (normalised: unmapped, no zone) is the address
// of a trusted proxy.
func (k *ipKey) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// format returns the key of a: the canonical text of a masked to the
// configured bits. text is how a appeared in the request; when it already is
// the key, it is returned as is, without allocating.
func (k *ipKey) format(a netip.Addr, text string) string {
	bits := k.v6bits
	if a.Is4() {
		bits = k.v4bits
	}
	var buf [64]byte // longest: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"
	var b []byte
	if bits == a.BitLen() {
		b = a.AppendTo(buf[:0])
		if string(b) == text {
			return text
		}
	} else {
		p, _ := a.Prefix(bits) // cannot fail: bits is within a's length
		b = p.AppendTo(buf[:0])
	}
	return string(b)
}
