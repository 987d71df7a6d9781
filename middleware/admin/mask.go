package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
	"sync"
)

// MinMaskSecret is the shortest Config.MaskSecret New accepts, in bytes.
const MinMaskSecret = 16

// MaskKey is the default masking of key material on the page: an IPv4
// address becomes its /24 ("192.0.2.0/24"), an IPv6 address its /48 (a
// prefix, as keyfunc.IP writes a masked address, at most as long),
// anything else "#" and the first 12 hex digits of its HMAC-SHA-256 under
// secret. Material the engine stored as a digest (longer than 128 bytes)
// is shown as that digest.
//
// An empty secret means this process's secret, drawn at random the first
// time it is needed: its masks mean nothing to another process, and a
// user id or an e-mail address cannot be found from its mask by hashing a
// dictionary. Pass the same secret (Config.MaskSecret) to have several
// instances show a key under one mask; whoever holds the secret can test
// guesses against the masks, so keep it as secret as the keys.
func MaskKey(secret []byte, material string) string {
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
	return hashKey(secret, material)
}

// hashKey is how MaskKey shows material that is no IP address: "#" and the
// first 12 hex digits of its HMAC-SHA-256 under secret (the process's
// secret when empty).
func hashKey(secret []byte, material string) string {
	if len(secret) == 0 {
		secret = processSecret()
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(material))
	return "#" + hex.EncodeToString(m.Sum(nil)[:6])
}

// processSecret is the secret of the masks of a process whose Config sets
// none: random, drawn once.
var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return b
})

// materialOf returns the (sanitised) key material of the storage key
// "<prefix>:<rule>:<tag>:{<material>}".
func materialOf(key string) string {
	i := strings.Index(key, ":{")
	if i < 0 || !strings.HasSuffix(key, "}") {
		return key
	}
	return key[i+2 : len(key)-1]
}
