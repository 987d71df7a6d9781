// Package keys turns untrusted key material into text that is safe inside
// a storage key (Sanitize), and joins parts of key material unambiguously
// (JoinKeys). The limiter builds storage keys with Sanitize; keyfunc.Join
// and grpclimit join parts with JoinKeys, so that they share buckets.
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

// Sanitize turns untrusted key material into text that is safe inside a
// Redis key such as `<prefix>:<rule>:<algorithm>:{<material>}`:
//
//   - it holds only printable ASCII (0x21 to 0x7E) and never "{" or "}", so
//     a client cannot choose the Redis Cluster hash slot of its key nor break
//     out of the braces; no space, control character or non-ASCII byte
//     survives;
//   - it is at most [MaxMaterialLen] (128) bytes long;
//   - it is injective: different materials give different results, so
//     neutralising a value never lets a client land in someone else's bucket.
//
// To that end, each byte that is not printable ASCII, each "{", "}", and "%"
// (the escape character itself) is percent-encoded as "%" and two uppercase
// hex digits: "a b{c}%" becomes "a%20b%7Bc%7D%25", and UTF-8 "é" becomes
// "%C3%A9". Material that starts with "h:" has its "h" encoded ("%68:..."),
// because "h:" marks hashed results: when the encoded text would be longer
// than 128 bytes, the result is instead "h:" followed by the 32 lowercase hex
// digits of the first 16 bytes of the SHA-256 of the raw material (34 bytes
// in all), which keeps distinct long values distinct.
//
// Material that needs no change (printable ASCII without "{", "}" or "%",
// not starting with "h:", at most 128 bytes) is returned as it is, without
// allocating. Sanitize is not idempotent: sanitising a result again encodes
// its "%" signs.
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
