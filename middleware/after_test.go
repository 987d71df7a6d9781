package middleware_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua"
	"github.com/redlimit/redlimit/middleware"
)

// TestWorkAfterResponseOffPath: the release of a concurrency rule's slot
// and the refund of a ResponseCost rule are made after the response, off
// its path. A real redis-server sits behind a proxy that holds the reply
// to the release (refund) script until the test opens its gate, which it
// does once the client, through a real HTTP server, has the whole body
// (or after 5s). The client must get the body while the reply is held;
// then the slot (the unit) comes back, once: a second request is let
// through by a limit of 1. Before, the handler waited for the reply
// (Timeout 10s here; by default up to 100ms a request), and the client
// got the body only after it.
func TestWorkAfterResponseOffPath(t *testing.T) {
	srv := redistest.Require(t)
	for _, tc := range []struct {
		name   string
		script string
		rule   specRule
	}{
		{"release", luaScript("release"), specRule{Name: "exports", Key: userFunc, Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, 30*time.Second)}},
		{"refund", luaScript("refund"), specRule{Name: "logins", Key: userFunc, Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1), ResponseCost: failedLogins}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Loaded before, so that the store sends it by its SHA.
			sha, err := srv.Client(t).ScriptLoad(t.Context(), tc.script).Result()
			if err != nil {
				t.Fatal(err)
			}
			p := redistest.NewGateProxy(t, srv.Addr, sha)
			client := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
			t.Cleanup(func() { client.Close() })
			b, err := redisstore.New(client, redisstore.Config{Pipelines: -1})
			if err != nil {
				t.Fatal(err)
			}
			mw := newMW(t, b, spec{Prefix: settlePrefix(t), Timeout: 10 * time.Second, Rules: []specRule{tc.rule}})
			hs := httptest.NewServer(mw.Handler(ok))
			defer hs.Close()
			get := func() (int, string) {
				t.Helper()
				r, err := http.NewRequest("GET", hs.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				r.Header.Set("X-User", "alice")
				resp, err := hs.Client().Do(r)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return resp.StatusCode, string(body)
			}

			got := make(chan struct{})
			go func() {
				select {
				case <-got:
				case <-time.After(5 * time.Second): // the response waits for the reply
				}
				p.Open()
			}()
			start := time.Now()
			code, body := get()
			elapsed := time.Since(start)
			p.Event("body " + strconv.Itoa(code) + " " + body)
			close(got)
			t.Logf("the client had the body %v after its request", elapsed)

			waitFor(t, "the work after the response", func() bool { return middleware.Pending(mw) == 0 })
			if log := p.Events(); !slices.Equal(log, []string{"body 200 ok", "reply"}) {
				t.Fatalf("events %q, want the body before the script's reply", log)
			}
			// The slot (the unit) is back: the limit of 1 lets one more in.
			if code, body := get(); code != http.StatusOK {
				t.Fatalf("second request: %d %q, want 200: the first's %s was lost", code, body, tc.name)
			}
		})
	}
}

// slowBackend is a backend the middleware must treat as remote: it
// forwards to a memstore Store but carries no traits (not in process). Its
// releases and refunds wait at gate (or fail with err), and it counts
// each lease released and each reservation refunded.
type slowBackend struct {
	mem  *memstore.Store
	gate chan struct{}
	err  error // what Release and Refund return, when set, without calling mem

	waiting  atomic.Int64 // releases and refunds at the gate
	mu       sync.Mutex
	released map[uint64]int
	refunded map[algorithms.Receipt]int
}

func newSlowBackend(t *testing.T) *slowBackend {
	return &slowBackend{mem: newMemory(t, fixed), gate: make(chan struct{}), released: map[uint64]int{}, refunded: map[algorithms.Receipt]int{}}
}

func (b *slowBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	return b.mem.Allow(ctx, checks, results)
}

func (b *slowBackend) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	return b.mem.Renew(ctx, leases, held)
}

func (b *slowBackend) wait(ctx context.Context) error {
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	select {
	case <-b.gate:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *slowBackend) Release(ctx context.Context, leases []algorithms.Lease) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	for _, l := range leases {
		b.released[l.ID]++
	}
	b.mu.Unlock()
	return b.mem.Release(ctx, leases)
}

func (b *slowBackend) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	for _, r := range refunds {
		b.refunded[r.Result.Receipt]++
	}
	b.mu.Unlock()
	return b.mem.Refund(ctx, refunds)
}

