package redlimit

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

// randomMaterial returns key material of every kind a key func may yield:
// plain, with bytes Sanitize escapes (braces, '%', control and non-ASCII
// bytes, a leading "h:"), at and around keys.MaxMaterialLen after
// escaping, and longer than it.
func randomMaterial(r *rand.Rand) string {
	const plain = "abcdefghijklmnopqrstuvwxyz0123456789.:-_/"
	const odd = "{}% \t\n\x00\x7f\xff\xc3"
	var n int
	switch r.IntN(8) {
	case 0, 1, 2:
		n = r.IntN(16)
	case 3, 4:
		n = r.IntN(keys.MaxMaterialLen + 1)
	case 5, 6:
		n = keys.MaxMaterialLen - 4 + r.IntN(8)
	default:
		n = keys.MaxMaterialLen + 1 + r.IntN(400)
	}
	b := make([]byte, n)
	for i := range b {
		if r.IntN(20) == 0 {
			b[i] = odd[r.IntN(len(odd))]
		} else {
			b[i] = plain[r.IntN(len(plain))]
		}
	}
	if r.IntN(10) == 0 {
		return "h:" + string(b)
	}
	return string(b)
}

// TestKeyCache: the key of a material is always the one built afresh,
// whether the cache remembers it or not, for every kind of material.
func TestKeyCache(t *testing.T) {
	const prefix = "rate:ip:gcra:{"
	c := newKeyCache(prefix)
	r := rand.New(rand.NewPCG(1, 2))
	seen := make([]string, 0, 3*keyCacheEntries)
	check := func(m string) {
		t.Helper()
		if got, want := c.key(m), prefix+keys.Sanitize(m)+"}"; got != want {
			t.Fatalf("key(%.40q) = %.60q, want %.60q", m, got, want)
		}
	}
	for _, m := range []string{"", "203.0.113.7", "a{b}c", "POST /x", "h:abc", "%41", strings.Repeat("z", 500), strings.Repeat("{", keys.MaxMaterialLen)} {
		check(m) // a miss
		check(m) // a hit, unless not cached
		seen = append(seen, m)
	}
	// Twice as many materials as the cache holds, each checked on its
	// first sight and again later, after others replaced entries.
	for range 2 * keyCacheEntries {
		m := randomMaterial(r)
		check(m)
		seen = append(seen, m)
		check(seen[r.IntN(len(seen))])
	}
	for _, m := range seen {
		check(m)
	}
}

// TestKeyCacheTagCollision: an entry whose tag matches that of another
// material (32 bits of a 64-bit hash, or a tag published a moment before
// its record) is not taken for it.
func TestKeyCacheTagCollision(t *testing.T) {
	const prefix = "rate:ip:gcra:{"
	other := newKeyCache(prefix)
	other.key("a")
	entries := cachedEntries(t, other, true)
	if len(entries) != 1 || entries[0].material != "a" {
		t.Fatalf("a cache that saw \"a\" holds %+v", entries)
	}
	c := newKeyCache(prefix)
	h := maphash.String(c.seed, "b")
	first := int(h&(keyCacheSets-1)) * keyWays
	c.load().records[first+3].Store(entries[0].record)
	c.load().tags[first+3].Store(uint32(h>>32) | 1)
	if got, want := c.key("b"), prefix+"b}"; got != want {
		t.Fatalf("key(\"b\") = %q, want %q", got, want)
	}
}

// TestKeyCacheLongPrefix: a key longer than a record can say (a
// Config.Prefix of 70,000 bytes) is built afresh each time, never kept
// with a length cut to 16 bits.
func TestKeyCacheLongPrefix(t *testing.T) {
	prefix := strings.Repeat("p", 70000) + ":ip:gcra:{"
	c := newKeyCache(prefix)
	for range 3 {
		if got, want := c.key("a"), prefix+"a}"; got != want {
			t.Fatalf("key(\"a\") = %d bytes ending %q, want %d bytes", len(got), got[max(0, len(got)-8):], len(want))
		}
	}
	if got := cachedEntries(t, c, true); len(got) != 0 {
		t.Fatalf("a key of %d bytes was kept", len(prefix)+2)
	}
}

// TestKeyCacheAllocs: a material seen before costs no allocation, whether
// Sanitize escapes it or not.
func TestKeyCacheAllocs(t *testing.T) {
	for _, m := range []string{"203.0.113.7", "a{b}c", "h:x", "\x00", strings.Repeat("é", keys.MaxMaterialLen/6)} {
		c := newKeyCache("rate:ip:gcra:{")
		c.key(m)
		if allocs := testing.AllocsPerRun(100, func() { c.key(m) }); allocs != 0 {
			t.Errorf("key(%q) seen before: %v allocs, want 0", m, allocs)
		}
	}
}

// cachedEntry is an entry of a keyCache, as its record says.
type cachedEntry struct {
	material, key string
	record        *byte
}

// cachedEntries returns the entries c holds, checking that each is in the
// set of its material and, if tags, that its tag is its material's (two
// misses writing one entry at once may leave the tag of one with the
// record of the other: a lookup then misses both, and the entry is
// replaced as any other).
func cachedEntries(t *testing.T, c *keyCache, tags bool) []cachedEntry {
	t.Helper()
	table := c.table.Load()
	if table == nil {
		return nil
	}
	var entries []cachedEntry
	for i := range table.records {
		r := table.records[i].Load()
		if r == nil {
			continue
		}
		k, m := c.unpack(r)
		h := maphash.String(c.seed, m)
		if int(h&(keyCacheSets-1)) != i/keyWays || tags && uint32(h>>32)|1 != table.tags[i].Load() {
			t.Errorf("entry of %.40q in set %d with tag %#x: a lookup would not find it", m, i/keyWays, table.tags[i].Load())
		}
		entries = append(entries, cachedEntry{m, k, r})
	}
	return entries
}

