package memstore_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// memoryBytesPerKey is the bound the package doc states: what a
// full backend holds per key for the constant-size algorithms, besides the
// key's own bytes.
const memoryBytesPerKey = 128

// TestMemoryHeapPerKey fills a backend past its cap with 32-byte keys and
// checks the live heap it holds against the documented bound per key.
func TestMemoryHeapPerKey(t *testing.T) {
	// Not parallel: the heap is measured for the whole process.
	for _, maxKeys := range []int{1 << 12, 1 << 14, 3 << 13, 1 << 15, 100_000} {
		m, err := memstore.New(memstore.Config{Now: func() time.Time { return backendtest.T0 }, MaxKeys: maxKeys})
		if err != nil {
			t.Fatal(err)
		}
		grown := fillMemory(t, m, 'h', 2*maxKeys) * float64(2*maxKeys)
		held := m.Len()
		if full := maxKeys / 64 * 64; held != full {
			t.Fatalf("MaxKeys %d: Len() = %d after %d keys, want %d", maxKeys, held, 2*maxKeys, full)
		}
		perKey := grown/float64(held) - 32
		t.Logf("MaxKeys %d: %.1f bytes per key besides its 32 bytes", maxKeys, perKey)
		if perKey > memoryBytesPerKey {
			t.Errorf("MaxKeys %d: %.1f bytes per key besides its 32 bytes, want <= %d", maxKeys, perKey, memoryBytesPerKey)
		}
	}
}
