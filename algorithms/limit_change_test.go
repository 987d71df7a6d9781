package algorithms_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// limitStep is one check of a key whose limit may differ from the previous
// step's: a key used under one limit, then checked under another.
type limitStep struct {
	at    time.Duration
	limit algorithms.Limit
	cost  int64
	want  string // allow|deny remaining retry reset, as in the vectors
}

var limitChangeCases = []struct {
	name  string
	alg   algorithms.Algorithm
	steps []limitStep
}{
	// Issue 10, item 1: a stored window number counted in the old period
	// was far ahead of the new one: TTLs of 10^14 ms, years of lockout,
	// RetryAfter overflowing time.Duration.
	{"fixed window, longer period", algorithms.FixedWindow, []limitStep{
		{30 * time.Second, algorithms.PerMinute(3), 3, "allow 0 0s 30s"},
		// the old count counts until the old window ends, not longer
		{40 * time.Second, algorithms.PerHour(5), 1, "allow 1 0s 20s"},
		{40 * time.Second, algorithms.PerHour(5), 2, "deny 1 20s 20s"},
		{time.Minute, algorithms.PerHour(5), 5, "allow 0 0s 59m0s"},
		{2 * time.Minute, algorithms.PerHour(5), 1, "deny 0 58m0s 58m0s"},
	}},
	{"fixed window, shorter period", algorithms.FixedWindow, []limitStep{
		{10 * time.Minute, algorithms.PerHour(5), 5, "allow 0 0s 50m0s"},
		{10*time.Minute + 30*time.Second, algorithms.PerMinute(3), 1, "allow 2 0s 30s"},
		{10*time.Minute + 40*time.Second, algorithms.PerMinute(3), 3, "deny 2 20s 20s"},
	}},
	{"sliding window, longer period", algorithms.SlidingWindow, []limitStep{
		{30 * time.Second, algorithms.PerMinute(10), 10, "allow 0 0s 1m30s"},
		// the count goes to the hour window it started in, and is forgotten
		// when the old state expires (80s from now) at the latest
		{40 * time.Second, algorithms.PerHour(20), 11, "deny 10 1m20s 1m20s"},
		{40 * time.Second, algorithms.PerHour(20), 1, "allow 9 0s 1h59m20s"},
		{2 * time.Minute, algorithms.PerHour(20), 10, "deny 9 1h3m27.272728s 1h58m0s"},
	}},
	{"sliding window, shorter period", algorithms.SlidingWindow, []limitStep{
		{10 * time.Minute, algorithms.PerHour(10), 10, "allow 0 0s 1h50m0s"},
		{10*time.Minute + 30*time.Second, algorithms.PerMinute(5), 1, "allow 4 0s 1m30s"},
		{10*time.Minute + 30*time.Second, algorithms.PerMinute(5), 5, "deny 4 1m30s 1m30s"},
	}},
	// Issue 10, item 2: GCRA kept the old TAT after an upgrade (59m0s), and
	// after a downgrade the token bucket's TTL fell short of its RetryAfter.
	{"token bucket, upgrade", algorithms.TokenBucket, upgrade},
	{"gcra, upgrade", algorithms.GCRA, upgrade},
	{"token bucket, downgrade", algorithms.TokenBucket, downgrade},
	{"gcra, downgrade", algorithms.GCRA, downgrade},
	{"token bucket, larger burst", algorithms.TokenBucket, largerBurst},
	{"gcra, larger burst", algorithms.GCRA, largerBurst},
	{"token bucket, fractional interval changes", algorithms.TokenBucket, fractional},
	{"gcra, fractional interval changes", algorithms.GCRA, fractional},
	// The sliding log's entries count under the new period; its TTL said
	// 60s against a RetryAfter of 59m59s.
	{"sliding log, longer period", algorithms.SlidingLog, []limitStep{
		{0, algorithms.PerMinute(10), 10, "allow 0 0s 1m0s"},
		{30 * time.Second, algorithms.PerHour(5), 1, "deny 0 59m30s 59m30s"},
		{2 * time.Minute, algorithms.PerHour(5), 1, "deny 0 58m0s 58m0s"},
	}},
	{"sliding log, shorter period", algorithms.SlidingLog, []limitStep{
		{0, algorithms.PerHour(5), 5, "allow 0 0s 1h0m0s"},
		{30 * time.Second, algorithms.PerMinute(3), 1, "deny 0 30s 30s"},
		{2 * time.Minute, algorithms.PerMinute(3), 1, "allow 2 0s 1m0s"},
	}},
}

