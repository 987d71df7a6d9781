package keyfunc

import "github.com/redlimit/redlimit/internal/keys"

// MaxMaterialLen is the longest result of [Sanitize], in bytes.
const MaxMaterialLen = keys.MaxMaterialLen

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
func Sanitize(material string) string { return keys.Sanitize(material) }
