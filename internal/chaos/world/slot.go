package world

import (
	"strconv"
	"strings"
	"sync"
)

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag (the part between the first { and the next }, when not
// empty) or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	tagsOnce sync.Once
	tags     []string
)

// slotTag returns a hash tag (without braces) whose slot is slot.
func slotTag(slot int) string {
	tagsOnce.Do(func() {
		tags = make([]string, 16384)
		left := len(tags)
		for i := 0; left > 0; i++ {
			t := strconv.Itoa(i)
			if s := keySlot(t); tags[s] == "" {
				tags[s] = t
				left--
			}
		}
	})
	return tags[slot]
}
