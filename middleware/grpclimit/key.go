package grpclimit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
	"github.com/redlimit/redlimit/keyfunc"
)

// Func returns the key material of one call for one rule: what tells one
// client (or method, or tenant) from another. ctx is the call's context
// (its peer and incoming metadata), method the full method name
// ("/pkg.Service/Method").
//
// A Func that finds no key returns an error wrapping [keyfunc.ErrNoKey]
// (the rule's MissingKey then applies); it never returns "" with a nil
// error. Any other error goes to the engine's error policy. A Func must
// be safe for concurrent use. The material is sanitised by the engine.
type Func func(ctx context.Context, method string) (string, error)

// Method returns a Func whose key is the call's full method name,
// "/pkg.Service/Method": one bucket per method. A server answers a method
// it does not serve before any interceptor runs, unless it has an unknown
// service handler (grpc.UnknownServiceHandler), where the name is
// whatever the client sent: key such a server by peer too.
func Method() Func {
	return func(_ context.Context, method string) (string, error) {
		if method == "" {
			return "", errNoMethod
		}
		return method, nil
	}
}

var errNoMethod = noKey("Method()", "no method name")

// Const returns a Func whose key is s for every call: one bucket shared by
// every client, a global limit. Join(Const("export"), Peer(...)) names a
// bucket explicitly.
func Const(s string) Func {
	return func(context.Context, string) (string, error) { return s, nil }
}

// Peer returns a Func whose key is the client's IP address, found as
// [keyfunc.IP] finds it for HTTP, with the same cfg: the address of the
// call's TCP peer, masked to cfg.IPv4Prefix or cfg.IPv6Prefix bits, unless
// that peer is one of cfg.TrustedProxies; then the client address comes
// from the incoming metadata key named by cfg.Header, lower-cased
// ("x-forwarded-for" by default, "x-real-ip", "forwarded"), read exactly
// as keyfunc.IP reads the header: walked from the right, trusted proxies
// skipped, garbage stopping the walk at the last trusted hop, at most the
// rightmost 8 KiB and 32 addresses. A peer that is not a trusted proxy
// cannot choose its key by sending the metadata: it is ignored.
//
// A call whose peer has no IP address (bufconn, a Unix socket) reports
// [keyfunc.ErrNoKey]. Peer returns keyfunc.IP's *[algorithms.ConfigError]
// for an invalid cfg.
func Peer(cfg keyfunc.IPConfig) (Func, error) {
	ip, err := keyfunc.IP(cfg)
	if err != nil {
		return nil, err
	}
	var mdKey, hdrKey string // the metadata key read, and the header keyfunc.IP reads
	if len(cfg.TrustedProxies) > 0 {
		h := cfg.Header
		if h == "" {
			h = keyfunc.HeaderXForwardedFor
		}
		mdKey, hdrKey = strings.ToLower(h), textproto.CanonicalMIMEHeaderKey(h)
	}
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", errNoPeer
		}
		r := &http.Request{RemoteAddr: peerAddr(p.Addr)}
		if mdKey != "" {
			if v := metadata.ValueFromIncomingContext(ctx, mdKey); len(v) > 0 {
				r.Header = http.Header{hdrKey: v}
			}
		}
		k, err := ip(r)
		var ke *keyfunc.Error
		if errors.As(err, &ke) {
			err = &keyfunc.Error{Func: "Peer", Reason: ke.Reason, Err: ke.Err}
		}
		return k, err
	}, nil
}

var errNoPeer = noKey("Peer", "no peer in the call's context")

// peerAddr returns the text of a, as RemoteAddr holds it.
func peerAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().String()
	}
	return a.String()
}

