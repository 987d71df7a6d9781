package world

import (
	"strconv"
	"sync"

	"github.com/redlimit/redlimit/internal/hashslot"
)

// keySlot returns the Redis Cluster hash slot of key (as CLUSTER KEYSLOT
// answers it).
func keySlot(key string) int { return hashslot.Of(key) }

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
