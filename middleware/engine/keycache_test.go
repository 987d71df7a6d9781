package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

func TestKeyCache(t *testing.T) {
	c := newKeyCache("rate:ip:{")
	for _, m := range []string{"203.0.113.7", "a{b}c", "POST /x", strings.Repeat("z", 500)} {
		want := "rate:ip:{" + keys.Sanitize(m) + "}"
		for range 2 { // miss, then hit
			if got := c.key(m); got != want {
				t.Fatalf("key(%.20q) = %q, want %q", m, got, want)
			}
		}
	}
	if _, cached := c.keys[strings.Repeat("z", 500)]; cached {
		t.Error("a material longer than MaxMaterialLen was cached")
	}
	for i := range 3 * maxCachedKeys {
		c.key(strconv.Itoa(i))
	}
	if n := len(c.keys); n > maxCachedKeys {
		t.Fatalf("%d cached keys, bound %d", n, maxCachedKeys)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.key("203.0.113.7") }); allocs != 0 && c.keys["203.0.113.7"] != "" {
		t.Fatalf("cached key: %v allocs, want 0", allocs)
	}
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
