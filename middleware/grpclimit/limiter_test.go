package grpclimit_test

import (
	"context"
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// check calls Check and returns its code, header and trailer metadata.
func check(ctx context.Context, c healthpb.HealthClient) (codes.Code, metadata.MD, metadata.MD) {
	var hdr, trl metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
	return status.Code(err), hdr, trl
}

// watch opens a Watch stream, reads its first message, and returns the
// code and the header and trailer metadata.
func watch(ctx context.Context, c healthpb.HealthClient) (codes.Code, metadata.MD, metadata.MD) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return status.Code(err), nil, nil
	}
	_, err = st.Recv()
	hdr, _ := st.Header()
	if err != nil {
		return status.Code(err), hdr, st.Trailer()
	}
	return codes.OK, hdr, nil
}

// rateMD returns the rate-limit keys of md, each key's values joined.
func rateMD(md metadata.MD) map[string]string {
	got := map[string]string{}
	for _, k := range []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after", "ratelimit-policy", "ratelimit"} {
		if v, ok := md[k]; ok {
			got[k] = strings.Join(v, "\n")
		}
	}
	return got
}

// TestExactCounts: 64 goroutines calling at once, unary and streaming,
// over a real gRPC server on loopback, on memstore and on a real
// redis-server: exactly the limit passes, every other call is
// ResourceExhausted.
func TestExactCounts(t *testing.T) {
	const limit, goroutines, perG = 100, 64, 4
	backends := map[string]func(t *testing.T) algorithms.Backend{
		"memstore": func(t *testing.T) algorithms.Backend { return newMemory(t) },
		"redis": func(t *testing.T) algorithms.Backend {
			b, err := redisstore.New(redistest.Require(t).Client(t), redisstore.Config{Now: fixed})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, newBackend(t), redlimit.Config{Prefix: prefix(t), Rules: []redlimit.Rule{
				{Name: "method", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(limit)},
			}})
			c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Method()}}))
			for _, call := range []struct {
				name string
				do   func(context.Context, healthpb.HealthClient) (codes.Code, metadata.MD, metadata.MD)
			}{{"unary", check}, {"stream", watch}} {
				var ok, exhausted, other atomic.Int64
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for range perG {
							switch code, _, _ := call.do(context.Background(), c); code {
							case codes.OK:
								ok.Add(1)
							case codes.ResourceExhausted:
								exhausted.Add(1)
							default:
								other.Add(1)
								t.Errorf("%s: code %v", call.name, code)
							}
						}
					})
				}
				wg.Wait()
				if ok.Load() != limit || exhausted.Load() != goroutines*perG-limit {
					t.Errorf("%s: %d OK, %d ResourceExhausted, %d other; want %d and %d", call.name, ok.Load(), exhausted.Load(), other.Load(), limit, goroutines*perG-limit)
				}
			}
		})
	}
}

