package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keys"
)

// fixed returns a Func that always returns key, err.
func fixed(key string, err error) Func {
	return func(*http.Request) (string, error) { return key, err }
}

var errBoom = errors.New("boom")

func TestJoin(t *testing.T) {
	t.Parallel()
	missing := noKey("Header(\"X-Tenant\")", "header absent")
	tests := []struct {
		name    string
		fns     []Func
		want    string
		wantErr error // matched with errors.Is
	}{
		{"one part", []Func{Const("a")}, "a", nil},
		{"parts", []Func{Const("GET /login"), Const("203.0.113.7")}, "GET /login:203.0.113.7", nil},
		{"ipv6 last kept", []Func{Const("GET /x"), Const("2001:db8::/64")}, "GET /x:2001:db8::/64", nil},
		{"colon escaped before last", []Func{Const("2001:db8::/64"), Const("GET /x")}, "2001%3Adb8%3A%3A/64:GET /x", nil},
		{"percent escaped before last", []Func{Const("50%"), Const("b"), Const("c%:")}, "50%25:b:c%:", nil},
		{"empty parts", []Func{Const(""), Const("")}, ":", nil},
		{"missing part", []Func{Const("a"), fixed("", missing), Const("c")}, "", ErrNoKey},
		{"other error", []Func{Const("a"), fixed("", errBoom)}, "", errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := mustKey(Join(tt.fns...))(httptest.NewRequest(http.MethodGet, "/", nil))
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Join(%s) = %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestJoinMissingPartIsThatError(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	_, want := mustKey(Header("X-Tenant"))(r)
	_, err := mustKey(Join(Const("a"), mustKey(Header("X-Tenant"))))(r)
	if err == nil || err.Error() != want.Error() {
		t.Errorf("Join with an absent header = %v, want %v", err, want)
	}
}

func TestJoinInjective(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	parts := [][3]string{
		{"a", "b:c", "d"}, {"a:b", "c", "d"}, {"a", "b", "c:d"}, {"a:b:c", "", "d"}, {"", "a:b:c", "d"},
		{"a%3Ab", "c", "d"}, {"a", "b%3Ac", "d"}, {"a%", "3Ab", "d"}, {"a%253A", "b", "c"}, {"a%3A", "b", "c"},
		{"2001:db8::/64", "GET /x", ""}, {"2001", "db8::/64", "GET /x"},
	}
	seen := map[string][3]string{}
	for _, p := range parts {
		got, err := mustKey(Join(Const(p[0]), Const(p[1]), Const(p[2])))(r)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("Join(%q) = Join(%q) = %q", p, prev, got)
		}
		seen[got] = p
	}
}

func TestJoinCopiesFuncs(t *testing.T) {
	t.Parallel()
	fns := []Func{Const("a"), Const("b")}
	fn := mustKey(Join(fns...))
	fns[1] = Const("changed")
	if got, _ := fn(httptest.NewRequest(http.MethodGet, "/", nil)); got != "a:b" {
		t.Errorf("Join after changing the caller's slice = %q, want %q", got, "a:b")
	}
}

func TestOr(t *testing.T) {
	t.Parallel()
	none1 := noKey("User", "no identity")
	none2 := noKey(`Header("X-API-Key")`, "header absent")
	tests := []struct {
		name    string
		fns     []Func
		want    string
		wantErr error // the exact error returned, or a category for errors.Is
	}{
		{"first", []Func{Const("u1"), Const("ip")}, "u1", nil},
		{"fallback", []Func{fixed("", none1), Const("ip")}, "ip", nil},
		{"second fallback", []Func{fixed("", none1), fixed("", none2), Const("ip")}, "ip", nil},
		{"all missing returns last", []Func{fixed("", none1), fixed("", none2)}, "", none2},
		{"other error stops", []Func{fixed("", errBoom), Const("ip")}, "", errBoom},
		{"config error stops", []Func{fixed("", badValue("ContextValue(k)", "wrong type")), Const("ip")}, "", algorithms.ErrInvalidConfig},
		{"one func", []Func{fixed("", none1)}, "", none1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := mustKey(Or(tt.fns...))(httptest.NewRequest(http.MethodGet, "/", nil))
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Or(%s) = %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestCompositionConfigErrors: a composition of nothing, or of a nil Func,
// is refused when it is built, naming the constructor and the argument.
func TestCompositionConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		build func() (Func, error)
		want  string
	}{
		{"Join()", func() (Func, error) { return Join() }, "redlimit: keyfunc.Join fns must not be empty"},
		{"Join(nil...)", func() (Func, error) { return Join([]Func(nil)...) }, "redlimit: keyfunc.Join fns must not be empty"},
		{"Join(a, nil)", func() (Func, error) { return Join(Const("a"), nil) }, "redlimit: keyfunc.Join fns[1] must not be nil"},
		{"Join(nil)", func() (Func, error) { return Join(nil) }, "redlimit: keyfunc.Join fns[0] must not be nil"},
		{"Or()", func() (Func, error) { return Or() }, "redlimit: keyfunc.Or fns must not be empty"},
		{"Or(nil)", func() (Func, error) { return Or(nil) }, "redlimit: keyfunc.Or fns[0] must not be nil"},
		{"Or(ip, nil)", func() (Func, error) { return Or(Const("ip"), nil) }, "redlimit: keyfunc.Or fns[1] must not be nil"},
	} {
		fn, p, err := build(tt.build)
		ce, ok := err.(*algorithms.ConfigError)
		if fn != nil || p != nil || !ok || ce.Error() != tt.want || !errors.Is(ce, algorithms.ErrInvalidConfig) {
			t.Errorf("%s = %v, %#v, panic %v; want *algorithms.ConfigError %s", tt.name, fn != nil, err, p, tt.want)
		}
	}
}

func TestConst(t *testing.T) {
	t.Parallel()
	fn := Const("signup")
	for _, remote := range []string{"192.0.2.1:1", "198.51.100.9:2", ""} {
		r := httptest.NewRequest(http.MethodPost, "/signup", nil)
		r.RemoteAddr = remote
		if got, err := fn(r); err != nil || got != "signup" {
			t.Errorf(`Const("signup") from %q = %q, %v; want "signup"`, remote, got, err)
		}
	}
}

// TestJoinKeys: JoinKeys encodes parts exactly as Join does, and Join
// allocates only its result.
func TestJoinKeys(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b:c"}, "a:b:c"},
		{[]string{"a:b", "c"}, "a%3Ab:c"},
		{[]string{"50%", "x", "::1"}, "50%25:x:::1"},
	} {
		if got := keys.JoinKeys(tc.parts...); got != tc.want {
			t.Errorf("JoinKeys(%q) = %q, want %q", tc.parts, got, tc.want)
		}
		if len(tc.parts) < 2 {
			continue
		}
		var fns []Func
		for _, p := range tc.parts {
			fns = append(fns, Const(p))
		}
		r := httptest.NewRequest("GET", "/", nil)
		if got, err := mustKey(Join(fns...))(r); err != nil || got != tc.want {
			t.Errorf("Join(%q) = %q, %v; want %q", tc.parts, got, err, tc.want)
		}
	}
	join := mustKey(Join(Const("route"), Const("user:1"), Const("203.0.113.7")))
	r := httptest.NewRequest("GET", "/", nil)
	if n := testing.AllocsPerRun(100, func() { join(r) }); n > 1 {
		t.Errorf("Join allocates %v times per call, want at most 1 (its result)", n)
	}
}
