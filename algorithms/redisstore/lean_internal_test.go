package redisstore

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestLeanArgs: which checks have a lean script, and the ARGV it gets.
func TestLeanArgs(t *testing.T) {
	t.Parallel()
	fw := func(rate int64, period time.Duration, cost int64) calc.Params {
		return calc.Prepare(uint8(algorithms.FixedWindow), rate, period, 0, cost)
	}
	gcra := func(rate int64, period time.Duration, burst, cost int64) calc.Params {
		return calc.Prepare(uint8(algorithms.GCRA), rate, period, burst, cost)
	}
	for _, tc := range []struct {
		name string
		p    calc.Params
		want []any // nil: none
	}{
		{"fixed window", fw(100, time.Minute, 1), []any{"100", "60000000"}},
		{"fixed window, cost 3", fw(100, time.Minute, 3), []any{"100", "60000000", "3"}},
		{"fixed window, cost = capacity", fw(5, time.Second, 5), []any{"5", "1000000", "5"}},
		{"fixed window, cost above capacity", fw(5, time.Second, 6), nil},
		{"fixed window, period not whole ms", fw(5, 1500*time.Microsecond, 1), []any{"5", "1500", "1", "h"}},
		{"gcra 10/s burst 5", gcra(10, time.Second, 5, 1), []any{"5", "100000", "/500000"}},
		{"gcra 1M/s, cost 2", gcra(1_000_000, time.Second, 0, 2), []any{"1000000", "1", "/1000000", "1", "2"}},
		{"gcra 3/s: interval not whole µs, r sent", gcra(3, time.Second, 0, 1), []any{"3", "1000000", "/1000000", "3"}},
		{"gcra 7/min, cost 2", gcra(7, time.Minute, 0, 2), []any{"7", "60000000", "/60000000", "7", "2"}},
		{"gcra, full window beyond 2^53 µs", gcra(1, 1000*time.Hour, 1<<40, 1), nil},
		{"token bucket", calc.Prepare(uint8(algorithms.TokenBucket), 10, time.Second, 0, 1), nil},
		{"sliding window", calc.Prepare(uint8(algorithms.SlidingWindow), 10, time.Second, 0, 1), nil},
	} {
		got := newLeanArgs(&tc.p)
		if !equalArgs(got, tc.want) {
			t.Errorf("%s: newLeanArgs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func equalArgs(a, b []any) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLeanScripts: a lean script decides a check exactly as the
// algorithm's one-check script decides it from the same state: for each
// step of a sequence of checks (allowed, denied, cost above what is left,
// a new window), in one transaction, the key's state is copied to a twin
// key (COPY), the lean script runs on one and the one-check script on the
// other, and the two replies (allowed, remaining; retry and reset, and a
// GCRA's remaining, within what the time between the two scripts' clock
// readings, bracketed by TIME in the transaction, and a ms of TTL
// rounding account for) and the two states (value, TTL) must agree.
func TestLeanScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	type step struct {
		cost int64
		wait time.Duration // before the step
	}
	for _, tc := range []struct {
		name  string
		alg   algorithms.Algorithm
		limit algorithms.Limit
		steps []step
	}{
		{"fixed window", algorithms.FixedWindow, algorithms.Limit{Rate: 5, Period: time.Hour},
			[]step{{1, 0}, {1, 0}, {2, 0}, {3, 0}, {1, 0}, {1, 0}, {5, 0}}},
		{"fixed window, a window ends", algorithms.FixedWindow, algorithms.Limit{Rate: 3, Period: 200 * time.Millisecond},
			[]step{{1, 0}, {2, 0}, {1, 0}, {1, 250 * time.Millisecond}, {2, 0}, {1, 0}}},
		{"gcra", algorithms.GCRA, algorithms.Limit{Rate: 10, Period: time.Second, Burst: 5},
			[]step{{1, 0}, {2, 0}, {1, 0}, {1, 0}, {3, 0}, {6, 0}, {1, 0}, {1, 150 * time.Millisecond}, {2, 0}}},
		{"gcra 1M/s", algorithms.GCRA, algorithms.Limit{Rate: 1_000_000, Period: time.Second},
			[]step{{1, 0}, {500_000, 0}, {600_000, 0}, {1, 0}}},
		// an emission interval of no whole µs: TATs with a fraction
		{"gcra 3/s", algorithms.GCRA, algorithms.Limit{Rate: 3, Period: time.Second, Burst: 4},
			[]step{{1, 0}, {2, 0}, {1, 0}, {1, 0}, {5, 0}, {1, 400 * time.Millisecond}, {2, 0}}},
		{"gcra 10⁹/h", algorithms.GCRA, algorithms.Limit{Rate: 1_000_000_000, Period: time.Hour},
			[]step{{1, 0}, {7, 0}, {1, 0}, {999_999_990, 0}, {1, 0}}},
		// a period of no whole ms: a hash
		{"fixed window of no whole ms", algorithms.FixedWindow, algorithms.Limit{Rate: 3, Period: time.Hour + 500*time.Microsecond},
			[]step{{1, 0}, {1, 0}, {2, 0}, {1, 0}, {1, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, twin := prefix+tc.name+":lean", prefix+tc.name+":one"
			for _, s := range []*redis.Script{leanScripts[tc.alg], oneScripts[tc.alg]} {
				if err := s.Load(ctx, client).Err(); err != nil { // no compile between the two
					t.Fatal(err)
				}
			}
			for i, st := range tc.steps {
				time.Sleep(st.wait)
				p := calc.Prepare(uint8(tc.alg), tc.limit.Rate, tc.limit.Period, tc.limit.Burst, st.cost)
				largs := newLeanArgs(&p)
				if largs == nil {
					t.Fatalf("step %d: no lean script for %+v", i, p)
				}
				// one transaction: the twin made a copy of the key (TTL
				// and all), the two scripts, then both states, run back to
				// back by the server however slow the machine
				pipe := client.TxPipeline()
				pipe.Del(ctx, twin)
				pipe.Copy(ctx, key, twin, 0, true)
				t0 := pipe.Time(ctx)
				leanCmd := leanScripts[tc.alg].EvalSha(ctx, pipe, []string{key}, largs...)
				oneCmd := oneScripts[tc.alg].EvalSha(ctx, pipe, []string{twin}, newOneArgs(&p, 0)...)
				var states [2]state
				for j, k := range []string{key, twin} {
					states[j] = state{pipe.Get(ctx, k), pipe.HGetAll(ctx, k), pipe.PTTL(ctx, k)}
				}
				// after the reads: a PTTL is read later than its script
				// ran, the twin's later than the key's
				t1 := pipe.Time(ctx)
				// GET of a hash and HGETALL of a string fail: WRONGTYPE
				if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
					t.Fatal(err)
				}
				vals, err := leanCmd.Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				var lean algorithms.Result
				if ok, err := decodeLean(vals, &p, &lean); err != nil || !ok {
					t.Fatalf("step %d: lean reply %v: decided %v, %v", i, vals, ok, err)
				}
				if vals, err = oneCmd.Int64Slice(); err != nil {
					t.Fatal(err)
				}
				one := make([]algorithms.Result, 1)
				if _, err := decode(vals, []calc.Params{p}, one); err != nil {
					t.Fatal(err)
				}
				// the two scripts and the reads of the states ran between
				// t0 and t1 (µs apart, unless the server was descheduled,
				// as on a loaded machine): times and TTLs may
				// differ by that and a ms of TTL rounding, and a GCRA's
				// remaining by what refills meanwhile
				gap := t1.Val().Sub(t0.Val()) + time.Millisecond
				slack := int64(0)
				if tc.alg == algorithms.GCRA {
					slack = int64(gap) * tc.limit.Rate / int64(tc.limit.Period)
				}
				near := func(a, b time.Duration) bool { return a-b <= gap && b-a <= gap }
				if d := lean.Remaining - one[0].Remaining; lean.Allowed != one[0].Allowed || d > slack || -d > slack || lean.Limit != one[0].Limit ||
					!near(lean.RetryAfter, one[0].RetryAfter) || !near(lean.ResetAfter, one[0].ResetAfter) {
					t.Errorf("step %d (cost %d): lean %+v, one-check script %+v (scripts within %v)", i, st.cost, lean, one[0], gap)
				}
				states[0].same(t, states[1], gap)
			}
		})
	}
}

// state is a key's value (a string or a hash) and TTL, read in a
// transaction.
type state struct {
	get  *redis.StringCmd
	hash *redis.MapStringStringCmd
	pttl *redis.DurationCmd
}

// same: a and b hold the same string (GCRA's TATs within gap, the same
// full window) or the same hash, and expire within gap of each other.
func (a state) same(t *testing.T, b state, gap time.Duration) {
	t.Helper()
	ha, hea := a.hash.Result()
	hb, heb := b.hash.Result()
	if (hea == nil) != (heb == nil) || !maps.Equal(ha, hb) {
		t.Errorf("HGETALL: lean %v, %v; the one-check script %v, %v", ha, hea, hb, heb)
	}
	va, ea := a.get.Result()
	vb, eb := b.get.Result()
	if ea != eb {
		t.Fatalf("GET: lean %q, %v; the one-check script %q, %v", va, ea, vb, eb)
	}
	if va != vb {
		// "<a>/<tau>" or "<a>:<b>:<r>/<tau>": a compared to the µs
		ta, sa, _ := strings.Cut(va, "/")
		tb, sb, _ := strings.Cut(vb, "/")
		ta, fa, _ := strings.Cut(ta, ":")
		tb, fb, _ := strings.Cut(tb, ":")
		_, ra, _ := strings.Cut(fa, ":")
		_, rb, _ := strings.Cut(fb, ":")
		na, _ := strconv.ParseInt(ta, 10, 64)
		nb, _ := strconv.ParseInt(tb, 10, 64)
		if ra != rb {
			t.Errorf("lean wrote %q, the one-check script %q", va, vb)
		}
		if d := time.Duration(na-nb) * time.Microsecond; sa == "" || sa != sb || d > gap || -d > gap {
			t.Errorf("lean wrote %q, the one-check script %q", va, vb)
		}
	}
	if d := a.pttl.Val() - b.pttl.Val(); d > gap || -d > gap {
		t.Errorf("PTTL: lean %v, the one-check script %v", a.pttl.Val(), b.pttl.Val())
	}
}

// scriptCounter is a go-redis hook counting the scripts sent, by SHA1.
type scriptCounter struct {
	mu   sync.Mutex
	sent map[string]int
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}
func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *scriptCounter) count(cmd redis.Cmder) {
	if cmd.Name() != "evalsha" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent[cmd.Args()[1].(string)]++
}

// take returns the counts since the last take.
func (h *scriptCounter) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.sent
	h.sent = map[string]int{}
	return m
}

// TestLeanFallback: through a Store, a check on the server's clock goes as
// the lean script alone; one that meets a state the lean script leaves to
// the one-check script (a fixed window stored as a hash by an older
// version, a string with no TTL, a GCRA value of another limit) goes on as
// that script, counted once, and the next check of the key is lean again;
// a check with no lean script (cost above capacity, an injected clock)
// goes as the one-check script alone; an emission interval of no whole
// µs has one.
func TestLeanFallback(t *testing.T) {
	t.Parallel()
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	h := &scriptCounter{sent: map[string]int{}}
	client.AddHook(h)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	b, err := New(client, Config{})
	if err != nil {
		t.Fatal(err)
	}
	allow := func(key string, a algorithms.Algorithm, l algorithms.Limit, cost int64) algorithms.Result {
		t.Helper()
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: a, Limit: l, Cost: cost}}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	lean := func(a algorithms.Algorithm) string { return leanScripts[a].Hash() }
	one := func(a algorithms.Algorithm) string { return oneScripts[a].Hash() }
	expect := func(what string, want map[string]int) {
		t.Helper()
		got := h.take()
		if len(got) != len(want) {
			t.Errorf("%s: scripts sent %v, want %v", what, got, want)
			return
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: scripts sent %v, want %v", what, got, want)
				return
			}
		}
	}
	fw, gc := algorithms.FixedWindow, algorithms.GCRA
	hour := algorithms.Limit{Rate: 10, Period: time.Hour}

	k := prefix + "fw"
	if r := allow(k, fw, hour, 1); !r.Allowed || r.Remaining != 9 {
		t.Fatalf("first check: %+v", r)
	}
	expect("a new key", map[string]int{lean(fw): 1})
	now := client.Time(ctx).Val().UnixMicro()
	const hourUS = int64(time.Hour / time.Microsecond)
	if now%hourUS > hourUS-5_000_000 {
		time.Sleep(6 * time.Second) // keep the older layout's window current
		now = client.Time(ctx).Val().UnixMicro()
	}
	k = prefix + "fw-hash"
	client.HSet(ctx, k, "w", now/hourUS, "c", 3)
	if r := allow(k, fw, hour, 1); !r.Allowed || r.Remaining != 6 {
		t.Fatalf("a hash of an older version holding 3: %+v, want allowed, 6 left", r)
	}
	expect("a hash of an older version", map[string]int{lean(fw): 1, one(fw): 1})
	if typ := client.Type(ctx, k).Val(); typ != "string" {
		t.Fatalf("the hash was left a %s", typ)
	}
	if r := allow(k, fw, hour, 2); !r.Allowed || r.Remaining != 4 {
		t.Fatalf("after the upgrade: %+v, want allowed, 4 left", r)
	}
	expect("after the upgrade", map[string]int{lean(fw): 1})

	// a string with no TTL: what the one-check script alone makes of it
	k, twin := prefix+"fw-nottl", prefix+"fw-nottl-twin"
	client.Set(ctx, k, "7", 0)
	client.Set(ctx, twin, "7", 0)
	p := calc.Prepare(uint8(fw), hour.Rate, hour.Period, 0, 1)
	vals, err := oneScripts[fw].Run(ctx, client, []string{twin}, newOneArgs(&p, 0)...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	h.take()
	r := allow(k, fw, hour, 1)
	expect("a string with no TTL", map[string]int{lean(fw): 1, one(fw): 1})
	if v, w := client.Get(ctx, k).Val(), client.Get(ctx, twin).Val(); r.Allowed != (vals[0] == 1) || r.Remaining != vals[1] || v != w {
		t.Errorf("a string with no TTL holding 7: %+v, left %q; the one-check script alone: %v, left %q", r, v, vals, w)
	}

	if r := allow(prefix+"fw-big", fw, hour, 11); r.Allowed || r.RetryAfter != 0 {
		t.Errorf("cost above capacity: %+v, want denied for good", r)
	}
	expect("cost above capacity", map[string]int{one(fw): 1})

	perSec := algorithms.Limit{Rate: 10, Period: time.Second, Burst: 5}
	k = prefix + "gcra"
	if r := allow(k, gc, perSec, 1); !r.Allowed || r.Remaining != 4 {
		t.Fatalf("gcra, first check: %+v", r)
	}
	expect("gcra, a new key", map[string]int{lean(gc): 1})
	other := algorithms.Limit{Rate: 10, Period: time.Second, Burst: 8}
	if r := allow(k, gc, other, 1); !r.Allowed {
		t.Fatalf("gcra under another limit: %+v", r)
	}
	expect("gcra, a value of another limit", map[string]int{lean(gc): 1, one(gc): 1})
	if r := allow(k, gc, other, 1); !r.Allowed {
		t.Fatalf("gcra under the new limit: %+v", r)
	}
	expect("gcra, the new limit's value", map[string]int{lean(gc): 1})
	if r := allow(prefix+"gcra3", gc, algorithms.Limit{Rate: 3, Period: time.Second}, 1); !r.Allowed {
		t.Fatalf("gcra 3/s: %+v", r)
	}
	expect("gcra 3/s", map[string]int{lean(gc): 1})

	clocked, err := New(client, Config{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	res := make([]algorithms.Result, 1)
	if err := clocked.Allow(ctx, []algorithms.Check{{Key: prefix + "clocked", Algorithm: fw, Limit: hour}}, res); err != nil || !res[0].Allowed {
		t.Fatalf("an injected clock: %+v, %v", res[0], err)
	}
	expect("an injected clock", map[string]int{one(fw): 1})
}

// TestLeanQueued: a lean call is sent only on a round trip that is free;
// with every round trip in flight, runAlone sends nothing, and the call
// goes on as the one-check script, which the pipeline queues and batches.
func TestLeanQueued(t *testing.T) {
	t.Parallel()
	p := &pipeline{max: 1, inflight: 1}
	vals, sent, err := p.runAlone(context.Background(), leanScripts[algorithms.FixedWindow], []string{"k"}, []any{1, 1000})
	if sent || vals != nil || err != nil {
		t.Fatalf("runAlone with every round trip in flight: %v, sent %v, %v", vals, sent, err)
	}
	if p.inflight != 1 {
		t.Fatalf("inflight = %d after runAlone sent nothing, want 1", p.inflight)
	}
}

// TestDecodeLean: a fixed window's reply {count, reset} makes the Result
// the one-check script would reply (a denial's remaining without its own
// cost, its retry the reset), an empty reply decides nothing, and a reply
// of another shape is an error, never a decision.
func TestDecodeLean(t *testing.T) {
	t.Parallel()
	fw := calc.Prepare(uint8(algorithms.FixedWindow), 10, time.Minute, 0, 3)
	odd := calc.Prepare(uint8(algorithms.FixedWindow), 10, time.Minute+500*time.Microsecond, 0, 1)
	gcra := calc.Prepare(uint8(algorithms.GCRA), 10, time.Second, 0, 1)
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		p    calc.Params
		vals []int64
		ok   bool
		want algorithms.Result
		err  bool
	}{
		{"allowed", fw, []int64{7, 5000}, true, algorithms.Result{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 5 * ms}, false},
		{"allowed, the last units", fw, []int64{10, 5000}, true, algorithms.Result{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 5 * ms}, false},
		{"denied", fw, []int64{12, 5000}, true, algorithms.Result{Limit: 10, Remaining: 1, RetryAfter: 5 * ms, ResetAfter: 5 * ms}, false},
		{"denied, nothing left", fw, []int64{15, 5000}, true, algorithms.Result{Limit: 10, Remaining: 0, RetryAfter: 5 * ms, ResetAfter: 5 * ms}, false},
		{"empty", fw, []int64{}, false, algorithms.Result{}, false},
		{"fixed window, four values", fw, []int64{1, 2, 0, 5000}, false, algorithms.Result{}, true},
		{"fixed window of no whole ms, four values", odd, []int64{1, 2, 0, 5000}, true, algorithms.Result{Allowed: true, Limit: 10, Remaining: 2, ResetAfter: 5 * ms}, false},
		{"fixed window of no whole ms, two values", odd, []int64{7, 5000}, false, algorithms.Result{}, true},
		{"fixed window, negative reset", fw, []int64{7, -1}, false, algorithms.Result{}, true},
		{"gcra allowed", gcra, []int64{1, 9, 0, 100000}, true, algorithms.Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 100 * ms}, false},
		{"gcra, two values", gcra, []int64{1, 9}, false, algorithms.Result{}, true},
	} {
		var r algorithms.Result
		ok, err := decodeLean(tc.vals, &tc.p, &r)
		if ok != tc.ok || (err != nil) != tc.err || r != tc.want {
			t.Errorf("%s: decodeLean(%v) = %v, %+v, %v; want %v, %+v, error %v", tc.name, tc.vals, ok, r, err, tc.ok, tc.want, tc.err)
		}
	}
}