// once fails t unless each lease was released, and each reservation
// refunded, exactly once, and returns how many of each.
func (b *slowBackend) once(t *testing.T) (leases, refunds int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, n := range b.released {
		if n != 1 {
			t.Errorf("lease %d released %d times", id, n)
		}
	}
	for r, n := range b.refunded {
		if n != 1 {
			t.Errorf("reservation %+v refunded %d times", r, n)
		}
	}
	return len(b.released), len(b.refunded)
}

// afterRules are a concurrency rule of 10 slots per user and a rule that
// charges failed logins only (a 200 gives its unit back), 1000 an hour.
func afterRules(t testing.TB) []specRule {
	return []specRule{
		{Name: "exports", Key: userFunc, Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(10, 30*time.Second)},
		{Name: "logins", Key: ipFunc(t), Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1000), ResponseCost: failedLogins},
	}
}

// free returns the free slots of alice's concurrency rule and the units
// left to the IP's logins, read from the store.
func free(t *testing.T, b *slowBackend) (slots, units int64) {
	t.Helper()
	mw := newMW(t, b.mem, spec{Rules: afterRules(t)})
	for _, rd := range mw.Limiter().Peek(t.Context(), "alice").Rules {
		if rd.Name == "exports" {
			slots = rd.Result.Remaining
		}
	}
	for _, rd := range mw.Limiter().Peek(t.Context(), "203.0.113.7").Rules {
		if rd.Name == "logins" {
			units = rd.Result.Remaining
		}
	}
	return slots, units
}

// TestWorkAfterResponseQueueFull: with one worker and a queue of one,
// a third request whose release and refund wait makes its own after its
// handler (the worker is busy, the queue full): its ServeHTTP returns
// only once they are made. Nothing is lost: every slot is released and
// every unit refunded exactly once. Before, every request made its own.
func TestWorkAfterResponseQueueFull(t *testing.T) {
	b := newSlowBackend(t)
	mw := newMW(t, b, spec{Timeout: 10 * time.Second, Rules: afterRules(t)})
	middleware.LimitAfter(mw, 1, 1)
	h := mw.Handler(ok)
	serveAsync := func() chan int {
		ch := make(chan int, 1)
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req("GET", "/", "203.0.113.7:1", "X-User", "alice"))
			ch <- w.Code
		}()
		return ch
	}
	returned := func(ch chan int) bool {
		select {
		case code := <-ch:
			if code != http.StatusOK {
				t.Errorf("status %d", code)
			}
			return true
		default:
			return false
		}
	}
	first := serveAsync()
	waitFor(t, "the first request to return, its release with the worker", func() bool { return returned(first) })
	waitFor(t, "the worker at the gate", func() bool { return b.waiting.Load() == 1 })
	second := serveAsync()
	waitFor(t, "the second request to return, its work queued", func() bool { return returned(second) })
	third := serveAsync()
	waitFor(t, "the third request making its own release", func() bool { return b.waiting.Load() == 2 })
	if returned(third) {
		t.Fatal("the third request returned before its release was made")
	}
	close(b.gate)
	if code := <-third; code != http.StatusOK {
		t.Fatalf("third request: status %d", code)
	}
	waitFor(t, "the queue to empty", func() bool { return middleware.Pending(mw) == 0 })
	if leases, refunds := b.once(t); leases != 3 || refunds != 3 {
		t.Fatalf("%d leases released, %d reservations refunded, want 3 and 3", leases, refunds)
	}
	if slots, units := free(t, b); slots != 10 || units != 1000 {
		t.Fatalf("%d slots free, %d units left, want 10 and 1000", slots, units)
	}
}

