package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// TestConcurrencyReleasedAfterCall: a concurrency rule's slot is held
// while the handler runs and freed when it returns, error or not; a call
// beyond the limit meanwhile is ResourceExhausted.
func TestConcurrencyReleasedAfterCall(t *testing.T) {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "calls", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(1, time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := grpclimit.New(e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Metadata("x-tenant")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := callCtx("", "x-tenant", "acme")
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/Export"}
	for range 3 {
		_, err := l.Unary(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
			_, err := l.Unary(ctx, nil, info, func(context.Context, any) (any, error) { return nil, nil })
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("a second call in flight: %v, want ResourceExhausted", err)
			}
			return nil, status.Error(codes.Internal, "export failed")
		})
		if status.Code(err) != codes.Internal {
			t.Fatalf("Unary = %v, want the handler's error", err)
		}
	}
	if p := e.Peek(context.Background(), "acme"); p.Rules[0].Result.Remaining != 1 {
		t.Fatalf("after 3 calls: %d slots free, want 1", p.Rules[0].Result.Remaining)
	}
}
