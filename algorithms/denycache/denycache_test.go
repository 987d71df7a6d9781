package denycache_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// countingBackend counts the calls that reach next. With err set it still
// calls next (which may write Results) and then fails with err.
type countingBackend struct {
	next  algorithms.Backend
	calls atomic.Int64
	err   error
}

func (c *countingBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	c.calls.Add(1)
	err := c.next.Allow(ctx, checks, results)
	if c.err != nil {
		return c.err
	}
	return err
}

// denyAll denies every check for an hour.
type denyAll struct{}

func (denyAll) Allow(_ context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	for i, c := range checks {
		results[i] = algorithms.Result{Limit: c.Limit.Capacity(c.Algorithm), RetryAfter: time.Hour, ResetAfter: time.Hour}
	}
	return nil
}

// denyFixture is a DenyCache in front of a counted Memory backend, both on
// one settable clock.
type denyFixture struct {
	clock *backendtest.Clock
	mem   *memstore.Store
	next  *countingBackend
	cache *denycache.Cache
}

func newDenyFixture(t *testing.T) *denyFixture {
	t.Helper()
	f := &denyFixture{clock: &backendtest.Clock{T: backendtest.T0}}
	var err error
	if f.mem, err = memstore.New(memstore.Config{Now: f.clock.Now}); err != nil {
		t.Fatal(err)
	}
	f.next = &countingBackend{next: f.mem}
	if f.cache, err = denycache.New(f.next, denycache.Config{Now: f.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return f
}

// allow calls the cache at t0+at and reports the Results and whether the
// call reached next.
func (f *denyFixture) allow(t *testing.T, at time.Duration, checks ...algorithms.Check) ([]algorithms.Result, bool) {
	t.Helper()
	f.clock.T = backendtest.T0.Add(at)
	before := f.next.calls.Load()
	res := make([]algorithms.Result, len(checks))
	if err := f.cache.Allow(context.Background(), checks, res); err != nil {
		t.Fatalf("Allow(%v, t0+%v): %v", checks, at, err)
	}
	return res, f.next.calls.Load() != before
}

// direct asks the Memory backend itself at t0+at.
func (f *denyFixture) direct(t *testing.T, at time.Duration, checks ...algorithms.Check) []algorithms.Result {
	t.Helper()
	f.clock.T = backendtest.T0.Add(at)
	res := make([]algorithms.Result, len(checks))
	if err := f.mem.Allow(context.Background(), checks, res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNewDenyCacheErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		next algorithms.Backend
		cfg  denycache.Config
		want string
	}{
		{"nil next", nil, denycache.Config{}, "redlimit: next must not be nil"},
		{"negative MaxKeys", contract.AllowAll{}, denycache.Config{MaxKeys: -1}, "redlimit: denycache.Config.MaxKeys must be >= 0, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := denycache.New(tc.next, tc.cfg)
			var ce *algorithms.ConfigError
			if !errors.As(err, &ce) || err.Error() != tc.want {
				t.Fatalf("NewDenyCache = %v, want *ConfigError %q", err, tc.want)
			}
		})
	}
}

// TestDenyCacheLocalAnswer: once next denies, the cache answers until
// RetryAfter has passed, with exactly the Result next itself would give
// (no other traffic), and then asks next again.
func TestDenyCacheLocalAnswer(t *testing.T) {
	limit := algorithms.Limit{Rate: 2, Period: time.Second}
	for _, alg := range algorithms.Algorithms {
		if alg == algorithms.Concurrency {
			continue // never cached: TestConcurrencyDenialNotCached
		}
		t.Run(alg.String(), func(t *testing.T) {
			f := newDenyFixture(t)
			check := algorithms.Check{Key: "k", Algorithm: alg, Limit: limit}
			for range 2 {
				if res, called := f.allow(t, 0, check); !res[0].Allowed || !called {
					t.Fatalf("Allow(t0) = %+v, called next %v; want allowed by next", res[0], called)
				}
			}
			const deniedAt = 100 * time.Millisecond
			res, called := f.allow(t, deniedAt, check)
			if res[0].Allowed || res[0].RetryAfter == 0 || !called {
				t.Fatalf("Allow(t0+%v) = %+v, called next %v; want a finite denial by next", deniedAt, res[0], called)
			}
			until := deniedAt + res[0].RetryAfter
			for _, at := range []time.Duration{deniedAt, deniedAt + time.Millisecond, (deniedAt + until) / 2, until - time.Microsecond} {
				got, called := f.allow(t, at, check)
				want := f.direct(t, at, check)
				want[0].Local = true // the only difference: answered in process
				if called || got[0] != want[0] {
					t.Errorf("Allow(t0+%v) = %s limit %d, called next %v; want %s limit %d locally",
						at, backendtest.FormatResult(got[0]), got[0].Limit, called, backendtest.FormatResult(want[0]), want[0].Limit)
				}
			}
			if got, called := f.allow(t, until, check); !called || !got[0].Allowed {
				t.Errorf("Allow(t0+%v) at RetryAfter = %s, called next %v; want allowed by next", until, backendtest.FormatResult(got[0]), called)
			}
			if n := f.cache.LocalDenials(); n != 4 {
				t.Errorf("LocalDenials = %d, want 4", n)
			}
		})
	}
}

// TestDenyCacheExactResult spells one local answer out: GCRA 2/s, both
// units taken at t0, denied at t0+100ms (retry 400ms, reset 900ms).
func TestDenyCacheExactResult(t *testing.T) {
	f := newDenyFixture(t)
	check := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(2)}
	f.allow(t, 0, check)
	f.allow(t, 0, check)
	f.allow(t, 100*time.Millisecond, check)
	got, called := f.allow(t, 300*time.Millisecond, check)
	want := algorithms.Result{Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 200 * time.Millisecond, ResetAfter: 700 * time.Millisecond, Local: true}
	if called || got[0] != want {
		t.Fatalf("Allow(t0+300ms) = %+v, called next %v; want %+v locally", got[0], called, want)
	}
	// The local clock has nanoseconds: 1ns before RetryAfter is still local.
	if got, called := f.allow(t, 500*time.Millisecond-1, check); called || got[0].RetryAfter != 1 {
		t.Fatalf("Allow(t0+500ms-1ns) = %+v, called next %v; want RetryAfter 1ns locally", got[0], called)
	}
}

