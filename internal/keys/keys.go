// Package keys turns untrusted key material into text that is safe inside
// a storage key. It is the implementation of keyfunc.Sanitize, shared with
// the engine, which builds storage keys without importing keyfunc.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxMaterialLen is the longest result of Sanitize, in bytes.
const MaxMaterialLen = 128

// hashPrefix starts the result of Sanitize for material too long to keep.
const hashPrefix = "h:"

// Sanitize is keyfunc.Sanitize, documented there: printable ASCII without
// braces, at most MaxMaterialLen bytes, injective, and no allocation for
// material that needs no change.
func Sanitize(material string) string {
	if len(material) > MaxMaterialLen {
		return hashed(material)
	}
	n := 0 // bytes to encode
	for i := 0; i < len(material); i++ {
		if !keyByte(material[i]) {
			n++
		}
	}
	lookAlike := strings.HasPrefix(material, hashPrefix) // encode its 'h'
	if lookAlike {
		n++
	}
	if n == 0 {
		return material
	}
	size := len(material) + 2*n
	if size > MaxMaterialLen {
		return hashed(material)
	}
	var buf [MaxMaterialLen]byte
	b := buf[:0]
	for i := 0; i < len(material); i++ {
		c := material[i]
		if keyByte(c) && (i > 0 || !lookAlike) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexUpper[c>>4], hexUpper[c&0xF])
	}
	return string(b)
}

const hexUpper = "0123456789ABCDEF"

// keyByte reports whether c may appear unencoded in sanitised material.
func keyByte(c byte) bool {
	return c > ' ' && c < 0x7F && c != '{' && c != '}' && c != '%'
}

// hashed returns the fixed-length stand-in for material too long to keep.
func hashed(material string) string {
	h := sha256.New()
	// Feed the hash through a small buffer rather than []byte(material),
	// which would copy all of a possibly huge value.
	var chunk [512]byte
	for s := material; s != ""; {
		n := copy(chunk[:], s)
		h.Write(chunk[:n])
		s = s[n:]
	}
	var sum [sha256.Size]byte
	var out [len(hashPrefix) + 32]byte
	copy(out[:], hashPrefix)
	hex.Encode(out[len(hashPrefix):], h.Sum(sum[:0])[:16])
	return string(out[:])
}
