package grpclimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// benchLimiter keys two generous rules by peer and API key, on memstore.
func benchLimiter(b testing.TB) *grpclimit.Interceptor {
	e := newEngine(b, newMemory(b), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "peer", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 30)},
		{Name: "key", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 30)},
	}})
	peerFn, err := grpclimit.Peer(keyfunc.IPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return newLimiter(b, e, grpclimit.Config{Keys: []grpclimit.Func{peerFn, grpclimit.Metadata("x-api-key")}})
}

// BenchmarkDecide: the keys, the decision and its copy, without the
// network or the metadata.
func BenchmarkDecide(b *testing.B) {
	l := benchLimiter(b)
	ctx := callCtx("203.0.113.7:5000", "x-api-key", "k-123")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Decide(ctx, checkMethod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopback: unary calls over a real server on loopback, with and
// without the interceptor: the difference is what limiting adds to a
// call.
func BenchmarkLoopback(b *testing.B) {
	for _, limited := range []bool{false, true} {
		name := map[bool]string{false: "interceptor=none", true: "interceptor=grpclimit"}[limited]
		b.Run(name, func(b *testing.B) {
			var c healthpb.HealthClient
			if limited {
				c = serve(b, benchLimiter(b))
			} else {
				c = serve(b, nil)
			}
			out := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Check(out, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConcurrency: the interceptors called directly (no network)
// with a concurrency rule, its slot taken, renewed by a timer and
// released, on memstore and on a real redis-server: the allocations of a
// call, the release included (on Redis, made by a worker after the
// interceptor returned).
func BenchmarkConcurrency(b *testing.B) {
	rules := []redlimit.Rule{{Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(10_000, 30*time.Second)}}
	backends := []struct {
		name string
		new  func(b *testing.B) algorithms.Backend
	}{
		{"memory", func(b *testing.B) algorithms.Backend { return newMemory(b) }},
		{"redis", func(b *testing.B) algorithms.Backend {
			rb, err := redisstore.New(redistest.Require(b).Client(b), redisstore.Config{})
			if err != nil {
				b.Fatal(err)
			}
			return rb
		}},
	}
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := newEngine(b, be.new(b), redlimit.Config{Prefix: "bench" + strconv.FormatInt(time.Now().UnixNano(), 36), Timeout: time.Second, Rules: rules})
			l := newLimiter(b, e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Metadata("x-api-key")}})
			ctx := grpc.NewContextWithServerTransportStream(callCtx("203.0.113.7:5000", "x-api-key", "k-123"), benchTransport{})
			b.Run("call=unary", func(b *testing.B) {
				info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
				handler := func(context.Context, any) (any, error) { return nil, nil }
				b.ReportAllocs()
				for b.Loop() {
					if _, err := l.Unary(ctx, nil, info, handler); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("call=stream", func(b *testing.B) {
				info := &grpc.StreamServerInfo{FullMethod: watchMethod, IsServerStream: true}
				ss := benchStream{ctx: ctx}
				handler := func(any, grpc.ServerStream) error { return nil }
				b.ReportAllocs()
				for b.Loop() {
					if err := l.Stream(nil, ss, info, handler); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchTransport is the stream of a unary call outside a server, for
// grpc.SetHeader: it drops the metadata.
type benchTransport struct{}

func (benchTransport) Method() string                  { return checkMethod }
func (benchTransport) SetHeader(md metadata.MD) error  { return nil }
func (benchTransport) SendHeader(md metadata.MD) error { return nil }
func (benchTransport) SetTrailer(md metadata.MD) error { return nil }

// benchStream is a server stream outside a server: it drops the metadata.
type benchStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s benchStream) Context() context.Context       { return s.ctx }
func (s benchStream) SetHeader(md metadata.MD) error { return nil }
func (s benchStream) SetTrailer(md metadata.MD)      {}

// TestInterceptorAllocs enforces the allocation budget of an allowed call
// through each interceptor on memstore, outside a server, as measured: 8
// for two GCRA rules, 22 for one concurrency rule (its slot taken, a
// renewal timer, and its release, which on memstore is made at once on
// the call's goroutine, so it is counted here); a stream costs one more.
// On a redis-server the release is made by a worker after the call, and
// costs what it cost when the call made it (BenchmarkConcurrency).
func TestInterceptorAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	concurrency := func(t *testing.T) *grpclimit.Interceptor {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(10_000, 30*time.Second)}}})
		return newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Metadata("x-api-key")}})
	}
	for _, tt := range []struct {
		name    string
		limiter func(t *testing.T) *grpclimit.Interceptor
		unary   float64
		stream  float64
	}{
		{"rules=2", func(t *testing.T) *grpclimit.Interceptor { return benchLimiter(t) }, 8, 9},
		{"concurrency", concurrency, 22, 23},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.limiter(t)
			ctx := grpc.NewContextWithServerTransportStream(callCtx("203.0.113.7:5000", "x-api-key", "k-123"), benchTransport{})
			uinfo := &grpc.UnaryServerInfo{FullMethod: checkMethod}
			sinfo := &grpc.StreamServerInfo{FullMethod: watchMethod, IsServerStream: true}
			ss := benchStream{ctx: ctx}
			unary := func() {
				if _, err := l.Unary(ctx, nil, uinfo, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
					t.Fatal(err)
				}
			}
			stream := func() {
				if err := l.Stream(nil, ss, sinfo, func(any, grpc.ServerStream) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				name   string
				call   func()
				budget float64
			}{{"unary", unary, tt.unary}, {"stream", stream, tt.stream}} {
				c.call()
				if got := testing.AllocsPerRun(1000, c.call); got > c.budget {
					t.Errorf("%s: %v allocations per call, budget %v", c.name, got, c.budget)
				} else if got < c.budget {
					t.Logf("%s: %v allocations per call, under the budget of %v: lower the budget", c.name, got, c.budget)
				}
			}
		})
	}
}
