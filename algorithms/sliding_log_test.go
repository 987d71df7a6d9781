package algorithms_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestSlidingLogBound: the largest valid sliding log, filled by one check
// of its whole capacity on a real redis-server, is one key of 2000 members
// well under 1 MB (a cost of 1,000,000 used to write 112 MB in one script,
// holding the server for 2.49s); one unit more is a configuration error.
func TestSlidingLogBound(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := time.UnixMicro(1_800_000_000_000_000)
	b, err := redisstore.New(c, redisstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	key := redistest.Prefix(t) + "{full}"
	l := algorithms.PerMinute(2000)
	res := make([]algorithms.Result, 1)
	if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.SlidingLog, Limit: l, Cost: 2000}}, res); err != nil {
		t.Fatal(err)
	}
	if !res[0].Allowed || res[0].Remaining != 0 {
		t.Fatalf("Allow(%v cost 2000) = %+v, want allowed with 0 remaining", l, res[0])
	}
	if n := c.ZCard(ctx, key).Val(); n != 2000 {
		t.Fatalf("ZCARD = %d, want 2000", n)
	}
	if size := c.MemoryUsage(ctx, key).Val(); size <= 0 || size > 1<<20 {
		t.Fatalf("MEMORY USAGE of a full key = %d bytes, want at most 1 MB", size)
	}
	l.Rate++
	err = b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.SlidingLog, Limit: l, Cost: 2001}}, res)
	if _, ok := err.(*algorithms.ConfigError); !ok {
		t.Fatalf("Allow(%v cost 2001) error = %v, want a *ConfigError", l, err)
	}
}