// TestDenyCacheMatching: after a denial of cost 2 (GCRA 4/s, 3 of 4 taken),
// which calls are answered locally and which go to next.
func TestDenyCacheMatching(t *testing.T) {
	limit := algorithms.PerSecond(4)
	base := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: limit}
	with := func(edit func(c *algorithms.Check)) algorithms.Check {
		c := base
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name      string
		check     algorithms.Check
		wantLocal bool
	}{
		{"same cost", with(func(c *algorithms.Check) { c.Cost = 2 }), true},
		{"larger cost", with(func(c *algorithms.Check) { c.Cost = 3 }), true},
		{"cost = capacity", with(func(c *algorithms.Check) { c.Cost = 4 }), true},
		{"smaller cost", with(func(c *algorithms.Check) { c.Cost = 1 }), false},
		{"cost 0 means 1", with(func(c *algorithms.Check) { c.Cost = 0 }), false},
		{"cost > capacity is Never", with(func(c *algorithms.Check) { c.Cost = 5 }), false},
		{"higher tier", with(func(c *algorithms.Check) { c.Cost = 2; c.Limit = algorithms.PerSecond(8) }), false},
		{"same capacity, other Limit", with(func(c *algorithms.Check) { c.Cost = 2; c.Limit = limit.WithBurst(4) }), false},
		{"other algorithm", with(func(c *algorithms.Check) { c.Cost = 2; c.Algorithm = algorithms.TokenBucket }), false},
		{"other key", with(func(c *algorithms.Check) { c.Cost = 2; c.Key = "k2" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDenyFixture(t)
			f.allow(t, 0, with(func(c *algorithms.Check) { c.Cost = 3 }))
			if res, _ := f.allow(t, 0, with(func(c *algorithms.Check) { c.Cost = 2 })); res[0].Allowed {
				t.Fatalf("setup: cost 2 allowed: %+v", res[0])
			}
			res, called := f.allow(t, 10*time.Millisecond, tc.check)
			if called == tc.wantLocal {
				t.Fatalf("Allow(%+v) = %+v, called next %v; want local %v", tc.check, res[0], called, tc.wantLocal)
			}
			if tc.wantLocal && (res[0].Allowed || res[0].RetryAfter != 240*time.Millisecond || res[0].Limit != 4) {
				t.Errorf("local Result = %+v, want denied, RetryAfter 240ms, Limit 4", res[0])
			}
		})
	}
}

// TestDenyCacheNeverNotCached: a cost above capacity can never pass; its
// denial is not remembered (there is no RetryAfter to remember).
func TestDenyCacheNeverNotCached(t *testing.T) {
	f := newDenyFixture(t)
	check := algorithms.Check{Key: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(2), Cost: 3}
	for i := range 3 {
		res, called := f.allow(t, time.Duration(i)*time.Second, check)
		if res[0].Allowed || res[0].RetryAfter != 0 || !called {
			t.Fatalf("call %d: %+v, called next %v; want Never from next", i, res[0], called)
		}
	}
}

