package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// The tests in this file kill, restart and pause a redis-server of their
// own (never the shared one), with a client configured to fail fast.

const redisTimeout = 100 * time.Millisecond

// ownRedis starts a redis-server for t alone. Without the binary it skips,
// except in CI. It checks for leaked goroutines when t ends, after every
// other cleanup (clients, middlewares, the server).
func ownRedis(t *testing.T) *redistest.Server {
	t.Helper()
	if redistest.Binary() == "" {
		if redistest.InCI() {
			t.Fatal("CI=true but redis-server is not installed")
		}
		t.Skip("redis-server not available")
	}
	base := runtimeGoroutines()
	t.Cleanup(func() { waitGoroutines(t, base) })
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// fastClient fails within about 50ms when the server is down or stalled,
// and never retries.
func fastClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:               srv.Addr,
		MaxRetries:         -1,
		DialerRetries:      1,
		DialerRetryTimeout: time.Millisecond,
		DialTimeout:        50 * time.Millisecond,
		ReadTimeout:        50 * time.Millisecond,
		WriteTimeout:       50 * time.Millisecond,
		PoolTimeout:        50 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// defaultClient is go-redis with its defaults: ContextTimeoutEnabled off,
// ReadTimeout 5s, three retries. Only the middleware's own bound keeps a
// stalled server from holding requests for seconds.
func defaultClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func redisMW(t *testing.T, c redis.Scripter, cfg spec) (*middleware.Middleware, *recorder) {
	t.Helper()
	b, err := redisstore.New(c, redisstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	cfg.Rules = []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}}
	cfg.Timeout = redisTimeout
	cfg.OnDecision = rec.hook
	return newMW(t, b, cfg), &rec
}

// timed serves one request and returns the response and how long it took.
func timed(h http.Handler, r *http.Request) (int, http.Header, time.Duration) {
	start := time.Now()
	w := serve(h, r)
	return w.Code, w.Header(), time.Since(start)
}

