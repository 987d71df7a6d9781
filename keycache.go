package redlimit

import (
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

// keyCache builds the storage keys of one rule, "<prefix>:<rule>:<tag>:{"
// + keys.Sanitize(material) + "}", and keeps up to keyCacheEntries of them,
// so that a client seen again costs neither an allocation nor escaping. It
// is safe for concurrent use, and what a check costs does not grow with
// the number of clients: a lookup reads one set of keyWays entries and
// takes no lock; a miss builds the key (one allocation when the material
// needs no escaping) and replaces at most one entry, never more.
//
// The table is set-associative: keyCacheSets sets of keyWays entries, the
// set chosen by a hash of the material under a seed of the cache's own
// (input cannot aim at a set). Each entry is a tag (32 bits of the hash; 0
// for an empty entry) and a pointer to a record, allocated in one piece
// and never written once published:
//
//	[key length, 2 bytes][material length or 0, 1 byte][key][material]
//
// The key is returned as a string over the record's bytes, so a hit reads
// the tags, one pointer and the key, which the store reads next anyway;
// the material is stored only when escaping changed it (otherwise it is
// the key's middle). A record in one piece, rather than a struct pointing
// to a string, spares a hit one cache line and an entry 32 bytes: with
// 16,000 live keys on memstore, 1.7 fewer misses of a 512 KiB cache per
// check (docs/performance.md). A tag is a hint: a lookup compares the
// material, so a tag that matches another material, or a tag published
// before its record is, costs a miss and never returns another material's
// key.
//
// A miss fills an empty entry of the set; in a full set it replaces an
// entry chosen at random, one miss in keyAdmit (otherwise the key is
// returned without being kept), so that a stream of new clients turns a
// set over slowly: a client seen often is back after a few of its checks.
//
// Memory: the table, keyCacheEntries × 12 = 196,608 bytes, is allocated on
// first use. A record takes 3 bytes, its key and, for a material that
// needed escaping, a copy of the material (at most keys.MaxMaterialLen,
// 128 bytes), rounded up by the allocator: 48 bytes for an IPv4 address
// under the default prefix, at most 352 bytes with the default prefix and
// a 64-byte rule name (a key of at most 205 bytes). A full cache holds at
// most 16,384 × 352 + 196,608 = 5,963,776 bytes, about 1 MB for IPv4
// addresses, whatever the number of clients; with a longer Config.Prefix,
// 16,384 records of 3 + the key's length + 128 bytes at most. Material
// longer than keys.MaxMaterialLen is never kept (its key is a digest, and
// keeping the material would hold a large value), nor a key longer than
// maxRecordKey.
type keyCache struct {
	prefix string // "<prefix>:<rule>:<tag>:{"
	seed   maphash.Seed
	table  atomic.Pointer[keyCacheTable] // nil until the first lookup
}

const (
	keyWays         = 8    // entries per set
	keyCacheSets    = 2048 // a power of two
	keyCacheEntries = keyCacheSets * keyWays
	keyAdmit        = 8      // a miss in a full set replaces an entry one time in keyAdmit
	keyRecordHeader = 3      // bytes before a record's key
	maxRecordKey    = 0xFFFF // the longest key a record holds (a prefix that long is kept out)
)

// keyCacheTable holds the entries, set s at [s*keyWays, (s+1)*keyWays):
// the tags apart from the pointers, so that a lookup scans 32 bytes of a
// 64 KiB array, which stays in the processor's caches.
type keyCacheTable struct {
	tags    [keyCacheEntries]atomic.Uint32
	records [keyCacheEntries]atomic.Pointer[byte] // the first byte of a record
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
	t := c.load()
	first := int(h&(keyCacheSets-1)) * keyWays
	tags, records := t.tags[first:first+keyWays], t.records[first:first+keyWays]
	free := -1
	for w := range tags {
		switch tags[w].Load() {
		case tag:
			if r := records[w].Load(); r != nil {
				if k, m := c.unpack(r); m == material {
					return k
				}
			}
		case 0:
			if free < 0 {
				free = w
			}
		}
	}
	s := keys.Sanitize(material)
	n := len(c.prefix) + len(s) + 1
	if n > maxRecordKey {
		return c.prefix + s + "}" // its length does not fit a record
	}
	if free < 0 {
		r := rand.Uint32()
		if r%keyAdmit != 0 {
			return c.prefix + s + "}"
		}
		free = int(r>>16) % keyWays
	}
	extra := 0 // the material's copy, when the key does not hold it
	if s != material {
		extra = len(material) // > 0: Sanitize changes no empty material
	}
	b := make([]byte, keyRecordHeader+n+extra)
	b[0], b[1], b[2] = byte(n), byte(n>>8), byte(extra)
	k := b[keyRecordHeader : keyRecordHeader+n]
	copy(k[copy(k, c.prefix):], s)
	k[n-1] = '}'
	copy(b[keyRecordHeader+n:], material[:extra])
	// The record first: a lookup that sees the new tag with the old
	// record, or the other way round, finds no match and builds the key.
	records[free].Store(&b[0])
	tags[free].Store(tag)
	key, _ := c.unpack(&b[0])
	return key
}

// unpack returns the key and the material of the record at r. The strings
// share the record's bytes, which nothing writes once the record is
// published (as strings.Builder's String shares its buffer).
func (c *keyCache) unpack(r *byte) (key, material string) {
	b := unsafe.Slice(r, keyRecordHeader)
	n, extra := int(b[0])|int(b[1])<<8, int(b[2])
	key = unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(r), keyRecordHeader)), n)
	if extra == 0 {
		return key, key[len(c.prefix) : n-1]
	}
	return key, unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(r), keyRecordHeader+n)), extra)
}

// load returns c's table, allocating it on first use.
func (c *keyCache) load() *keyCacheTable {
	if t := c.table.Load(); t != nil {
		return t
	}
	t := new(keyCacheTable)
	if !c.table.CompareAndSwap(nil, t) {
		t = c.table.Load()
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