// TestLeanSmallClock: the lean scripts write a computed integer with '%d'
// only when its length shows that Lua's C long holds it (see
// fixed_window_count.lua and gcra_flat.lua), and otherwise as exactly by
// another way. On a server clock near 1970, which takes the other way, the
// keys must be written as on today's clock: the window's last ms as its
// expiry, the TAT and its suffix as the value.
func TestLeanSmallClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		now  time.Time
	}{
		{"1970", time.Unix(3, 250_000_000)},
		{"today", backendtest.T0.Add(250 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mr := miniredis.RunT(t)
			mr.SetTime(tc.now)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
			t.Cleanup(func() { client.Close() })
			ctx := context.Background()
			run := func(alg algorithms.Algorithm, p calc.Params, key string) []int64 {
				t.Helper()
				vals, err := leanScripts[alg].Run(ctx, client, []string{key}, newLeanArgs(&p)...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				return vals
			}
			// 10 per second: the window ends 750ms later, and the key
			// lives through its last ms
			fw := calc.Prepare(uint8(algorithms.FixedWindow), 10, time.Second, 0, 1)
			if vals := run(algorithms.FixedWindow, fw, "fw"); len(vals) != 2 || vals[0] != 1 || vals[1] != 750_000 {
				t.Errorf("fixed window replied %v, want [1 750000]", vals)
			}
			if got := mr.TTL("fw"); got != 749*time.Millisecond {
				t.Errorf("fixed window's TTL %v, want 749ms", got)
			}
			// 10 per second, a burst of 5: the TAT one interval after now
			g := calc.Prepare(uint8(algorithms.GCRA), 10, time.Second, 5, 1)
			if vals := run(algorithms.GCRA, g, "g"); len(vals) != 4 || vals[0] != 1 || vals[1] != 4 {
				t.Errorf("GCRA replied %v, want allowed, 4 remaining", vals)
			}
			want := strconv.FormatInt(tc.now.UnixMicro()+100_000, 10) + "/500000"
			if got, err := client.Get(ctx, "g").Result(); err != nil || got != want {
				t.Errorf("GCRA wrote %q, %v; want %q", got, err, want)
			}
			if got := mr.TTL("g"); got != 100*time.Millisecond {
				t.Errorf("GCRA's TTL %v, want 100ms", got)
			}
		})
	}
}