// TestMetadata: an allowed call carries the state in its header metadata,
// a denied one in its trailer (a trailers-only response), exactly, for
// unary and streaming calls; headers.None sends none.
func TestMetadata(t *testing.T) {
	const epoch = 1_700_000_000
	for _, call := range []struct {
		name   string
		method string
		do     func(context.Context, healthpb.HealthClient) (codes.Code, metadata.MD, metadata.MD)
	}{{"unary", checkMethod, check}, {"stream", watchMethod, watch}} {
		t.Run(call.name, func(t *testing.T) {
			// GCRA 2/min: one unit every 30s, full after 60s.
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
				{Name: "client", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)},
			}})
			c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{grpclimit.Const("all")}}))
			steps := []struct {
				code     codes.Code
				hdr, trl map[string]string
			}{
				{codes.OK, map[string]string{"x-ratelimit-limit": "2", "x-ratelimit-remaining": "1", "x-ratelimit-reset": strconv.Itoa(epoch + 30)}, map[string]string{}},
				{codes.OK, map[string]string{"x-ratelimit-limit": "2", "x-ratelimit-remaining": "0", "x-ratelimit-reset": strconv.Itoa(epoch + 60)}, map[string]string{}},
				{codes.ResourceExhausted, map[string]string{}, map[string]string{"x-ratelimit-limit": "2", "x-ratelimit-remaining": "0", "x-ratelimit-reset": strconv.Itoa(epoch + 60), "retry-after": "30"}},
			}
			for i, st := range steps {
				code, hdr, trl := call.do(context.Background(), c)
				if code != st.code || !maps.Equal(rateMD(hdr), st.hdr) || !maps.Equal(rateMD(trl), st.trl) {
					t.Errorf("call %d: %v\n header %v\ntrailer %v\nwant %v\n header %v\ntrailer %v", i, code, rateMD(hdr), rateMD(trl), st.code, st.hdr, st.trl)
				}
			}
		})
	}

	t.Run("ietf and none", func(t *testing.T) {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
			{Name: "client", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)},
		}})
		keys := []grpclimit.Func{grpclimit.Const("all")}
		c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: keys, Metadata: headers.Writer{Style: headers.IETF}}))
		_, hdr, _ := check(context.Background(), c)
		want := map[string]string{"ratelimit-policy": `"client";q=2;w=60`, "ratelimit": `"client";r=1;t=30`}
		if got := rateMD(hdr); !maps.Equal(got, want) {
			t.Errorf("IETF header metadata %v, want %v", got, want)
		}
		c = serve(t, newLimiter(t, e, grpclimit.Config{Keys: keys, Metadata: headers.Writer{Style: headers.None}}))
		for range 2 {
			code, hdr, trl := check(context.Background(), c)
			if len(rateMD(hdr)) != 0 || len(rateMD(trl)) != 0 {
				t.Errorf("headers.None: %v with header %v, trailer %v", code, hdr, trl)
			}
		}
	})
}

// TestMissingKey: a call without the metadata key of a DenyMissingKey rule
// is refused with Config.MissingKeyCode (ResourceExhausted by default)
// and no metadata; a SkipMissingKey rule is left out.
func TestMissingKey(t *testing.T) {
	rules := []redlimit.Rule{
		{Name: "key", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)},
		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1), MissingKey: redlimit.SkipMissingKey},
	}
	keys := []grpclimit.Func{grpclimit.Metadata("X-API-Key"), grpclimit.Metadata("x-user")}
	for _, tc := range []struct {
		cfgCode, want codes.Code
	}{{0, codes.ResourceExhausted}, {codes.Unauthenticated, codes.Unauthenticated}} {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
		c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: keys, MissingKeyCode: tc.cfgCode}))
		code, hdr, trl := check(context.Background(), c)
		if code != tc.want || len(rateMD(hdr))+len(rateMD(trl)) != 0 {
			t.Errorf("MissingKeyCode %v, no API key: %v, header %v, trailer %v; want %v and no metadata", tc.cfgCode, code, hdr, trl, tc.want)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1")
		for i, want := range []codes.Code{codes.OK, codes.OK, codes.OK} {
			if code, _, _ := check(ctx, c); code != want {
				t.Errorf("with an API key, no user, call %d: %v, want %v (the user rule is skipped)", i, code, want)
			}
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "x-user", "u1")
		for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
			if code, _, _ := check(ctx, c); code != want {
				t.Errorf("with an API key and a user, call %d: %v, want %v", i, code, want)
			}
		}
	}
}

// failing is a backend that always fails.
type failing struct{}

func (failing) Allow(context.Context, []algorithms.Check, []algorithms.Result) error {
	return errors.New("backend down")
}

// TestFailClosed: a call the engine cannot decide under FailClosed is
// Unavailable, without the backend's error; under FailOpen it passes.
func TestFailClosed(t *testing.T) {
	rules := []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}}
	keys := []grpclimit.Func{grpclimit.Const("x")}
	e := newEngine(t, failing{}, redlimit.Config{Rules: rules, OnError: redlimit.FailClosed, NoDenyCache: true})
	c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: keys}))
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if s, _ := status.FromError(err); s.Code() != codes.Unavailable || strings.Contains(s.Message(), "backend down") {
		t.Errorf("FailClosed: %v, want Unavailable without the backend's error", err)
	}
	if code, _, _ := watch(context.Background(), c); code != codes.Unavailable {
		t.Errorf("FailClosed stream: %v, want Unavailable", code)
	}
	e = newEngine(t, failing{}, redlimit.Config{Rules: rules, OnError: redlimit.FailOpen, NoDenyCache: true})
	c = serve(t, newLimiter(t, e, grpclimit.Config{Keys: keys}))
	if code, _, _ := check(context.Background(), c); code != codes.OK {
		t.Errorf("FailOpen: %v, want OK", code)
	}
}