// TestDenyCacheLayered: one cached check denies the whole call locally;
// the other checks are not evaluated (zero Result) and nothing is consumed.
func TestDenyCacheLayered(t *testing.T) {
	limit := algorithms.PerMinute(3)
	ip := algorithms.Check{Key: "ip:{1.2.3.4}", Algorithm: algorithms.SlidingLog, Limit: limit}
	user := algorithms.Check{Key: "user:{ann}", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(1)}
	route := algorithms.Check{Key: "route:{/x}", Algorithm: algorithms.FixedWindow, Limit: limit}

	f := newDenyFixture(t)
	f.allow(t, 0, user)
	res, _ := f.allow(t, 0, ip, user, route) // denied by next: user is out
	if res[0].Allowed != true || res[1].Allowed || res[1].RetryAfter == 0 || !res[2].Allowed {
		t.Fatalf("setup: %+v", res)
	}
	res, called := f.allow(t, time.Second, ip, user, route)
	if called {
		t.Fatal("the call reached next; want a local denial")
	}
	want := algorithms.Result{Limit: 1, RetryAfter: 59 * time.Second, ResetAfter: 59 * time.Second, Local: true}
	if res[0] != (algorithms.Result{}) || res[1] != want || res[2] != (algorithms.Result{}) {
		t.Fatalf("local Results = %+v, want [zero %+v zero]", res, want)
	}
	// Nothing was consumed: ip and route are untouched.
	for _, c := range []algorithms.Check{ip, route} {
		if got := f.direct(t, time.Second, c); !got[0].Allowed || got[0].Remaining != 2 {
			t.Errorf("%s after the local denial: %s, want allow with 2 remaining (this call took the first unit)", c.Key, backendtest.FormatResult(got[0]))
		}
	}
	// Previously unevaluated checks may be overwritten with stale values: the
	// cache zeroes them.
	res = []algorithms.Result{{Allowed: true, Limit: 9}, {}, {Allowed: true, Limit: 9}}
	f.clock.T = backendtest.T0.Add(2 * time.Second)
	if err := f.cache.Allow(context.Background(), []algorithms.Check{ip, user, route}, res); err != nil {
		t.Fatal(err)
	}
	if res[0] != (algorithms.Result{}) || res[2] != (algorithms.Result{}) {
		t.Fatalf("Results of checks not evaluated = %+v, %+v; want zero", res[0], res[2])
	}
}

// TestDenyCacheErrors: next's errors pass through and record nothing; a
// call the cache would answer is validated like Memory validates it.
func TestDenyCacheErrors(t *testing.T) {
	boom := errors.New("boom")
	next := &countingBackend{next: denyAll{}, err: boom}
	cache, _ := denycache.New(next, denycache.Config{})
	check := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	res := make([]algorithms.Result, 2)
	if err := cache.Allow(context.Background(), []algorithms.Check{check}, res); !errors.Is(err, boom) {
		t.Fatalf("Allow = %v, want next's error", err)
	}
	next.err = nil
	cache.Allow(context.Background(), []algorithms.Check{check}, res)
	if n := next.calls.Load(); n != 2 {
		t.Fatalf("next called %d times, want 2: a failed call must not be cached", n)
	}
	// Now k is cached. Invalid calls that would hit it fail like Memory's.
	other := algorithms.Check{Key: "o", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	bad := other
	bad.Limit.Rate = 0
	for _, tc := range []struct {
		name   string
		checks []algorithms.Check
		res    int
		want   string
	}{
		{"short results", []algorithms.Check{other, check}, 1, "redlimit: results must hold one Result per Check, got 1 for 2"},
		{"duplicate key", []algorithms.Check{check, check}, 2, `redlimit: Check.Key appears twice in one call: "k"`},
		{"invalid limit", []algorithms.Check{check, bad}, 2, "redlimit: Limit.Rate must be > 0, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := make([]algorithms.Result, tc.res)
			for i := range res {
				res[i].Limit = 7
			}
			err := cache.Allow(context.Background(), tc.checks, res)
			if !errors.Is(err, algorithms.ErrInvalidConfig) || err.Error() != tc.want {
				t.Fatalf("Allow = %v, want %q", err, tc.want)
			}
			for i := range res {
				if res[i].Limit != 7 {
					t.Fatalf("results written on error: %+v", res)
				}
			}
		})
	}
}

// TestDenyCacheAllowedForgets: an allowed check removes its key's entry,
// unless it was a smaller cost than the one denied under the same limit.
func TestDenyCacheAllowedForgets(t *testing.T) {
	free := algorithms.Check{Key: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(1)}
	paid := free
	paid.Limit = algorithms.PerSecond(10)

	f := newDenyFixture(t)
	f.allow(t, 0, free)
	f.allow(t, 0, free) // denied for 1s, cached
	if _, called := f.allow(t, 0, free); called {
		t.Fatal("not cached")
	}
	if res, called := f.allow(t, 0, paid); !called || !res[0].Allowed {
		t.Fatalf("higher tier: %+v, called next %v; want allowed by next", res[0], called)
	}
	if _, called := f.allow(t, time.Millisecond, free); !called {
		t.Fatal("entry kept after the key was allowed under another limit; want it removed")
	}

	big := algorithms.Check{Key: "b", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(4), Cost: 3}
	small := big
	small.Cost = 1
	f.allow(t, 0, big)
	f.allow(t, 0, big) // 1 left: cost 3 denied and cached
	if res, called := f.allow(t, 0, small); !called || !res[0].Allowed {
		t.Fatalf("smaller cost: %+v, called next %v; want allowed by next", res[0], called)
	}
	if _, called := f.allow(t, time.Millisecond, big); called {
		t.Fatal("entry for cost 3 removed by an allowed cost 1; want it kept (still true)")
	}
}

