package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
)

// MaskKey is the default masking of key material on the page: an IPv4
// address becomes its /24 ("192.0.2.0/24"), an IPv6 address its /48 (a
// prefix, as keyfunc.IP writes a masked address, at most as long),
// anything else "#" and the first 12 hex digits of its SHA-256, the same
// on every instance (see [Hash]). Material the engine stored as a digest
// (longer than 128 bytes) is shown as that digest.
func MaskKey(material string) string {
	a, err := netip.ParseAddr(material)
	have := 128
	if err != nil {
		// keyfunc.IP with IPv4Prefix or IPv6Prefix: "2001:db8:1:2::/64"
		if p, perr := netip.ParsePrefix(material); perr == nil {
			a, have, err = p.Addr(), p.Bits(), nil
		}
	}
	if err == nil {
		a = a.Unmap().WithZone("")
		bits := 48
		if a.Is4() {
			bits = 24
		}
		p, _ := a.Prefix(min(bits, have))
		return p.String()
	}
	if strings.HasPrefix(material, "h:") { // keys.Sanitize's digest of long material
		return material
	}
	return Hash(material)
}

// Hash returns how MaskKey shows material that is no IP address: "#" and
// the first 12 hex digits of its SHA-256. The CLI and the lookup form show
// it too, so that an operator who knows a key can find it in the lists.
func Hash(material string) string {
	sum := sha256.Sum256([]byte(material))
	return "#" + hex.EncodeToString(sum[:6])
}

// materialOf returns the (sanitised) key material of the storage key
// "<prefix>:<rule>:<tag>:{<material>}".
func materialOf(key string) string {
	i := strings.Index(key, ":{")
	if i < 0 || !strings.HasSuffix(key, "}") {
		return key
	}
	return key[i+2 : len(key)-1]
}