// untilPrimary serves requests from remote until one is decided by the
// primary and returns how long that took.
func untilPrimary(t *testing.T, h http.Handler, rec *recorder, remote string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		serve(h, req("GET", "/", remote))
		if d := rec.last(t); d.Source == redlimit.SourcePrimary && d.Err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("not back on Redis 10s after it came back: last decision %+v", rec.last(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRedisFailOpen(t *testing.T) {
	srv := ownRedis(t)
	mw, rec := redisMW(t, fastClient(t, srv), spec{OnError: redlimit.FailOpen})
	h := mw.Handler(ok)
	checkResponse(t, "up", serve(h, req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))

	srv.Stop()
	margin := latencyMargin()
	var slowest time.Duration
	for i := range 10 {
		code, hdr, took := timed(h, req("GET", "/", "192.0.2.1:1"))
		slowest = max(slowest, took)
		if got := limitHeaders(hdr); code != 200 || len(got) != 0 {
			t.Errorf("killed, request %d: status %d headers %v; want 200 without rate-limit headers", i, code, got)
		}
		if d := rec.last(t); !d.Allowed || !errors.Is(d.Err, algorithms.ErrBackend) || d.Source != redlimit.SourceNone {
			t.Errorf("killed, request %d: decision %+v", i, d)
		}
	}
	t.Logf("fail-open, server killed: slowest request %v", slowest)
	if margin = max(margin, latencyMargin()); slowest > redisTimeout+margin {
		t.Errorf("slowest request %v, want under Timeout %v + %v (the margin measured on this machine)", slowest, redisTimeout, margin)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("fail-open: limiting resumed %v after the restart", untilPrimary(t, h, rec, "192.0.2.1:1"))
	// The restarted server is empty: the request that found it took the
	// first unit; exactly two more pass.
	for i, code := range []int{200, 200, 429} {
		if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != code {
			t.Errorf("after restart, request %d: status %d, want %d", i, w.Code, code)
		}
	}
}

func TestRedisFailClosed(t *testing.T) {
	srv := ownRedis(t)
	c := fastClient(t, srv)
	mw, rec := redisMW(t, c, spec{OnError: redlimit.FailClosed})
	var seen error
	custom, _ := redisMW(t, c, spec{OnError: redlimit.FailClosed,
		ErrorHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := middleware.FromContext(r.Context())
			seen = d.Err
			http.Error(w, "try later", http.StatusTooManyRequests)
		})})
	checkResponse(t, "up", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))

	srv.Stop()
	margin := latencyMargin()
	var slowest time.Duration
	for i := range 10 {
		code, hdr, took := timed(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
		slowest = max(slowest, took)
		if code != 503 || hdr.Get("Retry-After") != "1" || hdr.Get("X-Ratelimit-Limit") != "" {
			t.Errorf("killed, request %d: status %d headers %v; want DefaultError's 503", i, code, hdr)
		}
		if d := rec.last(t); d.Allowed || !errors.Is(d.Err, algorithms.ErrBackend) {
			t.Errorf("killed, request %d: decision %+v", i, d)
		}
	}
	t.Logf("fail-closed, server killed: slowest request %v", slowest)
	if margin = max(margin, latencyMargin()); slowest > redisTimeout+margin {
		t.Errorf("slowest request %v, want under Timeout %v + %v (the margin measured on this machine)", slowest, redisTimeout, margin)
	}
	if w := serve(custom.Handler(ok), req("GET", "/", "192.0.2.1:1")); w.Code != 429 || !errors.Is(seen, algorithms.ErrBackend) {
		t.Errorf("custom ErrorHandler: status %d, saw Err %v", w.Code, seen)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("fail-closed: requests pass again %v after the restart", untilPrimary(t, mw.Handler(ok), rec, "192.0.2.1:1"))
}

func TestRedisFallback(t *testing.T) {
	srv := ownRedis(t)
	const probe = 50 * time.Millisecond
	mw, rec := redisMW(t, fastClient(t, srv), spec{
		OnError:         redlimit.Fallback,
		ProbeInterval:   probe,
		FallbackAfter:   time.Millisecond,
		FallbackBackend: newMemory(t, fixed),
	})
	h := mw.Handler(ok)
	checkResponse(t, "up", serve(h, req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))

	srv.Stop()
	// The first failure is refused; the next, FallbackAfter later,
	// switches to the fallback.
	checkResponse(t, "killed, first failure", serve(h, req("GET", "/", "192.0.2.1:1")), 503, map[string]string{"Retry-After": "1"})
	time.Sleep(2 * time.Millisecond)
	margin := latencyMargin()
	var slowest time.Duration
	for i, want := range threeAndDenied {
		code, hdr, took := timed(h, req("GET", "/", "192.0.2.1:1"))
		slowest = max(slowest, took)
		if code != want.code || !mapsEqual(limitHeaders(hdr), want.headers) {
			t.Errorf("killed, request %d: %d %v, want %d %v", i, code, limitHeaders(hdr), want.code, want.headers)
		}
		if d := rec.last(t); d.Source != redlimit.SourceFallback {
			t.Errorf("killed, request %d: Source %v, want fallback", i, d.Source)
		}
	}
	t.Logf("fallback, server killed: slowest request %v", slowest)
	if margin = max(margin, latencyMargin()); slowest > redisTimeout+margin {
		t.Errorf("slowest request %v, want under Timeout %v + %v (the margin measured on this machine)", slowest, redisTimeout, margin)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	margin = latencyMargin()
	back := untilPrimary(t, h, rec, "192.0.2.2:1")
	t.Logf("fallback: back on Redis %v after the restart (ProbeInterval %v)", back, probe)
	if margin = max(margin, latencyMargin()); back > probe+100*time.Millisecond+margin {
		t.Errorf("back on Redis %v after the restart, want within about ProbeInterval %v (+ 100ms + %v, the margin measured on this machine)", back, probe, margin)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRedisPaused: a stalled server (SIGSTOP: connections accepted, nothing
// answered) delays no request by more than Timeout plus a margin, under
// every policy, with a fast-failing client and with go-redis's defaults;
// after SIGCONT the limiter recovers by itself.
func TestRedisPaused(t *testing.T) {
	clients := []struct {
		name string
		new  func(*testing.T, *redistest.Server) *redis.Client
	}{{"fast client", fastClient}, {"default client", defaultClient}}
	for _, cl := range clients {
		for _, policy := range []redlimit.ErrorPolicy{redlimit.FailOpen, redlimit.FailClosed, redlimit.Fallback} {
			t.Run(cl.name+"/"+policy.String(), func(t *testing.T) {
				srv := ownRedis(t)
				mw, rec := redisMW(t, cl.new(t, srv), spec{OnError: policy, ProbeInterval: 50 * time.Millisecond})
				h := mw.Handler(ok)
				if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != 200 {
					t.Fatalf("up: status %d", w.Code)
				}
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				paused := true
				defer func() {
					if paused {
						srv.Resume()
					}
				}()
				margin := latencyMargin()
				var slowest time.Duration
				for range 5 {
					code, _, took := timed(h, req("GET", "/", "192.0.2.1:1"))
					slowest = max(slowest, took)
					if want := map[redlimit.ErrorPolicy]int{redlimit.FailClosed: 503}[policy]; want != 0 && code != want {
						t.Errorf("paused: status %d, want %d", code, want)
					}
				}
				t.Logf("paused: slowest request %v (Timeout %v)", slowest, redisTimeout)
				if margin = max(margin, latencyMargin()); slowest > redisTimeout+margin {
					t.Errorf("paused: slowest request %v, want under Timeout %v + %v (the margin measured on this machine)", slowest, redisTimeout, margin)
				}
				if err := srv.Resume(); err != nil {
					t.Fatal(err)
				}
				paused = false
				t.Logf("resumed: back on Redis after %v", untilPrimary(t, h, rec, "192.0.2.3:1"))
				waitFor(t, "abandoned calls to finish", func() bool { return mw.Stalled() == 0 })
			})
		}
	}
}

// TestWrongTypeKey: one key holding another Redis type fails its user's
// requests with ErrKeyState; the error policy answers those requests alone,
// and every other user's requests are still decided by Redis.
func TestWrongTypeKey(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	for _, tt := range []struct {
		policy redlimit.ErrorPolicy
		code   func(i int) int // for request i of the user whose key holds a list
		source redlimit.Source
	}{
		// The fallback decides that user's requests: 3 a minute.
		{redlimit.Fallback, func(i int) int { return []int{200, 429}[min(i/3, 1)] }, redlimit.SourceFallback},
		{redlimit.FailOpen, func(int) int { return 200 }, redlimit.SourceNone},
		{redlimit.FailClosed, func(int) int { return 503 }, redlimit.SourceNone},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			b, err := redisstore.New(c, redisstore.Config{Now: fixed})
			if err != nil {
				t.Fatal(err)
			}
			var rec recorder
			mw := newMW(t, b, spec{
				Prefix:        strings.ReplaceAll(redistest.Prefix(t), "/", "."),
				Rules:         []specRule{{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: gcra3}},
				OnError:       tt.policy,
				ProbeInterval: time.Hour, // no probe switches back within the test
				OnDecision:    rec.hook,
			})
			h := mw.Handler(ok)
			// Learn mallory's storage key, then put a list there.
			serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "mallory"))
			stray := rec.last(t).Rules[0].Key
			if err := c.Del(ctx, stray).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.RPush(ctx, stray, "x").Err(); err != nil {
				t.Fatal(err)
			}
			others, wrong := 0, 0
			for i := range 100 {
				w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "mallory"))
				if d := rec.last(t); w.Code != tt.code(i) || d.Source != tt.source || !errors.Is(d.Err, algorithms.ErrKeyState) {
					if wrong++; wrong == 1 {
						t.Errorf("mallory, request %d: status %d, Source %v, Err %v; want %d, %v, ErrKeyState", i, w.Code, d.Source, d.Err, tt.code(i), tt.source)
					}
				}
				serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "user"+strconv.Itoa(i)))
				if d := rec.last(t); d.Source != redlimit.SourcePrimary || d.Err != nil {
					others++
				}
			}
			if others != 0 || wrong != 0 {
				t.Errorf("%d of 100 other users' requests not decided by Redis, want 0; %d of mallory's 100 answered otherwise than the policy says", others, wrong)
			}
		})
	}
}

