package grpclimit_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// gated returns an Interceptor with one concurrency rule of slots slots per
// API key on a real redis-server reached through a proxy that holds the
// reply to the release script, and a client connection to a real server
// on loopback running its interceptors.
func gated(t testing.TB, slots int64) (*redistest.GateProxy, *grpclimit.Interceptor, *grpc.ClientConn) {
	t.Helper()
	srv := redistest.Require(t)
	// Loaded before, so that the store sends it by its SHA.
	src, _ := lua.Script("release")
	sha, err := srv.Client(t).ScriptLoad(t.Context(), src).Result()
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
	e := newEngine(t, b, redlimit.Config{Prefix: prefix(t), Timeout: 10 * time.Second, Rules: []redlimit.Rule{
		{Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(slots, 30*time.Second)},
	}})
	l := newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Metadata("x-api-key")}})
	return p, l, dial(t, l)
}

// BenchmarkReleaseDelayed: unary and streaming calls over a real server
// on loopback, with a concurrency rule on a real redis-server behind a
// proxy that delays the release script's reply by 80 ms: the time until
// the client has the response (a unary call's reply, a stream's end),
// as its median (ms-median) and maximum (ms-max). Run it with
// -benchtime=20x.
func BenchmarkReleaseDelayed(b *testing.B) {
	p, _, conn := gated(b, 10_000)
	p.Delay(80 * time.Millisecond)
	health := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	if code, _, _ := check(ctx, health); code != codes.OK { // the connection made, not timed
		b.Fatalf("first call: %v", code)
	}
	for _, call := range []struct {
		name string
		do   func() codes.Code
	}{
		{"unary", func() codes.Code { code, _, _ := check(ctx, health); return code }},
		{"stream", func() codes.Code { return once(ctx, conn) }},
	} {
		b.Run("call="+call.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if code := call.do(); code != codes.OK {
					b.Fatalf("%s call: %v", call.name, code)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/1e6, "ms-median")
			b.ReportMetric(float64(took[len(took)-1])/1e6, "ms-max")
		})
	}
}

// TestReleaseAfterResponse: the release of a concurrency rule's slot is
// made after the call, off its path, for a unary call and for a stream.
// A real redis-server sits behind a proxy that holds the reply to the
// release script until the test opens its gate, which it does once the
// client, through a real gRPC server on loopback, has the reply (a
// stream: its end, the status) or after 5s. The client must have it
// while the release's reply is held; then the slot comes back: a limit
// of 1 lets the next call in. Before, the interceptor waited for the
// release (the engine's Timeout, 10s here; 100ms by default), and the
// client got the reply only after it.
func TestReleaseAfterResponse(t *testing.T) {
	for _, call := range []string{"unary", "stream"} {
		t.Run(call, func(t *testing.T) {
			p, l, conn := gated(t, 1)
			health := healthpb.NewHealthClient(conn)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
			do := func() codes.Code {
				if call == "unary" {
					code, _, _ := check(ctx, health)
					return code
				}
				return once(ctx, conn)
			}

			got := make(chan struct{})
			go func() {
				select {
				case <-got:
				case <-time.After(5 * time.Second): // the reply waits for the release
				}
				p.Open()
			}()
			start := time.Now()
			code := do()
			elapsed := time.Since(start)
			p.Event(call + " " + code.String())
			close(got)
			t.Logf("the client had the %s reply %v after its call", call, elapsed)

			waitFor(t, "the release after the call", func() bool { return grpclimit.Pending(l) == 0 })
			if log := p.Events(); !slices.Equal(log, []string{call + " OK", "reply"}) {
				t.Fatalf("events %q, want the reply to the call before the release script's", log)
			}
			// The slot is back: the limit of 1 lets one more in.
			if code := do(); code != codes.OK {
				t.Fatalf("second call: %v, want OK: the first's release was lost", code)
			}
		})
	}
}

// waitFor waits until cond holds, failing t after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// slowLeaser is a backend the Interceptor must treat as remote: it forwards
// to a memstore Store but carries no traits (not in process). Its releases
// wait at gate (or fail with err), and it counts each lease released.
type slowLeaser struct {
	mem  *memstore.Store
	gate chan struct{}
	err  error // what Release returns, when set, without calling mem

	waiting  atomic.Int64 // releases at the gate
	mu       sync.Mutex
	released map[uint64]int
}

func newSlowLeaser(t *testing.T) *slowLeaser {
	return &slowLeaser{mem: newMemory(t), gate: make(chan struct{}), released: map[uint64]int{}}
}

func (b *slowLeaser) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	return b.mem.Allow(ctx, checks, results)
}

func (b *slowLeaser) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	return b.mem.Renew(ctx, leases, held)
}

