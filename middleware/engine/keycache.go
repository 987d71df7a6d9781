package engine

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

// keyCache builds the storage keys of one rule, "<prefix>:<rule>:<tag>:{"
// + keys.Sanitize(material) + "}", and remembers up to keyCacheEntries of
// them, so that a client seen again costs neither an allocation nor
// escaping. It is safe for concurrent use, and what it costs does not grow
// with the number of clients: a lookup reads one set of keyWays entries
// and takes no lock; a miss builds the key (one allocation when the
// material needs no escaping) and may replace one entry of the set, never
// more.
//
// The entries are a set-associative table: keyCacheSets sets of keyWays
// entries, the set chosen by a seeded hash of the material (input cannot
// choose it). An entry is immutable once published, so a lookup that
// finds one returns the key it was built with; a tag per entry (32 bits
// of the hash) spares reading the entries of other materials. A miss
// fills a free entry of the set; in a full set it replaces an entry chosen
// at random, one miss in keyAdmit (otherwise it returns the key without
// remembering it), so that a stream of new clients replaces a set's
// entries slowly, and costs mostly the key's own allocation: a client seen
// often is back in the table after a few of its checks.
//
// Memory: the table, keyCacheSets × 96 = 196,608 bytes, is allocated at
// the first lookup. An entry holds 32 bytes, its key (rounded up by the
// allocator: 32 bytes for an IPv4 address under the default prefix) and,
// for a material that needed escaping, a copy of the material (at most
// keys.MaxMaterialLen, 128 bytes). A key is the rule's prefix and at most
// 129 bytes: with the default prefix and a 64-byte rule name at most 205
// bytes (208 allocated), so a full cache holds at most 16,384 × (32 + 208
// + 128) + 196,608 = 6,225,920 bytes, and about 1.2 MB for IPv4
// addresses, whatever the number of clients. Material longer than
// keys.MaxMaterialLen is never remembered (its key is a digest, and
// caching would keep a huge value alive).
type keyCache struct {
	prefix string // "<prefix>:<rule>:<tag>:{"
	seed   maphash.Seed
	sets   atomic.Pointer[[keyCacheSets]keySet] // nil until the first lookup
}

const (
	keyWays         = 8    // entries per set
	keyCacheSets    = 2048 // a power of two
	keyCacheEntries = keyCacheSets * keyWays
	keyAdmit        = 8 // a miss in a full set replaces an entry one time in keyAdmit
)

// keySet is one set of the table. tags[w] is 0 while entries[w] is empty,
// then the tag of a material whose entry is, or was a moment ago, in
// entries[w]: a hint, checked against the entry.
type keySet struct {
	tags    [keyWays]atomic.Uint32
	entries [keyWays]atomic.Pointer[keyEntry]
}

// keyEntry is a material and its storage key. material shares the key's
// bytes when Sanitize left it unchanged.
type keyEntry struct {
	material string
	key      string
}

func newKeyCache(prefix string) *keyCache {
	return &keyCache{prefix: prefix, seed: maphash.MakeSeed()}
}

// key returns "<prefix>:<rule>:<tag>:{" + Sanitize(material) + "}".
func (c *keyCache) key(material string) string {
	if len(material) > keys.MaxMaterialLen {
		return c.prefix + keys.Sanitize(material) + "}"
	}
	h := maphash.String(c.seed, material)
	tag := uint32(h>>32) | 1 // never 0, the tag of an empty entry
	set := &c.table()[h&(keyCacheSets-1)]
	free := -1
	for w := range set.tags {
		switch set.tags[w].Load() {
		case tag:
			if e := set.entries[w].Load(); e != nil && e.material == material {
				return e.key
			}
		case 0:
			if free < 0 {
				free = w
			}
		}
	}
	s := keys.Sanitize(material)
	key := c.prefix + s + "}"
	if free < 0 {
		r := rand.Uint32()
		if r%keyAdmit != 0 {
			return key
		}
		free = int(r>>16) % keyWays
	}
	e := &keyEntry{material: key[len(c.prefix) : len(key)-1], key: key}
	if s != material {
		e.material = strings.Clone(material)
	}
	// The entry first: a lookup that sees the new tag with the old entry,
	// or the other way round, finds no match and builds the key.
	set.entries[free].Store(e)
	set.tags[free].Store(tag)
	return key
}

// table returns c's sets, allocating them on first use.
func (c *keyCache) table() *[keyCacheSets]keySet {
	if t := c.sets.Load(); t != nil {
		return t
	}
	t := new([keyCacheSets]keySet)
	if !c.sets.CompareAndSwap(nil, t) {
		t = c.sets.Load()
	}
	return t
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