// TestAlgorithmChange: a rule whose algorithm changes between deploys
// (two middlewares sharing a prefix and a rule name) never reads the other
// algorithm's state: every pair of algorithms decides without error, and
// the new algorithm starts the key afresh.
func TestAlgorithmChange(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	b, err := redisstore.New(c, redisstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.ReplaceAll(redistest.Prefix(t), "/", ".")
	limit := algorithms.PerMinute(10)
	for _, from := range algorithms.Algorithms {
		for _, to := range algorithms.Algorithms {
			if from == to || from == algorithms.Concurrency || to == algorithms.Concurrency {
				// a concurrency rule frees its slot when each request
				// ends: nothing stays consumed to carry over
				continue
			}
			var rec recorder
			deploy := func(alg algorithms.Algorithm) http.Handler {
				return newMW(t, b, spec{
					Prefix:        prefix,
					Rules:         []specRule{{Name: "api", Key: userFunc, Algorithm: alg, Limit: limit}},
					ProbeInterval: time.Hour,
					OnDecision:    rec.hook,
				}).Handler(ok)
			}
			old, next := deploy(from), deploy(to)
			user := from.String() + "-" + to.String()
			for i, step := range []struct {
				h         http.Handler
				alg       algorithms.Algorithm
				remaining int64
			}{{old, from, 9}, {old, from, 8}, {next, to, 9}, {old, from, 7}, {next, to, 8}} {
				serve(step.h, req("GET", "/", "192.0.2.1:1", "X-User", user))
				d := rec.last(t)
				if d.Err != nil || d.Source != redlimit.SourcePrimary || d.Rules[0].Result.Remaining != step.remaining {
					t.Errorf("%v then %v, request %d (%v): Source %v, Err %v, Remaining %d; want the primary, no error, %d",
						from, to, i, step.alg, d.Source, d.Err, d.Rules[0].Result.Remaining, step.remaining)
				}
			}
		}
	}
}

// keyStateProbe is a Backend whose calls fail like a Redis that is down
// while down is set, and whose probe key, once it is up, holds unusable
// state (ErrKeyState): a server that answers, about one bad key.
type keyStateProbe struct {
	down   atomic.Bool
	probes atomic.Int64
	mem    *memstore.Store
}

func (b *keyStateProbe) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if b.down.Load() {
		return &algorithms.BackendError{Backend: "stub", Err: errors.New("connection refused")}
	}
	if strings.Contains(checks[0].Key, ":_probe:") {
		b.probes.Add(1)
		return &algorithms.BackendError{Backend: "stub", Err: errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), Keys: []string{checks[0].Key}}
	}
	return b.mem.Allow(ctx, checks, results)
}

