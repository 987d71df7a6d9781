package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware/admin"
)

// stepClock is a clock a test moves, read by the instances and the
// command alike.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) Now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *stepClock) Add(d time.Duration)  { c.ns.Add(int64(d)) }
func newStepClock(t time.Time) *stepClock { c := new(stepClock); c.ns.Store(t.UnixNano()); return c }
func useClock(t *testing.T, c *stepClock) {
	old := clock
	clock = c.Now
	t.Cleanup(func() { clock = old })
}
func decideOnce(e *redlimit.Limiter, m string) bool { return e.Allow(context.Background(), m).Allowed }

// drain checks material on e until it is denied 3 times in a row, the
// clock moving by step after each denial (past the local denial of a
// quarter Hold, and its question of the store's epoch), and returns how
// many it admitted.
func drain(e *redlimit.Limiter, clk *stepClock, material string, step time.Duration) int {
	n, denied := 0, 0
	for denied < 3 {
		if decideOnce(e, material) {
			n, denied = n+1, 0
			continue
		}
		denied++
		clk.Add(step)
		time.Sleep(20 * time.Millisecond) // the question of the epoch, in the background
	}
	return n
}

// holdBlocks checks material on e until a check is answered from a block
// and no block is being taken: e then holds units in blocks.
func holdBlocks(t *testing.T, e *redlimit.Limiter, material string) {
	t.Helper()
	var d redlimit.Decision
	in := []redlimit.Input{{Rule: e.Rules()[0].Name, Material: material}}
	for i := 0; i < 10_000; i++ {
		e.Decide(context.Background(), in, &d)
		if d.Rules[0].FromBlock && i > 200 {
			return
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Fatalf("no check of %q answered from a block", material)
}

// TestResetBlocks: redlimit reset of a fixed window rule with quota
// blocks, the admin endpoint saying so, goes through the engine's epochs
// as the library's Reset does (one path). 1: three instances hold blocks
// at the reset and give them back afterwards, while a fourth, fresh one
// drains the key: it admits exactly the limit (before, the command deleted
// the key and what the three gave back landed on the fresh count: 10,753
// of 10,000). 2: after a reset by the library (epoch 1, then exhausted),
// the command's reset moves the key to epoch 2: the instance admits the
// limit again (before, the command deleted the abandoned epoch-0 key,
// printed "reset" and exited 0, and nothing changed: 0 admitted).
func TestResetBlocks(t *testing.T) {
	srv := redistest.Require(t)
	p := prefix(t)
	clk := newStepClock(t0)
	useClock(t, clk)
	const limit = 10_000
	// Hold 10s: the blocks stay with their instance until it closes
	rule := redlimit.Rule{Name: "hot", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(limit), Blocks: &redlimit.BlockConfig{Hold: 10 * time.Second}}
	instance := func() *redlimit.Limiter {
		store, err := redisstore.New(srv.Client(t), redisstore.Config{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		e, err := redlimit.New(store, redlimit.Config{Prefix: p, Rules: []redlimit.Rule{rule}, Now: clk.Now, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	adm, err := admin.New(admin.Config{Authorize: admin.Token("tok"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	src, _ := adm.Source("svc")
	a, b, c := instance(), instance(), instance()
	src.Attach(a)
	web := httptest.NewServer(adm)
	defer web.Close()
	g := []string{"-redis", "redis://" + srv.Addr, "-prefix", p, "-admin", web.URL + "/debug/redlimit/", "-token", "tok"}
	step := 3 * time.Second // past a quarter Hold

	for _, e := range []*redlimit.Limiter{a, b, c} {
		holdBlocks(t, e, "k1")
	}
	if code, out, errs := cli(t, append(g, "reset", "hot", "k1")...); code != 0 {
		t.Fatalf("redlimit reset: exit %d, %s %s", code, out, errs)
	}
	d := instance()
	first := 0
	for range limit / 2 {
		if decideOnce(d, "k1") {
			first++
		}
	}
	a.Close() // give back what they held at the reset
	b.Close()
	c.Close()
	got := first + drain(d, clk, "k1", step)
	t.Logf("after redlimit reset of a key 3 instances held blocks of, a fresh instance admitted %d (limit %d)", got, limit)
	if got != limit {
		t.Errorf("after redlimit reset, admitted %d in the window, want exactly the limit %d", got, limit)
	}

	e := instance()
	if err := e.Reset(context.Background(), "k2"); err != nil {
		t.Fatal(err)
	}
	if got := drain(e, clk, "k2", step); got != limit {
		t.Fatalf("after the library's reset, admitted %d, want %d", got, limit)
	}
	code, out, errs := cli(t, append(g, "reset", "hot", "k2")...)
	if code != 0 {
		t.Fatalf("redlimit reset: exit %d, %s %s", code, out, errs)
	}
	if want := "reset " + p + ":hot:fw:{k2}:e2\n"; out != want {
		t.Errorf("redlimit reset printed %q, want %q", out, want)
	}
	got = drain(e, clk, "k2", step)
	t.Logf("after a library reset, then redlimit reset, the instance admitted %d (limit %d)", got, limit)
	if got != limit {
		t.Errorf("after redlimit reset of a key the library had reset, admitted %d, want the limit %d", got, limit)
	}

	// By flags, without the admin endpoint and without -blocks: the key's
	// epoch counter shows the rule has blocks; peek reads the epoch the
	// store is at, reset moves to the next.
	flags := []string{"-redis", "redis://" + srv.Addr, "-prefix", p}
	want(t, `{"rule":"hot","key":"k2","storage_key":"`+p+`:hot:fw:{k2}:e2","allowed":false,"remaining":0,"limit":10000,"retry_after_seconds":`+strconv.FormatFloat(seconds(time.Minute-clk.Now().Sub(t0.Truncate(time.Minute))), 'g', -1, 64)+`,"reset_after_seconds":`+strconv.FormatFloat(seconds(time.Minute-clk.Now().Sub(t0.Truncate(time.Minute))), 'g', -1, 64)+`,"quota_blocks":true}`+"\n",
		append(flags, "-json", "peek", "-alg", "fixed_window", "-limit", "10000/1m", "hot", "k2")...)
	want(t, `{"key":"k2","quota_blocks":true,"reset":true,"rule":"hot","storage_key":"`+p+`:hot:fw:{k2}:e3"}`+"\n",
		append(flags, "-json", "reset", "-alg", "fixed_window", "-limit", "10000/1m", "hot", "k2")...)
	if got := drain(e, clk, "k2", step); got != limit {
		t.Errorf("after redlimit reset by flags, admitted %d, want the limit %d", got, limit)
	}
}
