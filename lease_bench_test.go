package redlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// BenchmarkConcurrency: one slot taken and released (Allow, then Release),
// next to one GCRA decision (Allow), on memstore and on a real
// redis-server.
func BenchmarkConcurrency(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, backend algorithms.Backend, alg algorithms.Algorithm, limit algorithms.Limit) {
		e := newEngine(b, backend, redlimit.Config{Prefix: "bench", Rules: []redlimit.Rule{{Name: "r", Algorithm: alg, Limit: limit}}})
		b.ReportAllocs()
		for b.Loop() {
			d := e.Allow(ctx, "acme")
			if !d.Allowed {
				b.Fatal("denied")
			}
			e.Settle(ctx, d)
		}
	}
	huge := algorithms.Limit{Rate: 1 << 40, Period: time.Microsecond}
	slots := algorithms.InFlight(10, time.Minute)
	b.Run("memory/concurrency", func(b *testing.B) { run(b, newMemory(b), algorithms.Concurrency, slots) })
	b.Run("memory/gcra", func(b *testing.B) { run(b, newMemory(b), algorithms.GCRA, huge) })
	if redistest.Shared == nil {
		return
	}
	client := redistest.Shared.Client(b)
	b.Run("redis/concurrency", func(b *testing.B) { run(b, redisStore(b, client, false), algorithms.Concurrency, slots) })
	b.Run("redis/gcra", func(b *testing.B) { run(b, redisStore(b, client, false), algorithms.GCRA, huge) })
}
