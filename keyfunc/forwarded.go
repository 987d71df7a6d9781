package keyfunc

import (
	"net/netip"
	"strings"
)

// forwarded finds the client address in the values of the configured
// forwarding header of a request whose peer (addr, written text) is trusted.
// It returns the peer itself when the header has nothing better.
//
// An address found in a header is returned with an empty text, so that the
// key is always a fresh string: a substring would keep the whole header
// value, up to a megabyte, alive for as long as the key is kept.
func (k *ipKey) forwarded(values []string, peer netip.Addr, text string) (netip.Addr, string) {
	if len(values) == 0 {
		return peer, text
	}
	if k.kind == headerRealIP {
		v := values[len(values)-1]
		if len(v) > 2*maxNodeLen {
			return peer, text
		}
		if a, _, ok := parseNode(trimOWS(v)); ok {
			return a, ""
		}
		return peer, text
	}
	return k.walk(values, peer, text)
}

// walk walks a list header (X-Forwarded-For or Forwarded) from the right,
// starting from the trusted peer. It returns the first untrusted address, or
// the last trusted one seen when the list is exhausted, holds garbage, or
// goes past the bounds maxForwardedBytes and maxForwardedHops.
func (k *ipKey) walk(values []string, last netip.Addr, lastText string) (netip.Addr, string) {
	budget, hops := maxForwardedBytes, 0
	for i := len(values) - 1; i >= 0; i-- {
		if budget <= 0 {
			return last, lastText
		}
		v := values[i]
		cut := len(v) > budget // the leftmost element in v is then partial
		if cut {
			v = v[len(v)-budget:]
		}
		budget -= len(v) + 1 // +1: the line break stands for a comma
		for {
			j := k.lastComma(v)
			if j < 0 && cut {
				return last, lastText
			}
			if elem := trimOWS(v[j+1:]); elem != "" {
				if hops++; hops > maxForwardedHops {
					return last, lastText
				}
				var a netip.Addr
				var ok bool
				if k.kind == headerForwarded {
					a, ok = parseForwardedElement(elem)
				} else {
					a, _, ok = parseNode(elem)
				}
				if !ok {
					return last, lastText
				}
				if !k.isTrusted(a) {
					return a, ""
				}
				last, lastText = a, ""
			}
			if j < 0 {
				break
			}
			v = v[:j]
		}
	}
	return last, lastText
}

// lastComma returns the index of the last list separator in v, or -1. In a
// Forwarded header, commas inside quoted strings do not separate.
func (k *ipKey) lastComma(v string) int {
	if k.kind != headerForwarded {
		return strings.LastIndexByte(v, ',')
	}
	quoted := false
	for i := len(v) - 1; i >= 0; i-- {
		switch v[i] {
		case '"':
			if !quoted || !escaped(v, i) {
				quoted = !quoted
			}
		case ',':
			if !quoted {
				return i
			}
		}
	}
	return -1
}

// escaped reports whether v[i] is preceded by an odd number of backslashes.
func escaped(v string, i int) bool {
	n := 0
	for i--; i >= 0 && v[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// parseForwardedElement returns the address in the for= parameter of one
// RFC 7239 forwarded-element, such as
//
//	for="[2001:db8:cafe::17]:4711";proto=https;by=203.0.113.43
//
// An element without exactly one for=, with an unknown or obfuscated node
// ("unknown", "_hidden"), or with a malformed quoted string is garbage.
func parseForwardedElement(elem string) (netip.Addr, bool) {
	var node string
	found := false
	for elem != "" {
		// Split off one pair, honouring quoted strings.
		end, quoted := len(elem), false
		for i := 0; i < len(elem); i++ {
			c := elem[i]
			if quoted && c == '\\' {
				i++ // skip the escaped byte
			} else if c == '"' {
				quoted = !quoted
			} else if c == ';' && !quoted {
				end = i
				break
			}
		}
		if quoted {
			return netip.Addr{}, false // unterminated quoted string
		}
		pair := trimOWS(elem[:end])
		if end < len(elem) {
			elem = elem[end+1:]
		} else {
			elem = ""
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !strings.EqualFold(trimOWS(name), "for") {
			continue
		}
		if found {
			return netip.Addr{}, false // two for= in one element
		}
		found = true
		node = trimOWS(value)
		if len(node) >= 2 && node[0] == '"' && node[len(node)-1] == '"' {
			node = node[1 : len(node)-1]
			if strings.IndexByte(node, '\\') >= 0 {
				return netip.Addr{}, false // no address needs quoted-pairs
			}
		}
	}
	if !found || node == "" || node[0] == '_' || strings.EqualFold(node, "unknown") {
		return netip.Addr{}, false
	}
	a, _, ok := parseNode(node)
	return a, ok
}

// maxNodeLen bounds the text of one address with its port; the longest real
// one, "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255%zone]:65535", is far
// shorter, even with a long zone.
const maxNodeLen = 128

// parseNode parses an address as it appears in RemoteAddr and forwarding
// headers: "192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:80", each IPv6 form with an optional zone. The address is
// returned normalised (no zone, IPv4-mapped IPv6 unmapped) together with the
// text it was parsed from.
func parseNode(s string) (addr netip.Addr, text string, ok bool) {
	if s == "" || len(s) > maxNodeLen {
		return netip.Addr{}, "", false
	}
	host := s
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, "", false
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// One colon: an IPv4 address (or name) and a port. Two or more: a
		// bare IPv6 address.
		if !validPort(s[i+1:]) {
			return netip.Addr{}, "", false
		}
		host = s[:i]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if a.Zone() != "" {
		a = a.WithZone("")
	}
	return a.Unmap(), host, true
}

// validPort reports whether p is a port as it may follow an address: 1 to 5
// digits, or an RFC 7239 obfuscated port ("_" and letters, digits, ".", "_",
// "-").
func validPort(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '_' {
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return len(p) > 1
	}
	if len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// trimOWS trims the optional whitespace (spaces and tabs) of HTTP around s.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
