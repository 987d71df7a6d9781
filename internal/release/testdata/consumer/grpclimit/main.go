// The gRPC server interceptors, with a real server and client on loopback.
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

func main() {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		fail(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "key", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)},
	}})
	if err != nil {
		fail(err)
	}
	defer e.Close()
	limiter, err := grpclimit.New(e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Metadata("x-api-key")}})
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limiter.Unary))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-1")
	var got []codes.Code
	for range 3 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, status.Code(err))
	}
	want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}
	for i := range want {
		if got[i] != want[i] {
			fail(fmt.Errorf("call %d: %v, want %v", i+1, got[i], want[i]))
		}
	}
	fmt.Println("ok: gRPC interceptor: OK, OK, ResourceExhausted")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