// TestDenyCacheAllowedForgetsManyChecks: a call of many checks forgets the
// entry of any of them that the wrapped Backend allows, wherever it stands
// in the call.
func TestDenyCacheAllowedForgetsManyChecks(t *testing.T) {
	for _, n := range []int{5, 6, 65, 70} {
		t.Run("checks="+strconv.Itoa(n), func(t *testing.T) {
			f := newDenyFixture(t)
			free := algorithms.Check{Key: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(1)}
			f.allow(t, 0, free)
			f.allow(t, 0, free) // denied for 1s, cached
			call := backendtest.LayeredChecks("many:", n, benchLimit)
			paid := free
			paid.Limit = algorithms.PerSecond(10)
			call[n-1] = paid // the key's entry is for another limit: no hit
			res, called := f.allow(t, 0, call...)
			if !called || !res[n-1].Allowed {
				t.Fatalf("call of %d checks, the last under a higher tier: %+v, called next %v; want allowed by next", n, res[n-1], called)
			}
			if _, called := f.allow(t, time.Millisecond, free); !called {
				t.Fatalf("entry kept after check %d of %d was allowed under another limit; want it removed", n-1, n)
			}
		})
	}
}

// TestDenyCacheInvalidCallEndsProbe: a call that claims the probe of an
// expired entry and then fails validation on a live one ends its probe, so
// the next call of the key goes to the wrapped Backend instead of waiting
// for a probe that never answers.
func TestDenyCacheInvalidCallEndsProbe(t *testing.T) {
	f := newDenyFixture(t)
	a := algorithms.Check{Key: "a", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	b := algorithms.Check{Key: "b", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}
	for range 2 { // the second calls are denied and cached: a for 1s, b for 1h
		f.allow(t, 0, a)
		f.allow(t, 0, b)
	}
	if _, called := f.allow(t, 0, a); called {
		t.Fatal("a not cached")
	}
	f.clock.T = backendtest.T0.Add(time.Second) // a's entry expired, b's live
	err := f.cache.Allow(context.Background(), []algorithms.Check{a, b, b}, make([]algorithms.Result, 3))
	if !errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Fatalf("Allow(a, b, b) = %v, want the duplicate key rejected", err)
	}
	// A cancelled context: a call that waited for a never-ending probe
	// would fail at once without reaching the wrapped Backend.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := f.next.calls.Load()
	f.cache.Allow(ctx, []algorithms.Check{a}, make([]algorithms.Result, 1))
	if f.next.calls.Load() == before {
		t.Fatal("the call after the invalid one did not reach the wrapped Backend: it waited for the invalid call's probe")
	}
	if res, called := f.allow(t, time.Second, a); !called || !res[0].Allowed {
		t.Fatalf("Allow(a, t0+1s) = %+v, called next %v; want allowed by next", res[0], called)
	}
}

// TestDenyCacheClockBack: a local clock that goes back before a denial was
// recorded bypasses the entry rather than stretch the denial.
func TestDenyCacheClockBack(t *testing.T) {
	f := newDenyFixture(t)
	check := algorithms.Check{Key: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(1)}
	f.allow(t, 500*time.Millisecond, check)
	f.allow(t, 500*time.Millisecond, check) // denied until t0+1s
	if _, called := f.allow(t, 400*time.Millisecond, check); !called {
		t.Fatal("Allow(t0+400ms) answered locally; want next (the clock went back)")
	}
}

// TestDenyCacheMaxKeys floods the cache with distinct denied keys: at most
// MaxKeys of them are then answered locally.
func TestDenyCacheMaxKeys(t *testing.T) {
	for _, tc := range []struct{ maxKeys, min int }{
		{10, 8},      // 8 shards of 1
		{256, 256},   // 64 shards of 4
		{1000, 960},  // 64 shards of 15
		{4096, 4096}, // 64 shards of 64
	} {
		t.Run("MaxKeys="+strconv.Itoa(tc.maxKeys), func(t *testing.T) {
			t.Parallel()
			next := &countingBackend{next: denyAll{}}
			cache, err := denycache.New(next, denycache.Config{MaxKeys: tc.maxKeys})
			if err != nil {
				t.Fatal(err)
			}
			const flood = 20_000
			checks := make([]algorithms.Check, flood)
			res := make([]algorithms.Result, 1)
			for i := range checks {
				checks[i] = algorithms.Check{Key: "flood:" + strconv.Itoa(i), Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}
				if err := cache.Allow(context.Background(), checks[i:i+1], res); err != nil {
					t.Fatal(err)
				}
			}
			// Make next fail: every key still cached answers without error.
			next.err = errors.New("not cached")
			local := 0
			for i := range checks {
				if cache.Allow(context.Background(), checks[i:i+1], res) == nil {
					local++
				}
			}
			if local > tc.maxKeys || local < tc.min {
				t.Fatalf("%d keys answered locally after a flood of %d, want %d..%d", local, flood, tc.min, tc.maxKeys)
			}
		})
	}
}