// TestWindowWithoutNX: Redis 6 refuses PEXPIREAT's NX, and the fixed
// window's common case (fixed_window_count.lua) then tells a new window
// from one that refunds emptied by PTTL. No Redis 6 runs here, so the
// scripts are sent with an option Redis 7 refuses as Redis 6 refuses NX,
// beside the scripts as they are, and must decide and write alike: a new
// window ends at the clock's window end, and an emptied window keeps its
// own end.
func TestWindowWithoutNX(t *testing.T) {
	t.Parallel()
	client := redistest.Require(t).Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	p := calc.Prepare(uint8(algorithms.FixedWindow), 10, time.Hour, 0, 1)
	for _, sc := range []struct {
		name string
		src  string
		args []any
	}{
		{"lean", luaScript("lean_fixed_window"), newLeanArgs(&p)},
		{"one-check", luaScript("one_fixed_window"), newOneArgs(&p, 0)},
	} {
		if n := strings.Count(sc.src, ", 'NX')"); n != 1 {
			t.Fatalf("%s: %d PEXPIREAT ... NX, want 1", sc.name, n)
		}
		withNX := redis.NewScript(sc.src)
		withoutNX := redis.NewScript(strings.Replace(sc.src, ", 'NX')", ", 'NOT-IN-REDIS-6')", 1))
		for _, emptied := range []bool{false, true} {
			name := fmt.Sprintf("%s, emptied %v", sc.name, emptied)
			keys := [2]string{prefix + name + ":nx", prefix + name + ":6"}
			now, err := client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			end := now.Truncate(time.Hour).Add(time.Hour) // the clock's window end
			own := end.Add(-7 * time.Minute)              // an emptied window's own end
			if end.Sub(now) < 10*time.Minute {
				own = end.Add(20 * time.Minute)
			}
			want := end.Sub(now)
			if emptied {
				want = own.Sub(now)
				for _, k := range keys {
					if err := client.Set(ctx, k, 0, 0).Err(); err != nil {
						t.Fatal(err)
					}
					if err := client.PExpireAt(ctx, k, own).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			var replies [2][]int64
			for i, s := range []*redis.Script{withNX, withoutNX} {
				vals, err := s.Run(ctx, client, []string{keys[i]}, sc.args...).Int64Slice()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				replies[i] = vals
			}
			for _, k := range keys {
				ttl, err := client.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				count, err := client.Get(ctx, k).Int64()
				if err != nil || count != 1 || (ttl-want).Abs() > 2*time.Second {
					t.Errorf("%s, %s: count %d (%v), TTL %v; want 1 and %v", name, k, count, err, ttl, want)
				}
			}
			if len(replies[0]) < 2 || len(replies[0]) != len(replies[1]) || replies[0][0] != replies[1][0] {
				t.Errorf("%s: with NX %v, without %v", name, replies[0], replies[1])
			} else if sc.name == "lean" { // {count, reset_after µs}
				for _, r := range replies {
					if got := time.Duration(r[1]) * time.Microsecond; (got - want).Abs() > 2*time.Second {
						t.Errorf("%s: reset after %v, want %v", name, got, want)
					}
				}
			}
		}
	}
}
