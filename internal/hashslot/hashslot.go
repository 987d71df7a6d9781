// Package hashslot computes the Redis Cluster hash slot of a key, for the
// Redis store (which groups a call's checks by slot) and its tests.
package hashslot

import "strings"

// Of returns the Redis Cluster hash slot of key, 0 to 16383: CRC16
// (XMODEM) of the key modulo 16384, where only the part between the first
// '{' and the next '}' is hashed when that part is not empty (the hash
// tag). It is what CLUSTER KEYSLOT answers; keys with equal slots can be
// evaluated by one script.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc % 16384)
}

// crc16Table is CRC16-CCITT (polynomial 0x1021), one entry per byte value.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