// TestExempt: an exempt call is neither decided nor charged.
func TestExempt(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "all", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}}})
	l := newLimiter(t, e, grpclimit.Config{
		Keys:   []grpclimit.Func{grpclimit.Const("x")},
		Exempt: func(_ context.Context, method string) bool { return method == watchMethod },
	})
	c := serve(t, l)
	for i := range 3 {
		if code, hdr, _ := watch(context.Background(), c); code != codes.OK || len(rateMD(hdr)) != 0 {
			t.Fatalf("exempt Watch %d: %v, header %v", i, code, hdr)
		}
	}
	if code, _, _ := check(context.Background(), c); code != codes.OK {
		t.Fatalf("first Check after exempt calls: %v (they must not be charged)", code)
	}
	if code, _, _ := check(context.Background(), c); code != codes.ResourceExhausted {
		t.Fatalf("second Check: %v", code)
	}
	d, err := l.Decide(context.Background(), checkMethod)
	if d.Allowed || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Decide: allowed %v, %v", d.Allowed, err)
	}
	if l.Limiter() != e {
		t.Fatal("Limiter() is not the limiter given to New")
	}
}

// TestNewErrors: every invalid configuration is a ConfigError naming the
// field.
func TestNewErrors(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
		{Name: "key", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
	}})
	m := grpclimit.Method()
	for _, tc := range []struct {
		name  string
		e     *redlimit.Limiter
		cfg   grpclimit.Config
		field string
	}{
		{"nil engine", nil, grpclimit.Config{Keys: []grpclimit.Func{m, m}}, "engine"},
		{"too few keys", e, grpclimit.Config{Keys: []grpclimit.Func{m}}, "Config.Keys"},
		{"nil key", e, grpclimit.Config{Keys: []grpclimit.Func{m, nil}}, "Config.Keys[1]"},
		{"style", e, grpclimit.Config{Keys: []grpclimit.Func{m, m}, Metadata: headers.Writer{Style: 9}}, "headers.Writer.Style"},
		{"code", e, grpclimit.Config{Keys: []grpclimit.Func{m, m}, MissingKeyCode: 17}, "Config.MissingKeyCode"},
	} {
		_, err := grpclimit.New(tc.e, tc.cfg)
		var ce *algorithms.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want a ConfigError on %s", tc.name, err, tc.field)
		}
	}
	_, err := grpclimit.New(e, grpclimit.Config{Keys: []grpclimit.Func{m}})
	if want := `redlimit: Config.Keys must hold one Func per rule of the engine, in order (ip, key): want 2, got 1`; err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := grpclimit.Peer(keyfunc.IPConfig{IPv4Prefix: 40}); !errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Errorf("Peer with an invalid IPConfig: %v", err)
	}
}

// TestBufconn: over an in-memory bufconn listener the peer has no IP
// address: a Peer rule finds no key and its MissingKey applies (denied,
// or skipped so that the method rule still limits).
func TestBufconn(t *testing.T) {
	peerFn, err := grpclimit.Peer(keyfunc.IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		missing redlimit.MissingKey
		want    []codes.Code
	}{
		{redlimit.DenyMissingKey, []codes.Code{codes.Unauthenticated, codes.Unauthenticated}},
		{redlimit.SkipMissingKey, []codes.Code{codes.OK, codes.ResourceExhausted}},
	} {
		e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
			{Name: "peer", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10), MissingKey: tc.missing},
			{Name: "method", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
		}})
		l := newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{peerFn, grpclimit.Method()}, MissingKeyCode: codes.Unauthenticated})
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(l.Unary))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		conn, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := healthpb.NewHealthClient(conn)
		for i, want := range tc.want {
			if code, _, _ := check(context.Background(), c); code != want {
				t.Errorf("MissingKey %v, call %d: %v, want %v", tc.missing, i, code, want)
			}
		}
	}
}