var (
	upgrade = []limitStep{
		{0, algorithms.PerHour(10), 10, "allow 0 0s 1h0m0s"},
		// the debt of one hour is cut to one full bucket of the new limit
		{time.Second, algorithms.PerMinute(1000), 1, "deny 0 60ms 1m0s"},
		{time.Second + 60*time.Millisecond, algorithms.PerMinute(1000), 1, "allow 0 0s 1m0s"},
	}
	downgrade = []limitStep{
		{0, algorithms.PerMinute(1000), 1000, "allow 0 0s 1m0s"},
		// 30s of debt left, under 10/h: a tenth of a token
		{30 * time.Second, algorithms.PerHour(10), 10, "deny 9 30s 30s"},
		{30 * time.Second, algorithms.PerHour(10), 1, "allow 8 0s 6m30s"},
		{time.Minute, algorithms.PerHour(10), 9, "allow 0 0s 1h0m0s"},
		{time.Minute, algorithms.PerHour(10), 1, "deny 0 6m0s 1h0m0s"},
	}
	largerBurst = []limitStep{
		{0, algorithms.PerSecond(10).WithBurst(5), 5, "allow 0 0s 500ms"},
		{100 * time.Millisecond, algorithms.PerSecond(10).WithBurst(20), 1, "allow 15 0s 500ms"},
		{100 * time.Millisecond, algorithms.PerSecond(10).WithBurst(5), 1, "deny 0 100ms 500ms"},
	}
	// 3/s: an emission interval of 333333⅓µs, a TAT with a fraction in
	// thirds; read under 7/s, whose fractions are sevenths, the full
	// instant is rounded up to a whole µs (333334µs of debt: 2.33 tokens);
	// read under 3/s again, exactly (333333⅔µs).
	fractional = []limitStep{
		{0, algorithms.PerSecond(3), 2, "allow 1 0s 666.667ms"},
		{time.Second / 3, algorithms.PerSecond(7).WithBurst(3), 1, "deny 0 47.62ms 333.334ms"},
		{time.Second / 3, algorithms.PerSecond(3), 2, "deny 1 1µs 333.334ms"},
		{time.Second / 3, algorithms.PerSecond(3), 1, "allow 0 0s 666.667ms"},
	}
)

// TestLimitChange plays keys whose limit changes between checks against
// memory, miniredis (whose clock follows the steps, so keys expire by their
// TTL) and a real redis-server: every Result is exact, never negative nor
// longer than the new limit needs, and on miniredis the key's TTL covers
// what RetryAfter and ResetAfter claim and is at most one period of the new
// limit (two for the sliding window, one full bucket for the buckets). (A
// real server's TTLs run on its own clock, which the steps do not move.)
func TestLimitChange(t *testing.T) {
	ctx := context.Background()
	var real *redis.Client
	if redistest.Shared != nil {
		real = redistest.Shared.Client(t)
	}
	for _, tc := range limitChangeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem, mc := newMemory(t)
			mr := miniredis.RunT(t)
			mr.SetTime(backendtest.T0)
			mini, rc := newMiniBackend(t, mr)
			backends := []struct {
				name string
				b    algorithms.Backend
				c    *backendtest.Clock
			}{{"memory", mem, mc}, {"miniredis", mini, rc}}
			if real != nil {
				onReal, c := algorithms.Backend(nil), &backendtest.Clock{}
				// persisting: the steps run on their own clock, and on a
				// loaded machine the real server's clock could expire a key
				// (a 667ms TTL) between two steps
				onReal, _ = redisstore.New(backendtest.Persisting{Client: real}, redisstore.Config{Now: c.Now})
				backends = append(backends, struct {
					name string
					b    algorithms.Backend
					c    *backendtest.Clock
				}{"redis", onReal, c})
			}
			key := redistest.Prefix(t) + "change:{a}"
			last := backendtest.T0
			for _, st := range tc.steps {
				now := backendtest.T0.Add(st.at)
				if now.After(last) {
					mr.FastForward(now.Sub(last))
					last = now
				}
				mr.SetTime(now)
				for _, be := range backends {
					be.c.T = now
					check := algorithms.Check{Key: key, Algorithm: tc.alg, Limit: st.limit, Cost: st.cost}
					got := make([]algorithms.Result, 1)
					if err := be.b.Allow(ctx, []algorithms.Check{check}, got); err != nil {
						t.Fatalf("%s: Allow(%v %v cost %d, t0+%v): %v", be.name, tc.alg, st.limit, st.cost, st.at, err)
					}
					if s := backendtest.FormatResult(got[0]); s != st.want {
						t.Errorf("%s: Allow(%v %v cost %d, t0+%v) = %s, want %s", be.name, tc.alg, st.limit, st.cost, st.at, s, st.want)
					}
					if be.name != "miniredis" {
						continue
					}
					ttl := mr.TTL(key)
					claim := max(got[0].RetryAfter, got[0].ResetAfter)
					if claim > 0 && ttl < claim {
						t.Errorf("miniredis: after Allow(%v %v cost %d, t0+%v) = %s: TTL %v is shorter than what the Result claims", tc.alg, st.limit, st.cost, st.at, st.want, ttl)
					}
					if bound := ttlBound(tc.alg, st.limit) + time.Millisecond; ttl > bound {
						t.Errorf("miniredis: after Allow(%v %v cost %d, t0+%v) = %s: TTL %v, want at most %v", tc.alg, st.limit, st.cost, st.at, st.want, ttl, bound)
					}
				}
			}
		})
	}
}

