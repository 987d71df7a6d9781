package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestFixedWindowUpgrade: on the server's clock a fixed window's key is a
// string whose TTL ends with its window; a redeploy meets keys stored as
// hashes by earlier versions ({w, c}; {s, e, c}) and by calendar quotas and
// client clocks ({s, e, c} of another window). Every way a check reaches
// the script (one check, a call of two checks, a batch, a refundable
// call) reads such a hash, keeps its count and turns the key into a string
// that expires when the hash's window ends: no count lost, no lockout. A
// string read back on a client's clock (Config.Now) counts until it
// expires, and so does a calendar quota's check of it.
func TestFixedWindowUpgrade(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	limit := algorithms.Limit{Rate: 10, Period: time.Hour}
	const hour = int64(time.Hour / time.Microsecond)
	// serverNow reads the server's clock in µs, with a margin from the end
	// of the hour so that every step stays in one window.
	serverNow := func(t *testing.T) int64 {
		t.Helper()
		for {
			now, err := client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			us := now.UnixMicro()
			if us%hour < hour-10_000_000 {
				return us
			}
			time.Sleep(time.Second)
		}
	}
	type old struct {
		name   string
		fields func(now int64) []any // the hash's fields
		end    func(now int64) int64 // its window's end, µs
	}
	olds := []old{
		{"{w,c}", func(now int64) []any { return []any{"w", now / hour, "c", 3} }, func(now int64) int64 { return (now/hour + 1) * hour }},
		{"{s,e,c}", func(now int64) []any { return []any{"s", now / hour * hour, "e", (now/hour + 1) * hour, "c", 3} },
			func(now int64) int64 { return (now/hour + 1) * hour }},
		// a calendar quota's or another period's window, ending with the
		// current minute (an end of whole ms), or at a µs that is not one
		{"{s,e,c} minute", func(now int64) []any { return []any{"s", now / 60e6 * 60e6, "e", (now/60e6 + 1) * 60e6, "c", 3} },
			func(now int64) int64 { return (now/60e6 + 1) * 60e6 }},
		{"{s,e,c} µs end", func(now int64) []any { return []any{"s", now / 60e6 * 60e6, "e", now + 30e6 + 7, "c", 3} },
			func(now int64) int64 { return now + 30e6 + 7 }},
	}
	type path struct {
		name  string
		allow func(t *testing.T, b *Store, key string) algorithms.Result
	}
	one := func(key string) []algorithms.Check {
		return []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: limit}}
	}
	paths := []path{
		{"one check", func(t *testing.T, b *Store, key string) algorithms.Result {
			res := make([]algorithms.Result, 1)
			if err := b.Allow(ctx, one(key), res); err != nil {
				t.Fatal(err)
			}
			return res[0]
		}},
		{"two checks", func(t *testing.T, b *Store, key string) algorithms.Result {
			checks := append(one(key), algorithms.Check{Key: key + "-gcra", Algorithm: algorithms.GCRA, Limit: limit})
			res := make([]algorithms.Result, 2)
			if err := b.Allow(ctx, checks, res); err != nil {
				t.Fatal(err)
			}
			return res[0]
		}},
		{"batch", func(t *testing.T, b *Store, key string) algorithms.Result {
			results, errs := allowQueued(t, b, nil, []queued{{checks: one(key + "-other")}, {checks: one(key)}})
			if errs[1] != nil {
				t.Fatal(errs[1])
			}
			return results[1][0]
		}},
		{"refundable", func(t *testing.T, b *Store, key string) algorithms.Result {
			checks := one(key)
			checks[0].RefundWindow = time.Minute
			res := make([]algorithms.Result, 1)
			if err := b.Allow(ctx, checks, res); err != nil {
				t.Fatal(err)
			}
			return res[0]
		}},
	}
	for _, o := range olds {
		for _, p := range paths {
			t.Run(o.name+"/"+p.name, func(t *testing.T) {
				b, err := New(client, Config{})
				if err != nil {
					t.Fatal(err)
				}
				key := redistest.Prefix(t) + "{k}"
				now := serverNow(t)
				end := o.end(now)
				if err := client.HSet(ctx, key, o.fields(now)...).Err(); err != nil {
					t.Fatal(err)
				}
				client.PExpireAt(ctx, key, time.UnixMicro(end+999)) // as the older scripts set it, rounded up
				for i, want := range []int64{6, 5} {
					r := p.allow(t, b, key)
					after := serverNow(t)
					if !r.Allowed || r.Remaining != want {
						t.Fatalf("check %d: %+v, want allowed with %d remaining (the hash's 3 kept)", i+1, r, want)
					}
					if r.ResetAfter <= 0 || after+r.ResetAfter.Microseconds() < end-2000 || now+r.ResetAfter.Microseconds() > end+1000 {
						t.Fatalf("check %d: ResetAfter %v, want the hash's window's end, %v after the first check", i+1, r.ResetAfter, time.Duration(end-now)*time.Microsecond)
					}
				}
				typ, _ := client.Type(ctx, key).Result()
				v, _ := client.Get(ctx, key).Result()
				exp, _ := client.PExpireTime(ctx, key).Result()
				wantType := "string"
				if end%1000 != 0 {
					wantType = "hash" // an end within a ms stays exact in a hash
				}
				if typ != wantType {
					t.Fatalf("key is a %s, want a %s", typ, wantType)
				}
				if typ == "string" && (v != "5" || exp.Milliseconds() != end/1000-1) {
					t.Fatalf("key holds %q expiring at %d ms, want \"5\" expiring at the window's last ms %d", v, exp.Milliseconds(), end/1000-1)
				}
			})
		}
	}

	// A string read on a client's clock and by a calendar quota: its count
	// counts until it expires, and the hash they write replaces it.
	t.Run("string read back", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			check algorithms.Check
		}{
			{"client clock", algorithms.Check{Algorithm: algorithms.FixedWindow, Limit: limit}},
			{"calendar", algorithms.Check{Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 10, Calendar: algorithms.Day}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := redistest.Prefix(t) + "{k}"
				server, _ := New(client, Config{})
				cfg := Config{}
				if tc.name == "client clock" {
					cfg.Now = func() time.Time { return time.UnixMicro(serverNow(t)) }
				}
				b, _ := New(client, cfg)
				res := make([]algorithms.Result, 1)
				for range 3 {
					if err := server.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: limit}}, res); err != nil {
						t.Fatal(err)
					}
				}
				c := tc.check
				c.Key = key
				if err := b.Allow(ctx, []algorithms.Check{c}, res); err != nil || !res[0].Allowed || res[0].Remaining != 6 {
					t.Fatalf("Allow = %+v, %v; want allowed, 6 remaining (the string's 3 kept)", res[0], err)
				}
				if typ, _ := client.Type(ctx, key).Result(); typ != "hash" {
					t.Fatalf("key is a %s after the write, want a hash", typ)
				}
				if f, _ := client.HGet(ctx, key, "c").Result(); f != strconv.Itoa(4) {
					t.Fatalf("hash count %q, want 4", f)
				}
			})
		}
	})
}