// TestDenyCacheConcurrent: many goroutines on few keys. The cache never
// allows anything itself, so a fixed clock allows exactly the limit per key;
// every call is answered either by next or locally.
func TestDenyCacheConcurrent(t *testing.T) {
	t.Parallel()
	at := backendtest.T0.Add(30 * time.Minute)
	mem, _ := memstore.New(memstore.Config{Now: func() time.Time { return at }})
	next := &countingBackend{next: mem}
	cache, _ := denycache.New(next, denycache.Config{Now: func() time.Time { return at }})
	const keys, limit, goroutines, calls = 8, 10, 16, 2000
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			res := make([]algorithms.Result, 2)
			for i := range calls {
				k := (g + i) % keys
				checks := []algorithms.Check{{Key: "k" + strconv.Itoa(k), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(limit)}}
				if err := cache.Allow(context.Background(), checks, res); err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					allowed[k].Add(1)
				} else if res[0].RetryAfter <= 0 || res[0].Limit != limit {
					t.Errorf("denial %+v, want RetryAfter > 0 and Limit %d", res[0], limit)
					return
				}
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		if n := allowed[k].Load(); n != limit {
			t.Errorf("key %d: %d allowed, want exactly %d", k, n, limit)
		}
	}
	total := int64(goroutines * calls)
	if got := next.calls.Load() + int64(cache.LocalDenials()); got != total {
		t.Errorf("next calls %d + local denials %d = %d, want %d", next.calls.Load(), cache.LocalDenials(), got, total)
	}
	if cache.LocalDenials() < uint64(total)/2 {
		t.Errorf("only %d of %d calls answered locally", cache.LocalDenials(), total)
	}
}

// TestDenyCacheConcurrentMovingClock runs layered calls while the clock
// moves, so entries expire, are swept and evicted concurrently (-race).
func TestDenyCacheConcurrentMovingClock(t *testing.T) {
	t.Parallel()
	var ns atomic.Int64
	now := func() time.Time { return backendtest.T0.Add(time.Duration(ns.Load())) }
	mem, _ := memstore.New(memstore.Config{Now: now})
	cache, _ := denycache.New(mem, denycache.Config{Now: now, MaxKeys: 64})
	limit := algorithms.Limit{Rate: 5, Period: 100 * time.Millisecond}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			res := make([]algorithms.Result, 2)
			for i := range 3000 {
				ns.Add(int64(50 * time.Microsecond))
				checks := []algorithms.Check{
					{Key: "g:" + strconv.Itoa(g%4), Algorithm: algorithms.GCRA, Limit: limit},
					{Key: "k:" + strconv.Itoa(i%200), Algorithm: algorithms.SlidingWindow, Limit: limit},
				}
				if err := cache.Allow(context.Background(), checks, res); err != nil {
					t.Error(err)
					return
				}
				// A zero Result (not evaluated) comes with a local denial.
				zero, denied := 0, false
				for _, r := range res {
					switch {
					case r == (algorithms.Result{}):
						zero++
					case r.Limit != 5:
						t.Errorf("Result %+v, want Limit 5", r)
					case !r.Allowed:
						denied = true
					}
				}
				if zero == 2 || zero == 1 && !denied {
					t.Errorf("inconsistent Results %+v", res)
					return
				}
			}
		})
	}
	wg.Wait()
	if cache.LocalDenials() == 0 {
		t.Error("no call answered locally")
	}
}

