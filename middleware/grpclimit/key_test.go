package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/grpclimit"
)

// callCtx returns the context of an incoming call from remote (an
// "ip:port", or "" for none) with metadata pairs.
func callCtx(remote string, kv ...string) context.Context {
	ctx := context.Background()
	if remote != "" {
		ap := netip.MustParseAddrPort(remote)
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: net.TCPAddrFromAddrPort(ap)})
	}
	if len(kv) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
	}
	return ctx
}

func trusted(t *testing.T, header string, cidrs ...string) grpclimit.Func {
	t.Helper()
	p, err := keyfunc.ParseTrustedProxies(cidrs...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := grpclimit.Peer(keyfunc.IPConfig{TrustedProxies: p, Header: header})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPeer: the client address as keyfunc.IP finds it, the forwarding
// metadata believed only from a trusted proxy and walked from the right.
func TestPeer(t *testing.T) {
	direct, err := grpclimit.Peer(keyfunc.IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	proxied := trusted(t, "", "10.0.0.0/8")
	realIP := trusted(t, "X-Real-IP", "10.0.0.0/8")
	huge := strings.Repeat("6.6.6.6, ", 100_000) // 900 KB
	tests := []struct {
		name string
		fn   grpclimit.Func
		ctx  context.Context
		want string // "" for ErrNoKey
	}{
		{"direct", direct, callCtx("203.0.113.7:5000"), "203.0.113.7"},
		{"direct ipv6 /64", direct, callCtx("[2001:db8:1:2:3::9]:5000"), "2001:db8:1:2::/64"},
		{"direct ignores forged xff", direct, callCtx("203.0.113.7:5000", "x-forwarded-for", "1.2.3.4"), "203.0.113.7"},
		{"untrusted peer, forged xff", proxied, callCtx("203.0.113.7:5000", "x-forwarded-for", "10.1.1.1"), "203.0.113.7"},
		{"untrusted peer, huge forged xff", proxied, callCtx("203.0.113.7:5000", "x-forwarded-for", huge), "203.0.113.7"},
		{"trusted proxy", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", "198.51.100.9"), "198.51.100.9"},
		{"trusted proxy, client-written left part", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", "1.2.3.4, 198.51.100.9, 10.0.0.3"), "198.51.100.9"},
		{"trusted proxy, several lines", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", "1.2.3.4", "x-forwarded-for", "198.51.100.9"), "198.51.100.9"},
		{"trusted proxy, garbage", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", "1.2.3.4, {evil}"), "10.0.0.2"},
		{"trusted proxy, huge header: its right end", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", huge), "6.6.6.6"},
		{"trusted proxy, past 32 trusted hops", proxied, callCtx("10.0.0.2:5000", "x-forwarded-for", "1.2.3.4"+strings.Repeat(", 10.0.0.9", 40)), "10.0.0.9"},
		{"trusted proxy, no header", proxied, callCtx("10.0.0.2:5000"), "10.0.0.2"},
		{"trusted proxy, x-real-ip", realIP, callCtx("10.0.0.2:5000", "x-real-ip", "198.51.100.9"), "198.51.100.9"},
		{"x-real-ip config ignores xff", realIP, callCtx("10.0.0.2:5000", "x-forwarded-for", "198.51.100.9"), "10.0.0.2"},
		{"no peer", direct, context.Background(), ""},
	}
	for _, tc := range tests {
		got, err := tc.fn(tc.ctx, "/s/M")
		if tc.want == "" {
			if !errors.Is(err, keyfunc.ErrNoKey) {
				t.Errorf("%s: %q, %v; want ErrNoKey", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// a peer without an IP address (bufconn, a Unix socket)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "/tmp/s", Net: "unix"}})
	if _, err := direct(ctx, "/s/M"); !errors.Is(err, keyfunc.ErrNoKey) || !strings.Contains(err.Error(), "keyfunc Peer") {
		t.Errorf("Unix peer: %v, want ErrNoKey naming Peer", err)
	}
}

// TestHostileMetadata: over a real server, a client that is no trusted
// proxy sends forged forwarding metadata, huge values and braces in every
// call from 64 goroutines: the per-peer rule still lets exactly its limit
// through, whatever the API keys are.
func TestHostileMetadata(t *testing.T) {
	const limit = 50
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "peer", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(limit)},
		{Name: "key", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1000)},
	}})
	l := newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{
		trusted(t, "", "10.0.0.0/8"), // the client, 127.0.0.1, is not trusted
		grpclimit.Metadata("x-api-key"),
	}})
	c := serve(t, l)
	var ok, exhausted atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 3 {
				ctx := metadata.AppendToOutgoingContext(context.Background(),
					"x-forwarded-for", "10.0.0.1, 203.0.113."+string(rune('0'+i)),
					"x-forwarded-for", strings.Repeat("{", 1000)+"10.0.0.7",
					"x-api-key", strings.Repeat("k{}", 20_000)+string(rune('A'+g%26))+string(rune('0'+i)),
				)
				switch code, _, _ := check(ctx, c); code {
				case codes.OK:
					ok.Add(1)
				case codes.ResourceExhausted:
					exhausted.Add(1)
				default:
					t.Errorf("code %v", code)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit || exhausted.Load() != 64*3-limit {
		t.Fatalf("%d OK, %d ResourceExhausted; want %d and %d", ok.Load(), exhausted.Load(), limit, 64*3-limit)
	}
	// the forged metadata did not name the bucket: the peer's own is full
	if p := e.Peek(context.Background(), "127.0.0.1"); p.Allowed {
		t.Fatalf("the bucket of 127.0.0.1 is not full: %+v", p.Rules[0].Result)
	}
}

// TestTrustedProxyOverServer: with 127.0.0.1 trusted as a proxy, the
// client address in x-forwarded-for keys the call: two clients behind the
// proxy have a bucket each.
func TestTrustedProxyOverServer(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "peer", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)},
	}})
	c := serve(t, newLimiter(t, e, grpclimit.Config{Keys: []grpclimit.Func{trusted(t, "", "127.0.0.1")}}))
	for _, step := range []struct {
		xff  string
		want codes.Code
	}{{"198.51.100.1", codes.OK}, {"198.51.100.2", codes.OK}, {"198.51.100.1", codes.ResourceExhausted}, {"6.6.6.6, 198.51.100.2", codes.ResourceExhausted}} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", step.xff)
		if code, _, _ := check(ctx, c); code != step.want {
			t.Errorf("x-forwarded-for %q: %v, want %v", step.xff, code, step.want)
		}
	}
}

// TestComposition: Method, Metadata, Const, Join and Or as keyfunc's.
func TestComposition(t *testing.T) {
	ctx := callCtx("203.0.113.7:1", "x-api-key", "k:1", "x-empty", "")
	peerFn, _ := grpclimit.Peer(keyfunc.IPConfig{})
	tests := []struct {
		name string
		fn   grpclimit.Func
		want string // "" for ErrNoKey
	}{
		{"method", grpclimit.Method(), "/pkg.S/M"},
		{"metadata", grpclimit.Metadata("X-API-Key"), "k:1"},
		{"metadata absent", grpclimit.Metadata("x-other"), ""},
		{"metadata empty", grpclimit.Metadata("x-empty"), ""},
		{"join", grpclimit.Join(grpclimit.Metadata("x-api-key"), grpclimit.Method(), peerFn), "k%3A1:/pkg.S/M:203.0.113.7"},
		{"join one", grpclimit.Join(grpclimit.Const("c")), "c"},
		{"join missing part", grpclimit.Join(grpclimit.Const("c"), grpclimit.Metadata("x-other")), ""},
		{"or", grpclimit.Or(grpclimit.Metadata("x-other"), peerFn), "203.0.113.7"},
		{"or all missing", grpclimit.Or(grpclimit.Metadata("x-other"), grpclimit.Metadata("x-empty")), ""},
	}
	for _, tc := range tests {
		got, err := tc.fn(ctx, "/pkg.S/M")
		if tc.want == "" {
			if !errors.Is(err, keyfunc.ErrNoKey) {
				t.Errorf("%s: %q, %v; want ErrNoKey", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// Or stops at an error that is not ErrNoKey
	boom := errors.New("boom")
	broken := grpclimit.Func(func(context.Context, string) (string, error) { return "", boom })
	if _, err := grpclimit.Or(broken, grpclimit.Const("x"))(ctx, ""); err != boom {
		t.Errorf("Or(broken, Const): %v, want boom", err)
	}
	if _, err := grpclimit.Method()(ctx, ""); !errors.Is(err, keyfunc.ErrNoKey) {
		t.Errorf("Method with no method: %v", err)
	}
}

// TestConstructorPanics: arguments that can never work panic with a
// ConfigError when the Func is built.
func TestConstructorPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"Metadata empty":    func() { grpclimit.Metadata("") },
		"Metadata invalid":  func() { grpclimit.Metadata("x api key") },
		"Metadata reserved": func() { grpclimit.Metadata("grpc-timeout") },
		"Join empty":        func() { grpclimit.Join() },
		"Join nil":          func() { grpclimit.Join(grpclimit.Method(), nil) },
		"Or empty":          func() { grpclimit.Or() },
		"Or nil":            func() { grpclimit.Or(nil) },
	} {
		func() {
			defer func() {
				r := recover()
				if err, ok := r.(error); !ok || !errors.Is(err, algorithms.ErrInvalidConfig) {
					t.Errorf("%s: panic %v, want a ConfigError", name, r)
				}
			}()
			f()
		}()
	}
}
