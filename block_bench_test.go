package redlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// blockBenchEngine returns an Limiter with one rule with quota blocks on
// memstore, whose limit a benchmark cannot exhaust, on the clock now (nil:
// time.Now, not injected).
func blockBenchEngine(b testing.TB, now func() time.Time) *redlimit.Limiter {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return newEngine(b, m, redlimit.Config{Now: now, Rules: []redlimit.Rule{{Name: "hot", Algorithm: algorithms.FixedWindow,
		Limit: algorithms.Limit{Rate: 1 << 38, Period: time.Hour}, Blocks: &redlimit.BlockConfig{}}}})
}

// BenchmarkDecideBlock is Decide on a hot key answered from quota blocks:
// on time.Now, and on an injected clock (time.Now too), whose readings
// are checked against the latest one (see blockclock.go).
func BenchmarkDecideBlock(b *testing.B) {
	for _, clock := range []struct {
		name string
		now  func() time.Time
	}{{"", nil}, {"/injected", func() time.Time { return time.Now() }}} {
		e := blockBenchEngine(b, clock.now)
		in := []redlimit.Input{{Rule: "hot", Material: "hot"}}
		var d redlimit.Decision
		b.Run("serial"+clock.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Decide(context.Background(), in, &d)
			}
		})
		b.Run("parallel"+clock.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var d redlimit.Decision
				for pb.Next() {
					e.Decide(context.Background(), in, &d)
				}
			})
		})
	}
}

// TestDecideBlockAllocs: a check answered from a block allocates nothing.
func TestDecideBlockAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	e := blockBenchEngine(t, nil)
	in := []redlimit.Input{{Rule: "hot", Material: "hot"}}
	var d redlimit.Decision
	for range 1000 {
		e.Decide(context.Background(), in, &d)
	}
	waitIdle([]*redlimit.Limiter{e})
	local := 0
	allocs := testing.AllocsPerRun(1000, func() {
		e.Decide(context.Background(), in, &d)
		if d.Rules[0].FromBlock {
			local++
		}
	})
	if local < 900 {
		t.Fatalf("%d of 1000 checks answered from a block", local)
	}
	if allocs != 0 {
		t.Errorf("Decide from a block allocates %v times, want 0", allocs)
	}
}
