package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
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
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
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
	defer limiter.Close() // after the server has stopped: deferred calls run in reverse

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

// Key funcs compose as in keyfunc: one bucket per method and client
// (Join), and the API key when there is one, else the client address
// (Or). Behind a load balancer, Peer reads x-forwarded-for, but only from
// the proxies it trusts.
func ExampleJoin() {
	proxies, err := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	client, err := grpclimit.Peer(keyfunc.IPConfig{TrustedProxies: proxies})
	if err != nil {
		panic(err)
	}
	perMethod := grpclimit.Join(grpclimit.Method(), client)
	keyOrClient := grpclimit.Or(grpclimit.Join(grpclimit.Const("key"), grpclimit.Metadata("x-api-key")), client)

	// A call through the load balancer 10.0.0.2, and one straight from a
	// client that forges the forwarding metadata.
	viaProxy := callFrom("10.0.0.2:40000", "x-forwarded-for", "198.51.100.7")
	forged := callFrom("203.0.113.9:40000", "x-forwarded-for", "198.51.100.7", "x-api-key", "k-123")
	for _, ctx := range []context.Context{viaProxy, forged} {
		a, _ := perMethod(ctx, "/shop.Orders/Create")
		b, _ := keyOrClient(ctx, "/shop.Orders/Create")
		fmt.Println(a, "|", b)
	}
	// Output:
	// /shop.Orders/Create:198.51.100.7 | 198.51.100.7
	// /shop.Orders/Create:203.0.113.9 | key:k-123
}

// callFrom returns the context of a call from the TCP peer addr carrying
// the metadata pairs kv, as a server sees it.
func callFrom(addr string, kv ...string) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))})
	return metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
}

// Decide decides a call as the interceptors would, for code that limits
// inside a handler: here a method that takes one unit per call from a
// per-client budget of 1 a minute.
func ExampleInterceptor_Decide() {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "export", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	client, err := grpclimit.Peer(keyfunc.IPConfig{})
	if err != nil {
		panic(err)
	}
	l, err := grpclimit.New(e, grpclimit.Config{Keys: []grpclimit.Func{client}})
	if err != nil {
		panic(err)
	}
	ctx := callFrom("203.0.113.9:40000")
	for range 2 {
		d, err := l.Decide(ctx, "/reports.Reports/Export")
		fmt.Println(d.Allowed, d.Rules[0].Key, status.Code(err))
	}
	// Output:
	// true rate:export:gcra:{203.0.113.9} OK
	// false rate:export:gcra:{203.0.113.9} ResourceExhausted
}
