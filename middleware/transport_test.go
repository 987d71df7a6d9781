package middleware_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// fakeClock is a clock that only Sleep moves, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return context.Cause(ctx)
}

// pacer returns an engine of one GCRA rule "partner" (10/s, burst 1) on
// b, sleeping on clock.
func pacer(t *testing.T, b algorithms.Backend, clock *fakeClock, prefix string, rule redlimit.Rule) *redlimit.Limiter {
	t.Helper()
	if rule.Name == "" {
		rule = redlimit.Rule{Name: "partner", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10).WithBurst(1)}
	}
	e, err := redlimit.New(b, redlimit.Config{
		Prefix: prefix, Rules: []redlimit.Rule{rule}, Logger: quiet,
		Sleep: clock.Sleep, DenyCache: denycache.Config{Now: clock.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// arrivals is an httptest server that records, per request, the fake time
// it arrived at, relative to t0.
type arrivals struct {
	mu    sync.Mutex
	at    []time.Duration
	clock *fakeClock
	srv   *httptest.Server
}

func newArrivals(t *testing.T, clock *fakeClock) *arrivals {
	a := &arrivals{clock: clock}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, clock.Now().Sub(t0))
		a.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *arrivals) times() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.at...)
}

func transport(t *testing.T, e *redlimit.Limiter, cfg middleware.TransportConfig) *http.Client {
	t.Helper()
	tr, err := middleware.NewTransport(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, ctx context.Context, url string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}

// TestTransportPaces: 10/s with burst 1 sends one request every 100ms,
// exactly, sequential or from 8 goroutines.
func TestTransportPaces(t *testing.T) {
	for _, workers := range []int{1, 8} {
		clock := &fakeClock{now: t0}
		e := pacer(t, newMemory(t, clock.Now), clock, "", redlimit.Rule{})
		srv := newArrivals(t, clock)
		c := transport(t, e, middleware.TransportConfig{})
		const n = 24
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range n / workers {
					if err := get(t, c, context.Background(), srv.srv.URL+"/x"); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		got := srv.times()
		if len(got) != n {
			t.Fatalf("workers=%d: %d requests arrived, want %d", workers, len(got), n)
		}
		// Sequential: request i arrives at i*100ms. Concurrent: every
		// waiter moves the shared fake clock, so arrival times are not
		// exact; but n requests cannot have been allowed in less than
		// (n-1)*100ms.
		if elapsed := clock.Now().Sub(t0); elapsed < (n-1)*100*time.Millisecond {
			t.Fatalf("workers=%d: %d requests allowed within %v, want at least %v", workers, n, elapsed, (n-1)*100*time.Millisecond)
		}
		if workers == 1 {
			for i, at := range got {
				if want := time.Duration(i) * 100 * time.Millisecond; at != want {
					t.Fatalf("request %d arrived at +%v, want +%v (all: %v)", i, at, want, got)
				}
			}
		}
		if p := e.Peek(context.Background(), strings.TrimPrefix(srv.srv.URL, "http://")); p.Allowed {
			t.Fatalf("workers=%d: after %d requests in a row the host is not at its limit: %+v", workers, n, p.Rules[0].Result)
		}
	}
}

// TestTransportKeys: the default key is the host, port included unless
// it is the scheme's default, lower-cased; a Key func replaces it, and a
// missing key follows the rule's MissingKey.
func TestTransportKeys(t *testing.T) {
	clock := &fakeClock{now: t0}
	mem := newMemory(t, clock.Now)
	e := pacer(t, mem, clock, "", redlimit.Rule{})
	tr, err := middleware.NewTransport(e, middleware.TransportConfig{Next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range []string{"https://API.Example.com/a", "https://api.example.com:443/b", "http://api.example.com:8443/c", "http://[2001:DB8::1]:80/d"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	// each host's bucket holds what its requests took
	for host, used := range map[string]bool{"api.example.com": true, "api.example.com:8443": true, "[2001:db8::1]": true, "api.example.com:443": false} {
		p := e.Peek(ctx, host)
		if rem := p.Rules[0].Result.Remaining; (rem == 0) != used {
			t.Errorf("Peek(%q): remaining %d, used %v", host, rem, used)
		}
	}
	if clock.Now() != t0.Add(100*time.Millisecond) {
		t.Errorf("clock at +%v: the two requests to api.example.com are 100ms apart, the others free", clock.Now().Sub(t0))
	}

	// A key func reporting ErrNoKey: DenyMissingKey can never be allowed.
	var sent atomic.Int64
	noKey := mustKey(keyfunc.Header("X-Tenant"))
	tr2, err := middleware.NewTransport(e, middleware.TransportConfig{Key: noKey, Next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	body := &closeCounter{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://partner.example/", body)
	if _, err := tr2.RoundTrip(req); !errors.Is(err, redlimit.ErrNeverAllowed) {
		t.Fatalf("RoundTrip without a key under DenyMissingKey: %v, want ErrNeverAllowed", err)
	}
	if sent.Load() != 0 || body.closed.Load() != 1 {
		t.Fatalf("sent %d, body closed %d times; want 0 and 1", sent.Load(), body.closed.Load())
	}
	req.Header.Set("X-Tenant", "acme")
	req.Body = http.NoBody
	if _, err := tr2.RoundTrip(req); err != nil || sent.Load() != 1 {
		t.Fatalf("RoundTrip with a key: %v, sent %d", err, sent.Load())
	}
}

// TestTransportNotSent: a request Wait refuses is never sent, and its
// body is closed: a cost above capacity (never), a deadline shorter than
// the wait, and a context that ends while waiting. The refused requests
// consume nothing.
func TestTransportNotSent(t *testing.T) {
	clock := &fakeClock{now: t0}
	e := pacer(t, newMemory(t, clock.Now), clock, "", redlimit.Rule{Name: "slow", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1).WithBurst(1)})
	srv := newArrivals(t, clock)
	c := transport(t, e, middleware.TransportConfig{})
	if err := get(t, c, context.Background(), srv.srv.URL); err != nil {
		t.Fatal(err)
	}
	// the next one must wait 1s
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := get(t, c, ctx, srv.srv.URL); !errors.Is(err, redlimit.ErrWaitExceedsDeadline) {
		t.Fatalf("GET with a 50ms deadline, 1s to wait: %v, want ErrWaitExceedsDeadline", err)
	}

	// a context that ends while Wait sleeps
	cause := errors.New("shutting down")
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	e2, err := redlimit.New(newMemory(t, clock.Now), redlimit.Config{
		Rules: []redlimit.Rule{{Name: "slow", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1).WithBurst(1)}},
		Sleep: func(ctx context.Context, d time.Duration) error {
			cancel2(cause)
			<-ctx.Done()
			return context.Cause(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	c2 := transport(t, e2, middleware.TransportConfig{})
	if err := get(t, c2, context.Background(), srv.srv.URL); err != nil {
		t.Fatal(err)
	}
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx2, "POST", srv.srv.URL, body)
	if _, err := c2.Do(req); !errors.Is(err, cause) {
		t.Fatalf("POST whose context ends while waiting: %v, want the cause", err)
	}
	if body.closed.Load() == 0 {
		t.Fatal("the refused request's body was not closed")
	}
	if got := srv.times(); len(got) != 2 {
		t.Fatalf("%d requests arrived, want the 2 allowed ones", len(got))
	}
	// nothing consumed by the refused requests: the first waiter is let
	// through exactly 1s after the first request
	if err := get(t, c, context.Background(), srv.srv.URL); err != nil {
		t.Fatal(err)
	}
	if got := srv.times(); got[2] != time.Second {
		t.Fatalf("third request at +%v, want +1s", got[2])
	}

	if _, err := middleware.NewTransport(nil, middleware.TransportConfig{}); !errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Fatalf("NewTransport(nil): %v, want a ConfigError", err)
	}
}

// TestTransportSharedOnRedis: two processes (two engines, two clients) on
// one redis-server pace one host together: 6/min in all, one request
// every 10s, exactly. (The keys' TTLs run on the server's real clock:
// 10s of state cannot expire while the test runs.)
func TestTransportSharedOnRedis(t *testing.T) {
	srvRedis := redistest.Require(t)
	clock := &fakeClock{now: t0}
	prefix := strings.NewReplacer("/", ".", ":", "").Replace(strings.TrimSuffix(redistest.Prefix(t), ":"))
	var clients [2]*http.Client
	for i := range clients {
		b, err := redisstore.New(srvRedis.Client(t), redisstore.Config{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		rule := redlimit.Rule{Name: "partner", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(6).WithBurst(1)}
		clients[i] = transport(t, pacer(t, b, clock, prefix, rule), middleware.TransportConfig{})
	}
	srv := newArrivals(t, clock)
	const n = 20
	for i := range n {
		if err := get(t, clients[i%2], context.Background(), srv.srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	got := srv.times()
	for i, at := range got {
		if want := time.Duration(i) * 10 * time.Second; at != want {
			t.Fatalf("request %d (instance %d) arrived at +%v, want +%v (all: %v)", i, i%2, at, want, got)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeCounter struct {
	io.Reader
	closed atomic.Int64
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// TestTransportKeyError: a key func's error other than ErrNoKey goes to
// the limiter's error policy: under FailClosed RoundTrip returns it, the
// request not sent and its body closed; under FailOpen and Fallback the
// request is sent, nothing charged.
func TestTransportKeyError(t *testing.T) {
	boom := errors.New("no tenant table")
	for _, policy := range []redlimit.ErrorPolicy{redlimit.FailClosed, redlimit.FailOpen, redlimit.Fallback} {
		e, err := redlimit.New(newMemory(t, fixed), redlimit.Config{OnError: policy, Rules: []redlimit.Rule{
			{Name: "partner", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		var sent atomic.Int64
		tr, err := middleware.NewTransport(e, middleware.TransportConfig{
			Key: func(*http.Request) (string, error) { return "", boom },
			Next: roundTripFunc(func(*http.Request) (*http.Response, error) {
				sent.Add(1)
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			body := &closeCounter{Reader: strings.NewReader("payload")}
			r, _ := http.NewRequest("POST", "http://partner.example/", body)
			_, err := tr.RoundTrip(r)
			if policy == redlimit.FailClosed && (!errors.Is(err, boom) || body.closed.Load() != 1) {
				t.Fatalf("%v: RoundTrip = %v, body closed %d times; want the key func's error, closed once", policy, err, body.closed.Load())
			}
			if policy != redlimit.FailClosed && err != nil {
				t.Fatalf("%v: RoundTrip = %v, want the request sent", policy, err)
			}
		}
		if want := map[bool]int64{true: 0, false: 3}[policy == redlimit.FailClosed]; sent.Load() != want {
			t.Fatalf("%v: %d requests sent, want %d", policy, sent.Load(), want)
		}
		if d := e.Peek(context.Background(), "partner.example"); d.Rules[0].Result.Remaining != 1 {
			t.Fatalf("%v: %+v, want nothing charged", policy, d.Rules[0].Result)
		}
	}
}
