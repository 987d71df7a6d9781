package keyfunc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// TestErrorMessages lists every error a Func of this package returns for a
// request, with its exact message: one "redlimit:" prefix each, and the
// category reachable through Unwrap.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	ip := mustIP(t, IPConfig{})
	get := func() *http.Request { return httptest.NewRequest(http.MethodGet, "/", nil) }
	header := func(name, value string) *http.Request {
		r := get()
		r.Header[name] = []string{value}
		return r
	}
	ctxValue := func(v any) *http.Request {
		r := get()
		return r.WithContext(context.WithValue(r.Context(), userKey{}, v))
	}
	remote := func(addr string) *http.Request {
		r := get()
		r.RemoteAddr = addr
		return r
	}
	anonymous := func(*http.Request) (string, bool) { return "", false }
	tests := []struct {
		name     string
		fn       Func
		r        *http.Request
		want     string
		category error
	}{
		{"Header absent", mustKey(Header("X-API-Key")), get(),
			`redlimit: keyfunc Header("X-API-Key"): header absent`, ErrNoKey},
		{"Header empty", mustKey(Header("X-API-Key")), header("X-Api-Key", ""),
			`redlimit: keyfunc Header("X-API-Key"): header empty`, ErrNoKey},
		{"User anonymous", mustKey(User(anonymous)), get(),
			`redlimit: keyfunc User: no identity`, ErrNoKey},
		{"ContextValue absent", mustKey(ContextValue(userKey{})), get(),
			`redlimit: keyfunc ContextValue(keyfunc.userKey{}): no value in the request context`, ErrNoKey},
		{"ContextValue empty", mustKey(ContextValue(userKey{})), ctxValue(""),
			`redlimit: keyfunc ContextValue(keyfunc.userKey{}): empty value in the request context`, ErrNoKey},
		{"ContextValue wrong type", mustKey(ContextValue(userKey{})), ctxValue(42),
			`redlimit: keyfunc ContextValue(keyfunc.userKey{}): context value has type int, want string or fmt.Stringer`, algorithms.ErrInvalidConfig},
		{"Route without pattern", Route(), get(),
			`redlimit: keyfunc Route: request has no route pattern (mount the limiter after routing: in chi with r.With, inside r.Group or on the route, not with a top-level r.Use; with http.ServeMux, wrap the handler you register)`, ErrNoKey},
		{"IP empty RemoteAddr", ip, remote(""),
			`redlimit: keyfunc IP: empty RemoteAddr`, ErrNoKey},
		{"IP bad RemoteAddr", ip, remote("nope"),
			`redlimit: keyfunc IP: RemoteAddr "nope" is not an IP address`, ErrNoKey},
		{"IP long RemoteAddr", ip, remote(strings.Repeat("x", 100)),
			`redlimit: keyfunc IP: RemoteAddr "` + strings.Repeat("x", 64) + `"... is not an IP address`, ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.fn(tt.r)
			if got != "" || err == nil || err.Error() != tt.want {
				t.Fatalf("%s = %q, %v; want error %s", tt.name, got, err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Err != tt.category || !errors.Is(err, tt.category) {
				t.Errorf("%s: error %#v is not an *Error of category %v", tt.name, err, tt.category)
			}
			other := algorithms.ErrInvalidConfig
			if tt.category == other {
				other = ErrNoKey
			}
			if errors.Is(err, other) {
				t.Errorf("%s: error %v also matches %v", tt.name, err, other)
			}
		})
	}
}

