package grpclimit_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// TestMain starts the shared redis-server of the real-Redis tests (the
// redlimit module's internal/redistest, reachable from this nested module
// through its import path): without redis-server they skip, except in CI.
func TestMain(m *testing.M) {
	redis.SetLogger(discardRedisLog{})
	os.Exit(redistest.Main(m))
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// t0 is the fixed time of the tests: a whole second.
var t0 = time.Unix(1_700_000_000, 0)

func fixed() time.Time { return t0 }

var quiet = slog.New(slog.DiscardHandler)

// The test service is grpc's own health service: Check is a unary method,
// Watch a server stream.
const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// newEngine returns an engine of rules on b, closed when t ends.
func newEngine(t testing.TB, b algorithms.Backend, cfg redlimit.Config) *redlimit.Limiter {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	e, err := redlimit.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func newMemory(t testing.TB) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newLimiter(t testing.TB, e *redlimit.Limiter, cfg grpclimit.Config) *grpclimit.Interceptor {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = fixed
	}
	l, err := grpclimit.New(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve starts a real gRPC server with l's interceptors, the health
// service and the once service on a loopback TCP listener, and returns a
// health client connected to it. Both stop when t ends. A nil l serves
// without interceptors.
func serve(t testing.TB, l *grpclimit.Interceptor) healthpb.HealthClient {
	t.Helper()
	return healthpb.NewHealthClient(dial(t, l))
}

// onceMethod is a server stream that ends: its handler reads one
// request, sends one message and returns, so that the client sees the
// stream's end (its status) once the interceptors have returned.
// Health's Watch runs until the client goes.
const onceMethod = "/redlimit.test.Once/Stream"

var onceService = grpc.ServiceDesc{
	ServiceName: "redlimit.test.Once",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			var req healthpb.HealthCheckRequest
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			return ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
		},
	}},
}

// once calls onceMethod on conn and returns the stream's status code
// once the client has its end.
func once(ctx context.Context, conn *grpc.ClientConn) codes.Code {
	st, err := conn.NewStream(ctx, &onceService.Streams[0], onceMethod)
	if err != nil {
		return status.Code(err)
	}
	if err := st.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
		return status.Code(err)
	}
	if err := st.CloseSend(); err != nil {
		return status.Code(err)
	}
	for {
		var resp healthpb.HealthCheckResponse
		if err := st.RecvMsg(&resp); err == io.EOF {
			return codes.OK
		} else if err != nil {
			return status.Code(err)
		}
	}
}

// dial starts the server of serve and returns a connection to it.
func dial(t testing.TB, l *grpclimit.Interceptor) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if l != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(l.Unary), grpc.ChainStreamInterceptor(l.Stream))
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	srv.RegisterService(&onceService, struct{}{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// prefix is a key prefix unique to t, for tests that share a redis-server.
func prefix(t testing.TB) string {
	return strings.NewReplacer("/", ".", ":", "").Replace(strings.TrimSuffix(redistest.Prefix(t), ":"))
}