// TestProbeKeyState: under Fallback, a probe answered with ErrKeyState (a
// stray value under the probe's own key) shows the primary is back: the
// middleware switches back to it instead of deciding with the fallback for
// as long as the stray key lives.
func TestProbeKeyState(t *testing.T) {
	b := &keyStateProbe{mem: newMemory(t, func() time.Time { return t0 })}
	b.down.Store(true)
	var last atomic.Int32
	mw, err := build(b, spec{
		NoDenyCache:   true,
		ProbeInterval: time.Millisecond,
		FallbackAfter: time.Millisecond,
		Logger:        quiet,
		OnDecision:    func(_ *http.Request, d *redlimit.Decision) { last.Store(int32(d.Source)) },
		Rules:         []specRule{{Name: "ip", Key: keyfunc.Const("all"), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	h := mw.Handler(ok)
	serve(h, req("GET", "/", "192.0.2.1:1")) // refused: the first failure
	time.Sleep(2 * time.Millisecond)
	serve(h, req("GET", "/", "192.0.2.1:1"))
	if got := redlimit.Source(last.Load()); got != redlimit.SourceFallback {
		t.Fatalf("while down: Source %v, want fallback", got)
	}
	b.down.Store(false)
	for deadline := time.Now().Add(10 * time.Second); b.probes.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no probe within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		serve(h, req("GET", "/", "192.0.2.1:1"))
		if redlimit.Source(last.Load()) == redlimit.SourcePrimary {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d probes answered with ErrKeyState: still on the fallback", b.probes.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