func (b *slowLeaser) Release(ctx context.Context, leases []algorithms.Lease) error {
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	select {
	case <-b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return b.err
	}
	b.mu.Lock()
	for _, l := range leases {
		b.released[l.ID]++
	}
	b.mu.Unlock()
	return b.mem.Release(ctx, leases)
}

// once fails t unless each lease was released exactly once, and returns
// how many were.
func (b *slowLeaser) once(t *testing.T) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, n := range b.released {
		if n != 1 {
			t.Errorf("lease %d released %d times", id, n)
		}
	}
	return len(b.released)
}

// slowLimiter returns an Interceptor configured by cfg (its Keys set, its
// Logger quiet unless set) on an engine of b with a concurrency rule of
// 10 slots per tenant (the x-tenant metadata), and the engine.
func slowLimiter(t *testing.T, b algorithms.Backend, cfg grpclimit.Config) (*grpclimit.Interceptor, *redlimit.Limiter) {
	t.Helper()
	e := newEngine(t, b, redlimit.Config{Timeout: 10 * time.Second, Rules: []redlimit.Rule{
		{Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(10, 30*time.Second)},
	}})
	cfg.Keys = []grpclimit.Func{grpclimit.Metadata("x-tenant")}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	return newLimiter(t, e, cfg), e
}

// free returns acme's free slots.
func free(t *testing.T, e *redlimit.Limiter) int64 {
	t.Helper()
	return e.Peek(t.Context(), "acme").Rules[0].Result.Remaining
}

// intercept calls l's unary or stream interceptor, as a server would,
// with handler run inside.
func intercept(l *grpclimit.Interceptor, stream bool, ctx context.Context, handler func() error) error {
	if stream {
		info := &grpc.StreamServerInfo{FullMethod: watchMethod, IsServerStream: true}
		return l.Stream(nil, benchStream{ctx: ctx}, info, func(any, grpc.ServerStream) error { return handler() })
	}
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	_, err := l.Unary(ctx, nil, info, func(context.Context, any) (any, error) { return nil, handler() })
	return err
}

// tenantCtx is the context of a call of acme's inside a server.
func tenantCtx() context.Context {
	return grpc.NewContextWithServerTransportStream(callCtx("203.0.113.7:5000", "x-tenant", "acme"), benchTransport{})
}

