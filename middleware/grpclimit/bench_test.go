package grpclimit_test

import (
	"context"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/engine"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// benchLimiter keys two generous rules by peer and API key, on memstore.
func benchLimiter(b *testing.B) *grpclimit.Limiter {
	e := newEngine(b, newMemory(b), engine.Config{Rules: []engine.Rule{
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
