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
// one-check script alone (its key a hash, since a string's expiry, to the
// ms, cannot end such a window), by the multi script and in a batch:
// Rate checks allowed in a window, the next denied until the window's
// end. (The one-check script once failed on every such call: "attempt to
// perform arithmetic on local 'now'".)
func TestFixedWindowOddPeriod(t *testing.T) {
	t.Parallel()
	c := redistest.Require(t).Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	b, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// an hour and half a ms: no window ends while the test runs, but
	// once in 7,200 runs
	limit := algorithms.Limit{Rate: 3, Period: time.Hour + 500*time.Microsecond}
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
}
