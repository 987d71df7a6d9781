package engine

import (
	"strings"
	"sync"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

// keyCache remembers the storage key built from a rule's key material, so
// a client seen again costs no allocation and no escaping. It is bounded:
// at maxCachedKeys entries it is emptied and the working set refills it.
// Material longer than keys.MaxMaterialLen is never cached (its key is a
// digest, and caching would keep a huge value alive).
type keyCache struct {
	prefix string // "<prefix>:<rule>:<tag>:{"
	mu     sync.RWMutex
	keys   map[string]string
}

const maxCachedKeys = 4096

func newKeyCache(prefix string) *keyCache {
	return &keyCache{prefix: prefix, keys: make(map[string]string)}
}

// key returns "<prefix>:<rule>:<tag>:{" + Sanitize(material) + "}".
func (c *keyCache) key(material string) string {
	c.mu.RLock()
	k, ok := c.keys[material]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = c.prefix + keys.Sanitize(material) + "}"
	if len(material) <= keys.MaxMaterialLen {
		c.mu.Lock()
		if len(c.keys) >= maxCachedKeys {
			clear(c.keys)
		}
		c.keys[strings.Clone(material)] = k
		c.mu.Unlock()
	}
	return k
}

// algorithmTags are the algorithms' parts of storage keys (see [Rule]).
var algorithmTags = [...]string{
	algorithms.FixedWindow:   "fw",
	algorithms.SlidingLog:    "sl",
	algorithms.SlidingWindow: "sw",
	algorithms.TokenBucket:   "tb",
	algorithms.GCRA:          "gcra",
	algorithms.Concurrency:   "cc",
}

// keyPrefix is what every storage key of rule starts with:
// "<prefix>:<rule>:<tag>:{". alg must be valid.
func keyPrefix(prefix, rule string, alg algorithms.Algorithm) string {
	return prefix + ":" + rule + ":" + algorithmTags[alg] + ":{"
}