// TestReleaseQueueFull: with one worker and a queue of one, a third call
// whose release waits makes its own before its interceptor returns (the
// worker is busy, the queue full), and the Logger warns of it. Nothing
// is lost: every slot is released exactly once.
func TestReleaseQueueFull(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			b := newSlowLeaser(t)
			var logged strings.Builder
			var logMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
				logMu.Lock()
				defer logMu.Unlock()
				return logged.Write(p)
			}), nil))
			l, e := slowLimiter(t, b, grpclimit.Config{Logger: logger})
			grpclimit.LimitAfter(l, 1, 1)
			callAsync := func() chan error {
				ch := make(chan error, 1)
				go func() { ch <- intercept(l, stream, tenantCtx(), func() error { return nil }) }()
				return ch
			}
			returned := func(ch chan error) bool {
				select {
				case err := <-ch:
					if err != nil {
						t.Errorf("call: %v", err)
					}
					return true
				default:
					return false
				}
			}
			first := callAsync()
			waitFor(t, "the first call to return, its release with the worker", func() bool { return returned(first) })
			waitFor(t, "the worker at the gate", func() bool { return b.waiting.Load() == 1 })
			second := callAsync()
			waitFor(t, "the second call to return, its release queued", func() bool { return returned(second) })
			third := callAsync()
			waitFor(t, "the third call making its own release", func() bool { return b.waiting.Load() == 2 })
			if returned(third) {
				t.Fatal("the third call returned before its release was made")
			}
			close(b.gate)
			if err := <-third; err != nil {
				t.Fatalf("third call: %v", err)
			}
			waitFor(t, "the queue to empty", func() bool { return grpclimit.Pending(l) == 0 })
			if n := b.once(t); n != 3 {
				t.Fatalf("%d leases released, want 3", n)
			}
			if n := free(t, e); n != 10 {
				t.Fatalf("%d slots free, want 10", n)
			}
			logMu.Lock()
			defer logMu.Unlock()
			if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "calls=1 queue=1") {
				t.Fatalf("log %q, want a warning of 1 call releasing its own slots", logged.String())
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestReleaseClose: Close returns once the queued releases are made, so
// that none is lost at shutdown; after Close, a call makes its own
// release before its interceptor returns.
func TestReleaseClose(t *testing.T) {
	b := newSlowLeaser(t)
	l, e := slowLimiter(t, b, grpclimit.Config{})
	grpclimit.LimitAfter(l, 1, 8)
	for i := range 5 {
		if err := intercept(l, i%2 == 1, tenantCtx(), func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := grpclimit.Pending(l); n != 5 {
		t.Fatalf("%d calls' releases pending, want 5 (one at the gate, four queued)", n)
	}
	closed := make(chan struct{})
	go func() {
		l.Close()
		close(closed)
	}()
	waitFor(t, "the worker at the gate", func() bool { return b.waiting.Load() == 1 })
	select {
	case <-closed:
		t.Fatal("Close returned with releases pending")
	default:
	}
	close(b.gate)
	<-closed
	if n := b.once(t); n != 5 {
		t.Fatalf("after Close: %d leases released, want 5", n)
	}
	for _, stream := range []bool{false, true} {
		if err := intercept(l, stream, tenantCtx(), func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.once(t); n != 7 {
		t.Fatalf("two calls after Close: %d leases released, want 7: each call its own before returning", n)
	}
	if n := free(t, e); n != 10 {
		t.Fatalf("%d slots free, want 10", n)
	}
}

// TestReleaseErrors: a release that fails after the call (the backend
// down) reaches Config.OnReleaseError with the call's context and
// method, for a unary call and a stream; a panic of the hook is logged.
// Before, a failed release was only logged by the engine.
func TestReleaseErrors(t *testing.T) {
	b := newSlowLeaser(t)
	down := errors.New("backend down")
	b.err = down
	close(b.gate)
	type heard struct {
		method, tenant string
		err            error
	}
	var mu sync.Mutex
	var got []heard
	var logged atomic.Int64
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "OnReleaseError panicked") {
			logged.Add(1)
		}
		return len(p), nil
	}), nil))
	l, _ := slowLimiter(t, b, grpclimit.Config{Logger: logger, OnReleaseError: func(ctx context.Context, method string, err error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		got = append(got, heard{method, strings.Join(md.Get("x-tenant"), ","), err})
		n := len(got)
		mu.Unlock()
		if n == 3 {
			panic("hook")
		}
	}})
	for _, stream := range []bool{false, true, false} {
		if err := intercept(l, stream, tenantCtx(), func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	methods := make([]string, len(got))
	for i, h := range got {
		methods[i] = h.method
		if h.tenant != "acme" || !errors.Is(h.err, down) {
			t.Errorf("OnReleaseError heard %+v, want the backend's error with acme's context", h)
		}
	}
	slices.Sort(methods)
	if want := []string{checkMethod, checkMethod, watchMethod}; !slices.Equal(methods, want) {
		t.Fatalf("OnReleaseError heard of %q, want %q", methods, want)
	}
	if n := logged.Load(); n != 1 {
		t.Fatalf("%d panics of OnReleaseError logged, want 1", n)
	}
}

// TestReleaseExact: 32 goroutines × 20 calls, unary and streaming, a
// tenth of whose handlers panic, through two workers and a queue of 4
// (so that many calls find it full and release their own): every slot
// taken is released exactly once, and at the end every slot is free.
func TestReleaseExact(t *testing.T) {
	b := newSlowLeaser(t)
	close(b.gate)
	l, e := slowLimiter(t, b, grpclimit.Config{})
	grpclimit.LimitAfter(l, 2, 4)
	var entered, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				n := g*20 + i
				func() {
					defer func() {
						if v := recover(); v != nil && v != "handler" {
							t.Errorf("panic %v", v)
						}
					}()
					err := intercept(l, n%2 == 1, tenantCtx(), func() error {
						entered.Add(1)
						time.Sleep(200 * time.Microsecond) // hold the slot a moment
						if n%10 == 0 {
							panic("handler")
						}
						return nil
					})
					switch status.Code(err) {
					case codes.OK:
					case codes.ResourceExhausted:
						refused.Add(1)
					default:
						t.Errorf("call: %v", err)
					}
				}()
			}
		})
	}
	wg.Wait()
	l.Close()
	t.Logf("%d calls let in, %d refused (10 slots)", entered.Load(), refused.Load())
	if n, want := b.once(t), int(entered.Load()); n != want {
		t.Fatalf("%d leases released, want one for each of the %d calls let in", n, want)
	}
	if n := free(t, e); n != 10 {
		t.Fatalf("%d slots free, want 10", n)
	}
}

// TestReleaseInProcess: slots held on memstore are released at once,
// before the interceptor returns: with no worker to make a queued
// release, the slot is free when each call returns, and nothing is
// queued.
func TestReleaseInProcess(t *testing.T) {
	for _, stream := range []bool{false, true} {
		l, e := slowLimiter(t, newMemory(t), grpclimit.Config{})
		grpclimit.LimitAfter(l, 0, 8)
		for range 3 {
			if err := intercept(l, stream, tenantCtx(), func() error { return nil }); err != nil {
				t.Fatal(err)
			}
			if n, p := free(t, e), grpclimit.Pending(l); n != 10 || p != 0 {
				t.Fatalf("stream %v: %d slots free and %d releases queued when the call returned, want 10 and 0", stream, n, p)
			}
		}
	}
}