// TestFixedWindowDenial: on the server's clock the flat path adds with
// INCRBY before it knows; a denial takes its units back, so the count stays
// at the limit, and the next window starts from zero. ResetAfter and
// RetryAfter are the window's rest, read from the TTL (ms).
func TestFixedWindowDenial(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	b, err := New(client, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := backendtest.T0.Add(250 * time.Millisecond)
	mr.SetTime(now)
	check := []algorithms.Check{{Key: "{d}", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 3, Period: time.Second}}}
	res := make([]algorithms.Result, 1)
	allow := func(wantAllowed bool, wantRemaining int64, wantRetry time.Duration) {
		t.Helper()
		if err := b.Allow(ctx, check, res); err != nil || res[0].Allowed != wantAllowed || res[0].Remaining != wantRemaining || res[0].RetryAfter != wantRetry {
			t.Fatalf("Allow at +%v = %+v, %v; want allowed %v, %d remaining, retry %v\n%s", now.Sub(backendtest.T0), res[0], err, wantAllowed, wantRemaining, wantRetry, dumpState(mr))
		}
	}
	allow(true, 2, 0)
	allow(true, 1, 0)
	allow(true, 0, 0)
	allow(false, 0, 750*time.Millisecond)
	allow(false, 0, 750*time.Millisecond)
	if v, _ := mr.Get("{d}"); v != "3" {
		t.Fatalf("count %q after two denials, want \"3\": a denial consumes nothing", v)
	}
	check[0].Cost = 4 // can never fit: the general code, which writes nothing
	allow(false, 0, 0)
	check[0].Cost = 0
	now = now.Add(750 * time.Millisecond) // the next window
	mr.SetTime(now)
	mr.FastForward(750 * time.Millisecond)
	allow(true, 2, 0)
}