// TestWorkAfterResponseClose: Close returns once the queued work is
// done, so nothing queued is lost at shutdown; after Close, a request
// makes its own release and refund before its ServeHTTP returns.
func TestWorkAfterResponseClose(t *testing.T) {
	b := newSlowBackend(t)
	mw := newMW(t, b, spec{Timeout: 10 * time.Second, Rules: afterRules(t)})
	middleware.LimitAfter(mw, 1, 8)
	h := mw.Handler(ok)
	for range 5 {
		if w := serve(h, req("GET", "/", "203.0.113.7:1", "X-User", "alice")); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	if n := middleware.Pending(mw); n != 5 {
		t.Fatalf("%d requests' work pending, want 5 (one at the gate, four queued)", n)
	}
	closed := make(chan struct{})
	go func() {
		mw.Close()
		close(closed)
	}()
	waitFor(t, "the worker at the gate", func() bool { return b.waiting.Load() == 1 })
	select {
	case <-closed:
		t.Fatal("Close returned with work pending")
	default:
	}
	close(b.gate)
	<-closed
	if leases, refunds := b.once(t); leases != 5 || refunds != 5 {
		t.Fatalf("after Close: %d leases released, %d reservations refunded, want 5 and 5", leases, refunds)
	}
	if w := serve(h, req("GET", "/", "203.0.113.7:1", "X-User", "alice")); w.Code != http.StatusOK {
		t.Fatalf("after Close: status %d", w.Code)
	}
	if leases, refunds := b.once(t); leases != 6 || refunds != 6 {
		t.Fatalf("a request after Close: %d leases released, %d reservations refunded, want 6 and 6", leases, refunds)
	}
	if slots, units := free(t, b); slots != 10 || units != 1000 {
		t.Fatalf("%d slots free, %d units left, want 10 and 1000", slots, units)
	}
}

// TestWorkAfterResponseErrors: a release and a refund that fail after
// the response (the backend down) reach Config.OnSettleError with their
// request, in one error that joins them (one Settle). Before, a failed
// release was only logged.
func TestWorkAfterResponseErrors(t *testing.T) {
	b := newSlowBackend(t)
	down := errors.New("backend down")
	b.err = down
	close(b.gate)
	var mu sync.Mutex
	var paths []string
	var errs []error
	mw := newMW(t, b, spec{Timeout: 10 * time.Second, Rules: afterRules(t), OnSettleError: func(r *http.Request, err error) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		errs = append(errs, err)
		mu.Unlock()
	}})
	if w := serve(mw.Handler(ok), req("GET", "/export", "203.0.113.7:1", "X-User", "alice")); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	mw.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 || !slices.Equal(paths, []string{"/export"}) {
		t.Fatalf("OnSettleError heard %v of %q, want one error of /export", errs, paths)
	}
	joined, ok := errs[0].(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 2 {
		t.Fatalf("OnSettleError heard %v, want the release's and the refund's errors joined", errs[0])
	}
	for _, err := range joined.Unwrap() {
		if !errors.Is(err, down) {
			t.Fatalf("OnSettleError heard %v, want the backend's error", err)
		}
	}
}

// TestWorkAfterResponseExact: 32 goroutines × 20 requests, a tenth of
// whose handlers panic, through two workers and a queue of 4 (so most
// requests find it full and make their own): every slot taken is
// released exactly once, every unit reserved is given back exactly once
// (a panic before any status is a 500, which failedLogins does not
// charge), and at the end the store is back to full.
func TestWorkAfterResponseExact(t *testing.T) {
	b := newSlowBackend(t)
	close(b.gate)
	mw := newMW(t, b, spec{Timeout: 10 * time.Second, Rules: afterRules(t)})
	middleware.LimitAfter(mw, 2, 4)
	var entered atomic.Int64
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		time.Sleep(200 * time.Microsecond) // hold the slot a moment
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "ok")
	}))
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				path := "/"
				if (g*20+i)%10 == 0 {
					path = "/panic"
				}
				func() {
					defer func() {
						if v := recover(); v != nil && v != http.ErrAbortHandler {
							t.Errorf("panic %v", v)
						}
					}()
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req("GET", path, "203.0.113.7:1", "X-User", "alice"))
					switch w.Code {
					case http.StatusOK:
						served.Add(1)
					case http.StatusTooManyRequests:
						refused.Add(1)
					default:
						t.Errorf("status %d", w.Code)
					}
				}()
			}
		})
	}
	wg.Wait()
	mw.Close()
	leases, refunds := b.once(t)
	t.Logf("%d served, %d refused (10 slots), %d let in", served.Load(), refused.Load(), entered.Load())
	if n := int(entered.Load()); leases != n || refunds != n {
		t.Fatalf("%d leases released, %d reservations refunded, want one each for the %d requests let in", leases, refunds, n)
	}
	if slots, units := free(t, b); slots != 10 || units != 1000 {
		t.Fatalf("%d slots free, %d units left, want 10 and 1000", slots, units)
	}
}

// luaScript is the script package lua builds under name.
func luaScript(name string) string {
	s, _ := lua.Script(name)
	return s
}
