package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestFixedWindowOddPeriod: a fixed window whose period is no whole
// number of ms is decided on the server's clock as on any other, by its
// one-check script alone, by the multi script and in a batch: Rate checks
// allowed in a window, the next denied until the window's end; its key is
// a hash, since a string's expiry, to the ms, cannot end every window of
// such a period. (The one-check script once failed on every such call:
// "attempt to perform arithmetic on local 'now'"; the multi script wrote a
// string in every other window, the one whose end is a whole ms.) Both
// kinds of window run: the test picks two periods, one whose current
// window ends on a whole ms and one whose window does not.
func TestFixedWindowOddPeriod(t *testing.T) {
	t.Parallel()
	// periods of an hour and an odd number of half ms: their windows
	// (aligned to the Unix epoch) end on a whole ms in every other one
	var whole, odd time.Duration
	now := time.Now().UnixMicro()
	for x := int64(500); whole == 0 || odd == 0; x += 1000 {
		p := int64(time.Hour/time.Microsecond) + x
		stop := (now/p + 1) * p
		if stop-now < int64(10*time.Minute/time.Microsecond) {
			continue // a window that could end while the test runs
		}
		d := time.Duration(p) * time.Microsecond
		if stop%1000 == 0 && whole == 0 {
			whole = d
		} else if stop%1000 != 0 && odd == 0 {
			odd = d
		}
	}
	for _, period := range []time.Duration{whole, odd} {
		t.Run(period.String(), func(t *testing.T) { oddPeriod(t, period) })
	}
}

// oddPeriod runs TestFixedWindowOddPeriod with a period of no whole ms.
func oddPeriod(t *testing.T, period time.Duration) {
	c := redistest.Require(t).Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	b, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	limit := algorithms.Limit{Rate: 3, Period: period}
	check := func(key string) algorithms.Check {
		return algorithms.Check{Key: prefix + key, Algorithm: algorithms.FixedWindow, Limit: limit}
	}
	for _, tc := range []struct {
		name  string
		calls func(i int) []algorithms.Check
	}{
		{"one check", func(int) []algorithms.Check { return []algorithms.Check{check("{one}")} }},
		{"two checks", func(int) []algorithms.Check { return []algorithms.Check{check("{two}:a"), check("{two}:b")} }},
	} {
		for i := range 4 {
			checks := tc.calls(i)
			res := make([]algorithms.Result, len(checks))
			if err := b.Allow(ctx, checks, res); err != nil {
				t.Fatalf("%s, call %d: %v", tc.name, i+1, err)
			}
			for j, r := range res {
				want := int64(2 - i)
				if r.Allowed != (i < 3) || (i < 3 && r.Remaining != want) || r.ResetAfter <= 0 || r.ResetAfter > limit.Period {
					t.Errorf("%s, call %d, check %d: %+v; want allowed %v with %d left, reset within %v", tc.name, i+1, j, r, i < 3, want, limit.Period)
				}
				if i == 3 && r.RetryAfter != r.ResetAfter {
					t.Errorf("%s, call 4, check %d: retry after %v, want the window's end, %v", tc.name, j, r.RetryAfter, r.ResetAfter)
				}
			}
		}
		if typ := c.Type(ctx, tc.calls(0)[0].Key).Val(); typ != "hash" {
			t.Errorf("%s: the key is a %s, want a hash", tc.name, typ)
		}
	}
	// queued behind a pipeline whose round trips are all in flight: one
	// batch script decides them
	calls := make([][]algorithms.Check, 4)
	for i := range calls {
		calls[i] = []algorithms.Check{check("{batch}")}
	}
	results, errs, _ := redisstore.AllowQueued(t, b, calls)
	allowed := 0
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("batch, call %d: %v", i+1, errs[i])
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("batch: %d of 4 calls allowed, want 3", allowed)
	}
	if typ := c.Type(ctx, prefix+"{batch}").Val(); typ != "hash" {
		t.Errorf("batch: the key is a %s, want a hash", typ)
	}
}