// ttlBound is the longest a key needs to live under l: one period, two for
// the sliding window, one full bucket for the token bucket and GCRA, and a
// second more for those on a clock that is not the server's (the
// miniredis backend's here: see bucket_ttl in lua/prelude.lua).
func ttlBound(a algorithms.Algorithm, l algorithms.Limit) time.Duration {
	switch a {
	case algorithms.SlidingWindow:
		return 2 * l.Period
	case algorithms.TokenBucket, algorithms.GCRA:
		return time.Duration(l.Capacity(a))*l.Period/time.Duration(l.Rate) + time.Second
	}
	return l.Period
}

// TestOldFormatState: keys written before state was stored as instants
// (window numbers, tokens in the limit's scale, a fraction without its
// refill) are read under the current limit.
func TestOldFormatState(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := backendtest.T0.Add(30 * time.Second)
	b, err := redisstore.New(c, redisstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	minute := backendtest.T0.UnixMicro() / 60_000_000
	prefix := redistest.Prefix(t)
	for _, tc := range []struct {
		name  string
		alg   algorithms.Algorithm
		limit algorithms.Limit
		store func(key string)
		want  string
	}{
		{"fixed window number", algorithms.FixedWindow, algorithms.PerMinute(5), func(key string) {
			c.HSet(ctx, key, "w", minute, "c", 3)
		}, "allow 1 0s 30s"},
		{"sliding window number", algorithms.SlidingWindow, algorithms.PerMinute(10), func(key string) {
			// 10·½ + 4 + 1 = 10
			c.HSet(ctx, key, "w", minute, "c", 4, "p", 10)
		}, "allow 0 0s 1m30s"},
		// 2 of 5 tokens 6s ago under 5/1m (one token is 12,000,000 scaled
		// units): half a token refilled since
		{"token bucket tokens", algorithms.TokenBucket, algorithms.PerMinute(5), func(key string) {
			c.HSet(ctx, key, "t", 2*12_000_000, "ts", now.UnixMicro()-6_000_000)
		}, "allow 1 0s 42s"},
		{"gcra fraction without its refill", algorithms.GCRA, algorithms.PerSecond(3), func(key string) {
			c.Set(ctx, key, strconv.FormatInt(now.UnixMicro()+333_333, 10)+":1", time.Minute)
		}, "allow 1 0s 666.667ms"},
	} {
		key := prefix + "{" + tc.name + "}"
		tc.store(key)
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: tc.alg, Limit: tc.limit}}, res); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := backendtest.FormatResult(res[0]); got != tc.want {
			t.Errorf("%s: Allow(%v %v, t0+30s) = %s, want %s", tc.name, tc.alg, tc.limit, got, tc.want)
		}
	}
}
