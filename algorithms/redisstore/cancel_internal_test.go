package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// TestCancel: a part of a call spanning slots that its caller gave up on
// (lua/cancel.lua). Cancelled before it runs, the part decides nothing
// when it runs after all; cancelled after it committed, it gives its units
// back, once; a part run again after it committed (a resend) charges
// nothing more. For one check (one.lua) and two (dispatch.lua).
func TestCancel(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	now := backendtest.T0
	b, err := New(client, Config{Now: func() time.Time { return now }, Pipelines: -1})
	if err != nil {
		t.Fatal(err)
	}
	var gave []bool
	b.onCancel = func(g bool) { gave = append(gave, g) }
	ctx := context.Background()
	limit := algorithms.PerHour(10)
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint("checks=", n), func(t *testing.T) {
			checks := make([]algorithms.Check, n)
			ps := make([]calc.Params, n)
			for i := range checks {
				checks[i] = algorithms.Check{Key: fmt.Sprintf("{n%d}k%d", n, i), Algorithm: algorithms.FixedWindow, Limit: limit}
				ps[i] = calc.Prepare(uint8(checks[i].Algorithm), limit.Rate, limit.Period, limit.Burst, 1)
			}
			remaining := func() int64 {
				t.Helper()
				res := make([]algorithms.Result, 1)
				if err := b.Allow(ctx, checks[:1], res); err != nil {
					t.Fatal(err)
				}
				return res[0].Remaining
			}
			newPart := func() *part {
				return &part{checks: checks, ps: ps, res: make([]algorithms.Result, n), commit: commitKey(checks[0].Key, newCommitID()), window: 5000}
			}
			decide := func(p *part) bool {
				t.Helper()
				if _, err := b.decide(ctx, nil, p.checks, p.ps, p.res, now.UnixMicro(), markers{sharded: true, commit: p.commit, window: p.window}); err != nil {
					t.Fatal(err)
				}
				return p.res[0].Allowed
			}
			gave = nil

			// cancelled before it ran
			p := newPart()
			b.cancelDetached(ctx, p)
			if decide(p) {
				t.Error("a part cancelled before it ran committed when it ran")
			}
			if r := remaining(); r != 9 {
				t.Errorf("after a cancelled part: %d remaining, want 9 (nothing charged by the part)", r)
			}

			// committed, then cancelled twice, then resent
			p = newPart()
			if !decide(p) {
				t.Fatal("a fresh part denied")
			}
			b.cancelDetached(ctx, p)
			b.cancelDetached(ctx, p)
			if decide(p) {
				t.Error("a part resent after its commit was cancelled committed again")
			}
			if r := remaining(); r != 8 {
				t.Errorf("after a part committed and cancelled: %d remaining, want 8 (its unit given back, once)", r)
			}
			if want := []bool{false, true, false}; fmt.Sprint(gave) != fmt.Sprint(want) {
				t.Errorf("cancels gave back %v, want %v", gave, want)
			}

			// committed and resent: charged once
			p = newPart()
			decide(p)
			decide(p)
			if r := remaining(); r != 6 {
				t.Errorf("after a part committed and resent: %d remaining, want 6 (charged once)", r)
			}
		})
	}
}