// TestKeyCacheBound: the cache never holds more than keyCacheEntries
// entries, nor a material longer than keys.MaxMaterialLen, however many
// materials it sees.
func TestKeyCacheBound(t *testing.T) {
	c := newKeyCache("rate:ip:gcra:{")
	if got := cachedEntries(t, c, true); got != nil {
		t.Fatalf("a new cache holds %d entries", len(got))
	}
	long := strings.Repeat("z", keys.MaxMaterialLen+1)
	c.key(long)
	if got := cachedEntries(t, c, true); len(got) != 0 {
		t.Fatalf("a material longer than MaxMaterialLen was cached: %d entries", len(got))
	}
	for i := range 4 * keyCacheEntries {
		c.key(strconv.Itoa(i))
	}
	entries := cachedEntries(t, c, true)
	for _, e := range entries {
		if want := "rate:ip:gcra:{" + keys.Sanitize(e.material) + "}"; e.key != want {
			t.Fatalf("entry of %.40q holds key %.60q, want %.60q", e.material, e.key, want)
		}
	}
	if len(entries) > keyCacheEntries {
		t.Fatalf("%d cached keys, bound %d", len(entries), keyCacheEntries)
	}
	// Random replacement fills nearly every entry (a set is full after a
	// few of the 32 misses it sees on average).
	if len(entries) < keyCacheEntries*99/100 {
		t.Errorf("%d cached keys after %d materials, want nearly %d", len(entries), 4*keyCacheEntries, keyCacheEntries)
	}
}

// TestKeyCacheWorkingSet: a working set of 5,000 clients, more than the
// cache once held (4,096, then it was emptied), stays cached: a second
// pass over it builds (almost) no key. With 5,000 materials in 2,048 sets
// of 8, a set overflows rarely (2 of them on average): the test allows 50
// misses.
func TestKeyCacheWorkingSet(t *testing.T) {
	const n = 5000
	c := newKeyCache("rate:ip:gcra:{")
	materials := make([]string, n)
	for i := range materials {
		materials[i] = "198.51." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&0xFF)
		c.key(materials[i])
	}
	allocs := testing.AllocsPerRun(1, func() {
		for _, m := range materials {
			c.key(m)
		}
	})
	if allocs > 50 {
		t.Errorf("a second pass over %d materials allocated %v times, want at most 50", n, allocs)
	}
}

// TestKeyCacheConcurrent: goroutines looking up and replacing the same
// entries always get the key built afresh (run it with -race).
func TestKeyCacheConcurrent(t *testing.T) {
	const prefix = "rate:_peek:{"
	c := newKeyCache(prefix)
	r := rand.New(rand.NewPCG(3, 4))
	// Many more materials than entries, so that goroutines replace entries
	// others are reading; a few hot ones, so that they also hit; and the
	// first 16 share one set, twice as many as its entries, which are
	// replaced all the time.
	materials := make([]string, 2*keyCacheEntries)
	setOf := func(m string) uint64 { return maphash.String(c.seed, m) & (keyCacheSets - 1) }
	for i := 0; i < 16; {
		m := "set:" + strconv.Itoa(r.Int())
		if setOf(m) == 0 {
			materials[i] = m
			i++
		}
	}
	for i := 16; i < len(materials); i++ {
		materials[i] = randomMaterial(r)
	}
	want := make([]string, len(materials))
	for i, m := range materials {
		want[i] = prefix + keys.Sanitize(m) + "}"
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			for range 20000 {
				i := r.IntN(len(materials))
				switch r.IntN(4) {
				case 0:
					i %= 64
				case 1, 2:
					i %= 16
				}
				if got := c.key(materials[i]); got != want[i] {
					t.Errorf("key(%.40q) = %.60q, want %.60q", materials[i], got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	cachedEntries(t, c, false)
}

// TestKeyPrefix: every algorithm has a tag of its own, so a rule whose
// algorithm changes never reads the old algorithm's state, and the tag
// sits before the hash tag, which stays the key material alone.
func TestKeyPrefix(t *testing.T) {
	seen := map[string]algorithms.Algorithm{}
	for _, alg := range algorithms.Algorithms {
		p := keyPrefix("rate", "ip", alg)
		if other, dup := seen[p]; dup {
			t.Errorf("keyPrefix(%v) = keyPrefix(%v) = %q", alg, other, p)
		}
		seen[p] = alg
		tag, ok := strings.CutPrefix(p, "rate:ip:")
		if !ok || !strings.HasSuffix(tag, ":{") || strings.ContainsAny(tag[:len(tag)-2], "{}: ") || len(tag) < 4 {
			t.Errorf("keyPrefix(\"rate\", \"ip\", %v) = %q, want \"rate:ip:<tag>:{\"", alg, p)
		}
	}
	if got := keyPrefix("rate", "ip", algorithms.GCRA); got != "rate:ip:gcra:{" {
		t.Errorf("keyPrefix(\"rate\", \"ip\", GCRA) = %q, want \"rate:ip:gcra:{\"", got)
	}
}
