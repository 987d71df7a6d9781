package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/engine"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// A gRPC service limited per client address (2 calls a minute here) and
// per API key, with a real server and client on loopback. A call without
// an API key is Unauthenticated; a denied call is ResourceExhausted, its
// trailer metadata telling when to retry. The clock is fixed here so the
// output is exact; a service leaves Now unset.
func Example() {
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	mem, err := memstore.New(memstore.Config{Now: now})
	if err != nil {
		panic(err)
	}
	e, err := engine.New(mem, engine.Config{Rules: []engine.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)},
		{Name: "key", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	peer, err := grpclimit.Peer(keyfunc.IPConfig{}) // trust no proxy
	if err != nil {
		panic(err)
	}
	limiter, err := grpclimit.New(e, grpclimit.Config{
		Keys:           []grpclimit.Func{peer, grpclimit.Metadata("x-api-key")},
		MissingKeyCode: codes.Unauthenticated,
		Now:            now,
	})
	if err != nil {
		panic(err)
	}

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limiter.Unary), grpc.ChainStreamInterceptor(limiter.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println("no API key:", status.Code(err))

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	for range 3 {
		var header, trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			fmt.Println(status.Code(err), "retry-after", trailer.Get("retry-after"))
			continue
		}
		fmt.Println("OK, remaining", header.Get("x-ratelimit-remaining"))
	}
	// Output:
	// no API key: Unauthenticated
	// OK, remaining [1]
	// OK, remaining [0]
	// ResourceExhausted retry-after [30]
}