// TestDenyCacheAllocs: the cache's own overhead allocates nothing, on a
// local answer (hit) and on a call it passes on (miss).
func TestDenyCacheAllocs(t *testing.T) {
	c := &backendtest.Clock{T: backendtest.T0}
	mem, _ := memstore.New(memstore.Config{Now: c.Now})
	hit, _ := denycache.New(mem, denycache.Config{Now: c.Now})
	miss, _ := denycache.New(contract.AllowAll{}, denycache.Config{Now: c.Now})
	checks := backendtest.LayeredChecks("allocs:", 3, benchLimit)
	denied := algorithms.Check{Key: "allocs:denied", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}
	res := make([]algorithms.Result, 3)
	for range 2 {
		if err := hit.Allow(context.Background(), []algorithms.Check{denied}, res); err != nil {
			t.Fatal(err)
		}
	}
	hitChecks := append([]algorithms.Check{denied}, checks[1:]...)
	for _, tc := range []struct {
		name   string
		cache  *denycache.Cache
		checks []algorithms.Check
	}{
		{"hit/rules=1", hit, hitChecks[:1]},
		{"hit/rules=3", hit, hitChecks},
		{"miss/rules=1", miss, checks[:1]},
		{"miss/rules=3", miss, checks},
		{"miss/rules=6", miss, backendtest.LayeredChecks("allocs6:", 6, benchLimit)},
	} {
		res := make([]algorithms.Result, len(tc.checks))
		before := hit.LocalDenials()
		allocs := testing.AllocsPerRun(200, func() {
			if err := tc.cache.Allow(context.Background(), tc.checks, res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per call, want 0", tc.name, allocs)
		}
		if tc.cache == hit && hit.LocalDenials() == before {
			t.Errorf("%s: not answered locally", tc.name)
		}
	}
}

// TestDenyCacheAbusiveClient is the acceptance test: under one key sending
// far over its limit, the scripts Redis runs for it drop to the allowed
// requests plus about one per RetryAfter period per application instance
// (per goroutine of an instance calling at the moment an entry expires),
// counted by the server (INFO commandstats). Real redis-server, server
// clock, real local clock, one DenyCache per simulated instance. Not
// parallel: the counts are server-wide.
func TestDenyCacheAbusiveClient(t *testing.T) {
	srv := redistest.Require(t)
	client := srv.Client(t)
	ctx := context.Background()
	limit := algorithms.Limit{Rate: 10, Period: 200 * time.Millisecond}
	gcraPeriod := limit.Period / time.Duration(limit.Rate) // one unit every 20ms
	for _, tc := range []struct {
		name                  string
		alg                   algorithms.Algorithm
		period                time.Duration // the RetryAfter period once over the limit
		run                   time.Duration
		instances, goroutines int // goroutines per instance
	}{
		{"fixed_window/instances=1/goroutines=1", algorithms.FixedWindow, limit.Period, time.Second, 1, 1},
		{"gcra/instances=1/goroutines=1", algorithms.GCRA, gcraPeriod, 500 * time.Millisecond, 1, 1},
		{"gcra/instances=2/goroutines=2", algorithms.GCRA, gcraPeriod, 500 * time.Millisecond, 2, 2},
		{"gcra/instances=4/goroutines=16", algorithms.GCRA, gcraPeriod, 500 * time.Millisecond, 4, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redisBackend, err := redisstore.New(client, redisstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			next := &countingBackend{next: redisBackend}
			caches := make([]*denycache.Cache, tc.instances)
			for i := range caches {
				if caches[i], err = denycache.New(next, denycache.Config{}); err != nil {
					t.Fatal(err)
				}
			}
			check := algorithms.Check{Key: redistest.Prefix(t) + "{abuser}", Algorithm: tc.alg, Limit: limit}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			var requests, allowed atomic.Int64
			start := time.Now()
			deadline := start.Add(tc.run)
			var wg sync.WaitGroup
			for i := range tc.instances * tc.goroutines {
				cache := caches[i%tc.instances]
				wg.Go(func() {
					checks := []algorithms.Check{check}
					res := make([]algorithms.Result, 1)
					var n, ok int64
					for time.Now().Before(deadline) {
						if err := cache.Allow(ctx, checks, res); err != nil {
							t.Error(err)
							break
						}
						n++
						if res[0].Allowed {
							ok++
						}
					}
					requests.Add(n)
					allowed.Add(ok)
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			scripts, _ := backendtest.ScriptStats(ctx, client)
			var local uint64
			for _, c := range caches {
				local += c.LocalDenials()
			}
			// Per instance and RetryAfter period: one probe when the
			// denial expires (at most two periods cross); when the probe
			// is allowed, the calls that waited for it, and the calls that
			// come back before one of them records a denial again.
			periods := int64(elapsed/tc.period) + 1
			bound := 2*allowed.Load()*int64(tc.goroutines) + 2*periods*int64(tc.instances) + 10
			t.Logf("%v: %d requests, %d allowed, %d local denials; Redis ran %d scripts (next called %d times); %d RetryAfter periods of %v; bound %d",
				elapsed.Round(time.Millisecond), requests.Load(), allowed.Load(), local, int64(scripts), next.calls.Load(), periods, tc.period, bound)
			// Queued calls to next share batch scripts: Redis runs at
			// most one script per call (and the EVAL that loads a script
			// after NOSCRIPT, once per script), and the calls are bounded.
			if calls := next.calls.Load(); int64(scripts) > calls+2 || calls > bound {
				t.Errorf("Redis ran %d scripts for %d calls to next, want at most one script per call (+2 loads) and at most %d calls (2 × allowed × goroutines + 2 per period per instance + 10)", int64(scripts), calls, bound)
			}
			if requests.Load() < 10*int64(scripts) {
				t.Errorf("%d requests for %d scripts: want the requests to outnumber the scripts by far", requests.Load(), int64(scripts))
			}
			if got := int64(local) + next.calls.Load(); got != requests.Load() {
				t.Errorf("local denials %d + calls to next %d = %d, want the %d requests", local, next.calls.Load(), got, requests.Load())
			}
		})
	}
}

// gatedBackend answers every check with deny (RetryAfter 1s) or allow,
// once gate lets each call through.
type gatedBackend struct {
	gate  chan struct{}
	deny  atomic.Bool
	calls atomic.Int64
}

func (g *gatedBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	g.calls.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	for i, c := range checks {
		capacity := c.Limit.Capacity(c.Algorithm)
		if g.deny.Load() {
			results[i] = algorithms.Result{Limit: capacity, RetryAfter: time.Second, ResetAfter: time.Second}
		} else {
			results[i] = algorithms.Result{Allowed: true, Limit: capacity, Remaining: capacity - 1, ResetAfter: time.Second}
		}
	}
	return nil
}

// TestDenyCacheProbe: when a denial expires, the first call of its key
// asks the wrapped Backend and the calls that come meanwhile wait for that
// answer: denied, they are denied locally with it; allowed, they go on to
// the wrapped Backend themselves. A waiter gives up with its context.
func TestDenyCacheProbe(t *testing.T) {
	c := &backendtest.Clock{T: backendtest.T0}
	g := &gatedBackend{gate: make(chan struct{})}
	cache, _ := denycache.New(g, denycache.Config{Now: c.Now})
	check := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	call := func(ctx context.Context) (algorithms.Result, error) {
		res := make([]algorithms.Result, 1)
		err := cache.Allow(ctx, []algorithms.Check{check}, res)
		return res[0], err
	}
	open := func() { close(g.gate) }

	g.deny.Store(true)
	close(g.gate)
	if r, err := call(context.Background()); err != nil || r.Allowed {
		t.Fatalf("first call: %+v, %v", r, err)
	}

	// waveAfterExpiry moves past the denial, sends n calls at once with
	// the gate shut, and reports how many reached the backend before the
	// gate opened, after, and how many were allowed.
	waveAfterExpiry := func(n int, deny bool) (before, after int64, allowed int) {
		t.Helper()
		c.T = c.T.Add(time.Second)
		g.gate = make(chan struct{})
		g.deny.Store(deny)
		base := g.calls.Load()
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range n {
			wg.Go(func() {
				r, err := call(context.Background())
				if err != nil {
					t.Error(err)
				}
				if r.Allowed {
					ok.Add(1)
				}
			})
		}
		// The probe reaches the backend; give the others time to arrive
		// and queue behind it.
		for wait := time.Now().Add(5 * time.Second); g.calls.Load() == base && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		before = g.calls.Load() - base
		open()
		wg.Wait()
		return before, g.calls.Load() - base, int(ok.Load())
	}

	local := cache.LocalDenials()
	if before, after, allowed := waveAfterExpiry(32, true); before != 1 || after != 1 || allowed != 0 {
		t.Fatalf("probe denied: %d calls reached the backend before it answered, %d in all, %d allowed; want 1, 1, 0", before, after, allowed)
	}
	if got := cache.LocalDenials() - local; got != 31 {
		t.Errorf("probe denied: %d local denials, want the 31 waiters", got)
	}
	if before, after, allowed := waveAfterExpiry(32, false); before != 1 || after != 32 || allowed != 32 {
		t.Fatalf("probe allowed: %d calls reached the backend before it answered, %d in all, %d allowed; want 1, 32, 32", before, after, allowed)
	}

	// A waiter's context ends while the probe is under way.
	g.deny.Store(true)
	if r, err := call(context.Background()); err != nil || r.Allowed {
		t.Fatalf("denial again: %+v, %v", r, err)
	}
	c.T = c.T.Add(time.Second)
	g.gate = make(chan struct{})
	probeDone := make(chan error)
	base := g.calls.Load()
	go func() { _, err := call(context.Background()); probeDone <- err }()
	for g.calls.Load() == base {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := call(ctx)
	var be *algorithms.BackendError
	if !errors.As(err, &be) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("waiter with a 20ms deadline: %v after %v, want a BackendError wrapping the deadline", err, time.Since(start))
	}
	open()
	if err := <-probeDone; err != nil {
		t.Fatal(err)
	}
}

// TestDenyCacheEmptiesItself: entries that expired long ago are swept by
// the lookups of other keys, even when no denial is recorded any more, so
// that a cache that no longer denies anything goes back to costing a call
// one counter read; entries that expired just now stay for their probes.
func TestDenyCacheEmptiesItself(t *testing.T) {
	t.Parallel()
	f := newDenyFixture(t)
	denied := algorithms.Check{Key: "rate:{abuser}", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	other := algorithms.Check{Key: "rate:{other}", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1000)}
	f.allow(t, 0, denied)
	if res, _ := f.allow(t, 0, denied); res[0].Allowed || res[0].RetryAfter != time.Second {
		t.Fatalf("second call = %+v; want denied for 1s", res[0])
	}
	if got := f.cache.Held(); got != 1 {
		t.Fatalf("Held() = %d after one denial, want 1", got)
	}
	// Just expired: a lookup per shard (64) leaves it, for its probe.
	for i := range 128 {
		f.allow(t, time.Second+time.Duration(i)*time.Microsecond, other)
	}
	if got := f.cache.Held(); got != 1 {
		t.Fatalf("Held() = %d just after expiry, want 1 (kept for its probe)", got)
	}
	// Expired for over a second: the lookups of other keys sweep it.
	for i := range 128 {
		f.allow(t, 3*time.Second+time.Duration(i)*time.Microsecond, other)
	}
	if got := f.cache.Held(); got != 0 {
		t.Fatalf("Held() = %d two seconds after expiry, want 0", got)
	}
	if res, asked := f.allow(t, 4*time.Second, denied); !res[0].Allowed || !asked {
		t.Fatalf("Allow(abuser) after the sweep = %+v, asked next %v; want allowed by next", res[0], asked)
	}
}

// panicOnce panics in the first call that gets through its gate, then
// answers every check allowed.
type panicOnce struct {
	gate    chan struct{}
	arrived chan struct{} // closed when the first call is in
	calls   atomic.Int64
}

func (p *panicOnce) Allow(_ context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if p.calls.Add(1) == 1 {
		close(p.arrived)
		<-p.gate
		panic("backend bug")
	}
	for i, c := range checks {
		capacity := c.Limit.Capacity(c.Algorithm)
		results[i] = algorithms.Result{Allowed: true, Limit: capacity, Remaining: capacity - 1, ResetAfter: time.Second}
	}
	return nil
}

// TestDenyCacheProbePanics: a wrapped Backend that panics during the probe
// of an expired denial. The panic reaches the probe's caller, as it would
// without the cache, and the calls waiting for that probe go on: each is
// decided by the wrapped Backend (allowed here). Before the probe was
// released with defer, they waited for it forever (the 30s bound below
// detects that deadlock; it is no timing assertion).
func TestDenyCacheProbePanics(t *testing.T) {
	c := &backendtest.Clock{T: backendtest.T0}
	check := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	p := &panicOnce{gate: make(chan struct{}), arrived: make(chan struct{})}
	// The denial comes from denyAll through a cache whose next is then
	// swapped for p: a Cache's entries are per key, whoever answered.
	next := &switchBackend{}
	next.b.Store(backendBox{denyAll{}})
	cache, err := denycache.New(next, denycache.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	res := make([]algorithms.Result, 1)
	if err := cache.Allow(context.Background(), []algorithms.Check{check}, res); err != nil || res[0].Allowed {
		t.Fatalf("first call: %+v, %v; want denied for an hour", res[0], err)
	}
	next.b.Store(backendBox{p})
	c.T = c.T.Add(time.Hour) // the denial has expired: the next call probes

	probe := make(chan any, 1)
	go func() {
		defer func() { probe <- recover() }()
		cache.Allow(context.Background(), []algorithms.Check{check}, make([]algorithms.Result, 1))
	}()
	<-p.arrived
	const waiters = 8
	type answer struct {
		r   algorithms.Result
		err error
	}
	answers := make(chan answer, waiters)
	for range waiters {
		go func() {
			res := make([]algorithms.Result, 1)
			err := cache.Allow(context.Background(), []algorithms.Check{check}, res)
			answers <- answer{res[0], err}
		}()
	}
	// The waiters queue behind the probe (a call that arrives after the
	// panic is decided by p as well, which the assertions below allow).
	time.Sleep(50 * time.Millisecond)
	close(p.gate)
	if got := <-probe; got != "backend bug" {
		t.Fatalf("the probe's caller recovered %v, want the backend's panic", got)
	}
	deadlock := time.After(30 * time.Second)
	for i := range waiters {
		select {
		case a := <-answers:
			if a.err != nil || !a.r.Allowed {
				t.Errorf("waiter %d: %+v, %v; want allowed by the wrapped Backend", i, a.r, a.err)
			}
		case <-deadlock:
			t.Fatalf("%d of %d waiters still blocked 30s after the probe panicked: the probe was never released", waiters-i, waiters)
		}
	}
	if got := p.calls.Load(); got != 1+waiters {
		t.Errorf("the wrapped Backend saw %d calls, want the probe and the %d waiters", got, waiters)
	}
}

// switchBackend forwards to the Backend it holds, which a test may swap.
type switchBackend struct{ b atomic.Value } // backendBox

type backendBox struct{ algorithms.Backend }

func (s *switchBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	return s.b.Load().(backendBox).Allow(ctx, checks, results)
}