// Metadata returns a Func whose key is the first value of the incoming
// metadata key name, such as an API key:
//
//	grpclimit.Metadata("x-api-key")
//
// name is matched in lower case, as gRPC stores metadata keys. A key that
// is absent, or whose first value is empty, reports [keyfunc.ErrNoKey].
// The value is whatever the client sent: it identifies a client only when
// the service also authenticates it. Long values are hashed by the
// engine's sanitising.
//
// Metadata panics with an *[algorithms.ConfigError] when name is empty or
// is not a valid metadata key (lower-case letters, digits, "-", "_", "."),
// or is a reserved "grpc-" key.
func Metadata(name string) Func {
	key := strings.ToLower(name)
	switch {
	case key == "":
		panic(&algorithms.ConfigError{Field: "grpclimit.Metadata name", Reason: "must not be empty"})
	case !validMetadataKey(key):
		panic(&algorithms.ConfigError{Field: "grpclimit.Metadata name", Reason: strconv.Quote(name) + " is not a valid metadata key"})
	case strings.HasPrefix(key, "grpc-"):
		panic(&algorithms.ConfigError{Field: "grpclimit.Metadata name", Reason: strconv.Quote(name) + " is reserved by gRPC"})
	}
	fn := "Metadata(" + strconv.Quote(key) + ")"
	absent, empty := noKey(fn, "key absent"), noKey(fn, "value empty")
	return func(ctx context.Context, _ string) (string, error) {
		v := metadata.ValueFromIncomingContext(ctx, key)
		switch {
		case len(v) == 0:
			return "", absent
		case v[0] == "":
			return "", empty
		}
		return v[0], nil
	}
}

// validMetadataKey reports whether k is a key gRPC accepts: lower-case
// letters, digits, "-", "_" and ".".
func validMetadataKey(k string) bool {
	for i := range len(k) {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Join returns a Func whose key is the keys of fns joined with ":", in
// order, as [keyfunc.Join] joins HTTP keys: Join(Method(), peer) is one
// bucket per method and client. Every part is required (the first error
// is returned as it is), and the join is unambiguous: in every part but
// the last, ":" is written "%3A" and "%" "%25". Put the part most likely
// to hold ":" last (an IPv6 peer).
//
// Join with one Func returns it. Join panics with an
// *[algorithms.ConfigError] when fns is empty or holds a nil Func.
func Join(fns ...Func) Func {
	checkFuncs("grpclimit.Join", fns)
	if len(fns) == 1 {
		return fns[0]
	}
	fns = append([]Func(nil), fns...)
	return func(ctx context.Context, method string) (string, error) {
		var buf [4]string
		parts := buf[:0]
		for _, fn := range fns {
			k, err := fn(ctx, method)
			if err != nil {
				return "", err
			}
			parts = append(parts, k)
		}
		return keys.JoinKeys(parts...), nil
	}
}

// Or returns a Func whose key is the key of the first of fns that finds
// one, as [keyfunc.Or]: Or(Metadata("x-api-key"), peer) is "the API key,
// else the client's address". Only [keyfunc.ErrNoKey] moves on to the
// next Func; any other error is returned at once. When every Func reports
// ErrNoKey, Or returns the last one's error. Give the alternatives
// distinct shapes (Join(Const("key"), Metadata(...))) when an API key
// could look like an address.
//
// Or with one Func returns it. Or panics with an *[algorithms.ConfigError]
// when fns is empty or holds a nil Func.
func Or(fns ...Func) Func {
	checkFuncs("grpclimit.Or", fns)
	if len(fns) == 1 {
		return fns[0]
	}
	fns = append([]Func(nil), fns...)
	return func(ctx context.Context, method string) (k string, err error) {
		for _, fn := range fns {
			k, err = fn(ctx, method)
			if err == nil || !errors.Is(err, keyfunc.ErrNoKey) {
				return k, err
			}
		}
		return "", err
	}
}

func checkFuncs(name string, fns []Func) {
	if len(fns) == 0 {
		panic(&algorithms.ConfigError{Field: name + " fns", Reason: "must not be empty"})
	}
	for i, fn := range fns {
		if fn == nil {
			panic(&algorithms.ConfigError{Field: name + " fns[" + strconv.Itoa(i) + "]", Reason: "must not be nil"})
		}
	}
}

func noKey(fn, reason string) *keyfunc.Error {
	return &keyfunc.Error{Func: fn, Reason: reason, Err: keyfunc.ErrNoKey}
}
