package redisstore_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestBatchExactness: as TestConcurrentExactness, 64 goroutines on two
// separate clients hammer one key with a limit of 100, with one round trip
// in flight per backend (Pipelines: 1), so that most calls queue and are
// decided by batch scripts: exactly 100 are allowed, for every algorithm,
// and the server runs fewer scripts than there are calls.
func TestBatchExactness(t *testing.T) {
	srv := redistest.Require(t)
	prefix := redistest.Prefix(t)
	for alg, limit := range exactLimits() {
		t.Run(alg.String(), func(t *testing.T) {
			var cfg redisstore.Config
			cfg.Pipelines = 1
			if alg == algorithms.FixedWindow || alg == algorithms.SlidingWindow {
				mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
				cfg.Now = func() time.Time { return mid }
			}
			h := &tripCounter{}
			backends := make([]algorithms.Backend, 2)
			for i := range backends {
				c := srv.Client(t)
				c.AddHook(h)
				b, err := redisstore.New(c, cfg)
				if err != nil {
					t.Fatal(err)
				}
				backends[i] = b
			}
			allowed, denied := hammerTwo(t, backends, algorithms.Check{Key: prefix + alg.String() + ":{hot}", Algorithm: alg, Limit: limit})
			if allowed != 100 || denied != 220 {
				t.Fatalf("%v: allowed %d, denied %d of 320; want exactly 100 allowed", alg, allowed, denied)
			}
			// NOSCRIPT answers send a script twice: count calls by keys.
			t.Logf("320 calls: %d scripts, %d keys, %d round trips", h.cmds.Load(), h.keys.Load(), h.trips.Load())
			if h.cmds.Load() >= 320 {
				t.Errorf("%d scripts for 320 calls: not batched", h.cmds.Load())
			}
		})
	}
}
