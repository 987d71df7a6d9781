package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestInstanceOneFallback: an instance's engines (one per rule set) share
// one fallback, the one the fallback-share check holds to the instance's
// share. late-x is a rule of two sets, late-c and late-d: with a fallback
// per engine, the instance's fallbacks held two shares of it, and the
// Sentinel campaign at seeds 1206 and 1207 reported 3 admissions of a
// late-x key (1 per minute, share 1) within two windows.
//
// A list under the late-x key makes Redis answer WRONGTYPE
// (algorithms.ErrKeyState): each call is decided by the fallback, for that
// request alone, at once. The first call of late-c takes the share of its
// window; a call of late-d in the same window must be denied.
func TestInstanceOneFallback(t *testing.T) {
	requireRedis(t)
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	prefix := "onefb" + time.Now().Format("150405.000000")
	in, err := newInstance(instanceConfig{ID: 1, Prefix: prefix, Timeout: 10 * time.Second, Instances: 3},
		redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1}), nil,
		func() int64 { return time.Now().UnixMicro() }, func(Record) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.close)
	ctx := context.Background()
	key := func(d *redlimit.Decision) algorithms.Result { return d.Rules[1].Result }
	// Each attempt on a worker's keys of its own; an attempt whose window
	// ends within 10 s of its first call is not read (the second call
	// might fall in the next window), and the next one starts after it.
	for w := range 3 {
		m := lateMaterial(1, w)
		stray := prefix + ":late-x:fw:{" + m + "x}"
		if err := in.client.RPush(ctx, stray, "x").Err(); err != nil {
			t.Fatal(err)
		}
		first, _ := in.decide(ctx, "late-c", OpLate, []redlimit.Input{{Material: m, Cost: 1}, {Material: m + "x"}})
		if first.Source != redlimit.SourceFallback || !first.Allowed || key(first).Remaining != 0 {
			t.Fatalf("late-c: source %v allowed %v late-x %+v err %v; want allowed by the fallback, late-x at 0 left of its share of 1",
				first.Source, first.Allowed, key(first), first.Err)
		}
		if left := key(first).ResetAfter; left < 10*time.Second {
			time.Sleep(left + 10*time.Millisecond)
			continue
		}
		second, _ := in.decide(ctx, "late-d", OpLate, []redlimit.Input{{Material: m, Cost: 1}, {Material: m + "x"}})
		if second.Source != redlimit.SourceFallback || second.Allowed || key(second).Allowed {
			t.Fatalf("late-d in the same window: source %v allowed %v late-x %+v; want denied by the instance's fallback, whose share of late-x late-c took",
				second.Source, second.Allowed, key(second))
		}
		return
	}
	t.Fatal("no attempt had 10 s left in its window")
}