// TestConstructionErrors: a key func that could never find a key is
// refused when it is built, with an *algorithms.ConfigError naming the
// constructor and the argument, instead of failing on every request; no
// constructor panics.
func TestConstructionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		build func() (Func, error)
		want  string
	}{
		{"Header empty name", func() (Func, error) { return Header("") },
			"redlimit: keyfunc.Header name must not be empty"},
		{"Header name with a space", func() (Func, error) { return Header("X API Key") },
			`redlimit: keyfunc.Header name "X API Key" is not a valid header field name`},
		{"Header name with a colon", func() (Func, error) { return Header("X-API-Key:") },
			`redlimit: keyfunc.Header name "X-API-Key:" is not a valid header field name`},
		{"Header name not ASCII", func() (Func, error) { return Header("X-Clé") },
			`redlimit: keyfunc.Header name "X-Clé" is not a valid header field name`},
		{"User nil", func() (Func, error) { return User(nil) },
			"redlimit: keyfunc.User fn must not be nil"},
		{"ContextValue nil key", func() (Func, error) { return ContextValue(nil) },
			"redlimit: keyfunc.ContextValue key must not be nil"},
		{"ContextValue slice key", func() (Func, error) { return ContextValue([]string{"user"}) },
			"redlimit: keyfunc.ContextValue key must be comparable, got type []string"},
		{"ContextValue func key", func() (Func, error) { return ContextValue(func() {}) },
			"redlimit: keyfunc.ContextValue key must be comparable, got type func()"},
		{"ContextValue struct key holding a map", func() (Func, error) { return ContextValue(struct{ k any }{map[int]int{}}) },
			"redlimit: keyfunc.ContextValue key must be comparable, got type struct { k interface {} }"},
		{"Join no funcs", func() (Func, error) { return Join() },
			"redlimit: keyfunc.Join fns must not be empty"},
		{"Join nil func", func() (Func, error) { return Join(Const("a"), nil) },
			"redlimit: keyfunc.Join fns[1] must not be nil"},
		{"Or no funcs", func() (Func, error) { return Or() },
			"redlimit: keyfunc.Or fns must not be empty"},
		{"Or nil func", func() (Func, error) { return Or(nil, Const("ip")) },
			"redlimit: keyfunc.Or fns[0] must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn, p, err := build(tt.build)
			if fn != nil || p != nil {
				t.Fatalf("%s returned a Func (%v) or panicked (%v), want the error %s", tt.name, fn != nil, p, tt.want)
			}
			ce, ok := err.(*algorithms.ConfigError)
			if !ok || ce.Error() != tt.want || !errors.Is(ce, algorithms.ErrInvalidConfig) {
				t.Errorf("%s returned %#v, want *algorithms.ConfigError %s", tt.name, err, tt.want)
			}
		})
	}
}

// build calls f and returns its Func and error, and what it panicked with.
func build(f func() (Func, error)) (fn Func, panicked any, err error) {
	defer func() { panicked = recover() }()
	fn, err = f()
	return fn, nil, err
}

// TestValidConstructions: the arguments just short of the rejected ones
// build a working Func.
func TestValidConstructions(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func() (Func, error){
		"Header with every tchar": func() (Func, error) { return Header("!#$%&'*+-.^_`|~09azAZ") },
		"ContextValue string key": func() (Func, error) { return ContextValue("user") },
		"ContextValue int key":    func() (Func, error) { return ContextValue(0) },
		"ContextValue struct key": func() (Func, error) { return ContextValue(struct{ k any }{"user"}) },
		"Join one":                func() (Func, error) { return Join(Const("a")) },
		"Or one":                  func() (Func, error) { return Or(Const("a")) },
	} {
		if fn, p, err := build(f); fn == nil || err != nil || p != nil {
			t.Errorf("%s = %v, %v, panic %v; want a Func", name, fn != nil, err, p)
		}
	}
}

// TestConfigErrorMessages lists a message of each kind the constructors
// that return an error report; ip_test.go and proxies_test.go hold every
// case.
func TestConfigErrorMessages(t *testing.T) {
	t.Parallel()
	_, ipErr := IP(IPConfig{IPv6Prefix: 200})
	_, proxiesErr := ParseTrustedProxies("10.0.0.0/8", "bogus")
	for _, tt := range []struct {
		err  error
		want string
	}{
		{ipErr, "redlimit: IPConfig.IPv6Prefix must be in 1..128, got 200"},
		{proxiesErr, `redlimit: keyfunc.ParseTrustedProxies entry 1 "bogus" is neither an IP address nor a CIDR prefix`},
	} {
		var ce *algorithms.ConfigError
		if tt.err == nil || tt.err.Error() != tt.want || !errors.As(tt.err, &ce) || !errors.Is(tt.err, algorithms.ErrInvalidConfig) {
			t.Errorf("error = %#v, want *algorithms.ConfigError %s", tt.err, tt.want)
		}
	}
}

// mustKey returns fn, failing the test (by a panic) on err: for Funcs built
// from arguments known to be valid.
func mustKey(fn Func, err error) Func {
	if err != nil {
		panic(err)
	}
	return fn
}
