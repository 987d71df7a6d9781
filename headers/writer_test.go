package headers

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// t0 is the fixed wall clock of the tests: a quarter past a whole second, so
// that rounding up shows.
var t0 = time.Unix(1_700_000_000, 250_000_000)

// checkHeader compares h with want, one value per field, and checks that each
// value slice has capacity 1 so that a later Add cannot clobber a neighbour.
func checkHeader(t *testing.T, call string, h http.Header, want map[string]string) {
	t.Helper()
	for k, vs := range h {
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("%s: unexpected %s: %q", call, k, vs)
		case len(vs) != 1 || vs[0] != w:
			t.Errorf("%s: %s = %q, want [%q]", call, k, vs, w)
		case cap(vs) != 1:
			t.Errorf("%s: cap(%s) = %d, want 1", call, k, cap(vs))
		}
	}
	for k, w := range want {
		if _, ok := h[k]; !ok {
			t.Errorf("%s: missing %s, want %q", call, k, w)
		}
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	named := func(name string, window time.Duration, r algorithms.Result) Policy {
		return Policy{Name: name, Window: window, Result: r}
	}
	ip := named("ip", time.Minute, allow(1000, 997, 1500*time.Millisecond))
	user := named("user", time.Minute, deny(100, 0, 41*time.Second+time.Microsecond, 42*time.Second))
	layered := []Policy{ip, user}

	tests := []struct {
		name     string
		w        Writer
		policies []Policy
		want     map[string]string
	}{
		// X-RateLimit, epoch reset (the zero Writer). t0 is ...000.25.
		{"x/epoch/1500ms", Writer{}, []Policy{ip}, map[string]string{
			keyLimit: "1000", keyRemaining: "997", keyReset: "1700000002", // .25+1.5 = .75 up
		}},
		{"x/epoch/full", Writer{}, pols(allow(10, 10, 0)), map[string]string{
			keyLimit: "10", keyRemaining: "10", keyReset: "1700000001", // now, rounded up
		}},
		{"x/epoch/1ns", Writer{}, pols(allow(10, 9, time.Nanosecond)), map[string]string{
			keyLimit: "10", keyRemaining: "9", keyReset: "1700000001",
		}},
		{"x/epoch/lands on a second", Writer{}, pols(allow(10, 9, 750*time.Millisecond)), map[string]string{
			keyLimit: "10", keyRemaining: "9", keyReset: "1700000001",
		}},
		{"x/epoch/negative reset is now", Writer{}, pols(allow(10, 10, -time.Hour)), map[string]string{
			keyLimit: "10", keyRemaining: "10", keyReset: "1700000001",
		}},
		// X-RateLimit, delta reset.
		{"x/delta/1500ms", Writer{Reset: DeltaSeconds}, []Policy{ip}, map[string]string{
			keyLimit: "1000", keyRemaining: "997", keyReset: "2",
		}},
		{"x/delta/full", Writer{Reset: DeltaSeconds}, pols(allow(10, 10, 0)), map[string]string{
			keyLimit: "10", keyRemaining: "10", keyReset: "0",
		}},
		{"x/delta/1ns", Writer{Reset: DeltaSeconds}, pols(allow(10, 9, time.Nanosecond)), map[string]string{
			keyLimit: "10", keyRemaining: "9", keyReset: "1",
		}},
		{"x/delta/exact", Writer{Reset: DeltaSeconds}, pols(allow(10, 9, 2*time.Second)), map[string]string{
			keyLimit: "10", keyRemaining: "9", keyReset: "2",
		}},
		// Retry-After.
		{"x/delta/denied 1µs", Writer{Reset: DeltaSeconds}, pols(deny(10, 0, time.Microsecond, 5*time.Second)), map[string]string{
			keyLimit: "10", keyRemaining: "0", keyReset: "5", keyRetryAfter: "1",
		}},
		{"x/epoch/denied", Writer{}, pols(deny(10, 2, 2500*time.Millisecond, 9*time.Second)), map[string]string{
			keyLimit: "10", keyRemaining: "2", keyReset: "1700000010", keyRetryAfter: "3",
		}},
		{"x/delta/denied never", Writer{Reset: DeltaSeconds}, pols(deny(10, 10, 0, 0)), map[string]string{
			keyLimit: "10", keyRemaining: "10", keyReset: "0",
		}},
		{"x/delta/allowed at zero", Writer{Reset: DeltaSeconds}, pols(allow(10, 0, time.Minute)), map[string]string{
			keyLimit: "10", keyRemaining: "0", keyReset: "60",
		}},
		// Layered: the X- fields follow Decisive.
		{"x/delta/layered allowed: least remaining", Writer{Reset: DeltaSeconds},
			pols(allow(1000, 900, time.Hour), allow(10, 2, 30*time.Second), allow(100, 50, time.Minute)),
			map[string]string{keyLimit: "10", keyRemaining: "2", keyReset: "30"}},
		{"x/delta/layered denied: longest wait", Writer{Reset: DeltaSeconds},
			pols(allow(10, 0, time.Hour), deny(100, 0, 5*time.Second, time.Minute), deny(1000, 0, 20*time.Second, time.Hour)),
			map[string]string{keyLimit: "1000", keyRemaining: "0", keyReset: "3600", keyRetryAfter: "20"}},
		{"x/delta/layered denied: never decides, no retry", Writer{Reset: DeltaSeconds},
			pols(deny(100, 0, 5*time.Second, time.Minute), deny(10, 10, 0, 0)),
			map[string]string{keyLimit: "10", keyRemaining: "10", keyReset: "0"}},
		// IETF: every policy, in order; Reset does not matter.
		{"ietf/epoch/single", Writer{Style: IETF}, []Policy{ip}, map[string]string{
			keyPolicy: `"ip";q=1000;w=60`, keyRateLimit: `"ip";r=997;t=2`,
		}},
		{"ietf/delta/single", Writer{Style: IETF, Reset: DeltaSeconds}, []Policy{ip}, map[string]string{
			keyPolicy: `"ip";q=1000;w=60`, keyRateLimit: `"ip";r=997;t=2`,
		}},
		{"ietf/epoch/layered denied", Writer{Style: IETF}, layered, map[string]string{
			keyPolicy:     `"ip";q=1000;w=60, "user";q=100;w=60`,
			keyRateLimit:  `"ip";r=997;t=2, "user";r=0;t=42`,
			keyRetryAfter: "42",
		}},
		{"ietf/delta/layered order kept", Writer{Style: IETF, Reset: DeltaSeconds}, []Policy{user, ip}, map[string]string{
			keyPolicy:     `"user";q=100;w=60, "ip";q=1000;w=60`,
			keyRateLimit:  `"user";r=0;t=42, "ip";r=997;t=2`,
			keyRetryAfter: "42",
		}},
		{"ietf/epoch/windows", Writer{Style: IETF}, []Policy{
			named("none", 0, allow(5, 5, 0)),
			named("sub-second", time.Nanosecond, allow(5, 4, time.Nanosecond)),
			named("1500ms", 1500*time.Millisecond, allow(5, 3, 1500*time.Millisecond)),
			named("day", 24*time.Hour, allow(5, 2, 0)),
		}, map[string]string{
			keyPolicy:    `"none";q=5, "sub-second";q=5;w=1, "1500ms";q=5;w=2, "day";q=5;w=86400`,
			keyRateLimit: `"none";r=5;t=0, "sub-second";r=4;t=1, "1500ms";r=3;t=2, "day";r=2;t=0`,
		}},
		{"ietf/epoch/never", Writer{Style: IETF}, []Policy{named("big", time.Second, deny(5, 5, 0, 0))}, map[string]string{
			keyPolicy: `"big";q=5;w=1`, keyRateLimit: `"big";r=5;t=0`,
		}},
		// Both: every field, Retry-After once.
		{"both/epoch/layered denied", Writer{Style: Both}, layered, map[string]string{
			keyLimit: "100", keyRemaining: "0", keyReset: "1700000043",
			keyRetryAfter: "42",
			keyPolicy:     `"ip";q=1000;w=60, "user";q=100;w=60`,
			keyRateLimit:  `"ip";r=997;t=2, "user";r=0;t=42`,
		}},
		{"both/delta/layered denied", Writer{Style: Both, Reset: DeltaSeconds}, layered, map[string]string{
			keyLimit: "100", keyRemaining: "0", keyReset: "42",
			keyRetryAfter: "42",
			keyPolicy:     `"ip";q=1000;w=60, "user";q=100;w=60`,
			keyRateLimit:  `"ip";r=997;t=2, "user";r=0;t=42`,
		}},
		{"both/delta/allowed", Writer{Style: Both, Reset: DeltaSeconds}, []Policy{ip}, map[string]string{
			keyLimit: "1000", keyRemaining: "997", keyReset: "2",
			keyPolicy: `"ip";q=1000;w=60`, keyRateLimit: `"ip";r=997;t=2`,
		}},
		// None, and nothing to write.
		{"none/epoch/denied", Writer{Style: None}, layered, map[string]string{}},
		{"none/delta/denied", Writer{Style: None, Reset: DeltaSeconds}, layered, map[string]string{}},
		{"x/epoch/no policies", Writer{}, nil, map[string]string{}},
		{"both/delta/no policies", Writer{Style: Both, Reset: DeltaSeconds}, []Policy{}, map[string]string{}},
		// Values that Validate rejects act as the zero value.
		{"unknown style is x-ratelimit", Writer{Style: 9, Reset: DeltaSeconds}, []Policy{ip}, map[string]string{
			keyLimit: "1000", keyRemaining: "997", keyReset: "2",
		}},
		{"unknown reset is epoch", Writer{Reset: 7}, []Policy{ip}, map[string]string{
			keyLimit: "1000", keyRemaining: "997", keyReset: "1700000002",
		}},
		// Counts are never negative on the wire.
		{"both/delta/negative counts clamp", Writer{Style: Both, Reset: DeltaSeconds}, []Policy{named("n", time.Second, allow(-1, -5, 0))}, map[string]string{
			keyLimit: "0", keyRemaining: "0", keyReset: "0",
			keyPolicy: `"n";q=0;w=1`, keyRateLimit: `"n";r=0;t=0`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			tt.w.Write(h, t0, tt.policies)
			checkHeader(t, fmt.Sprintf("%+v.Write(t0, %+v)", tt.w, tt.policies), h, tt.want)
		})
	}
}

func TestWriteOverwrites(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	for _, k := range []string{keyLimit, keyRemaining, keyReset, keyPolicy, keyRateLimit} {
		h[k] = []string{"old", "older"}
	}
	h.Set("Retry-After", "120") // set by the application: left alone when allowed
	h.Set("Content-Type", "text/plain")

	w := Writer{Style: Both, Reset: DeltaSeconds}
	w.Write(h, t0, []Policy{{Name: "ip", Window: time.Second, Result: allow(10, 4, time.Second)}})
	checkHeader(t, "Write over old values", h, map[string]string{
		keyLimit: "10", keyRemaining: "4", keyReset: "1",
		keyPolicy: `"ip";q=10;w=1`, keyRateLimit: `"ip";r=4;t=1`,
		keyRetryAfter: "120", "Content-Type": "text/plain",
	})

	// Add after Write appends to one field only.
	h.Add("X-RateLimit-Limit", "extra")
	if got := h.Values("X-RateLimit-Remaining"); !slices.Equal(got, []string{"4"}) {
		t.Errorf("after Add(X-RateLimit-Limit): X-RateLimit-Remaining = %q, want [4]", got)
	}
}

func TestSFString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "ip", `"ip"`},
		{"empty", "", `""`},
		{"space and punctuation", "per user/min (v2)", `"per user/min (v2)"`},
		{"quote", `a"b`, `"a\"b"`},
		{"backslash", `a\b`, `"a\\b"`},
		{"both escapes", `\"`, `"\\\""`},
		{"tab", "a\tb", `"a?b"`},
		{"CRLF", "a\r\nb", `"a??b"`},
		{"NUL", "a\x00b", `"a?b"`},
		{"DEL", "a\x7fb", `"a?b"`},
		{"non-ASCII one per character", "café", `"caf?"`},
		{"CJK", "日本", `"??"`},
		{"invalid UTF-8 one per byte", "a\xff\xfeb", `"a??b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(appendSFString(nil, tt.in)); got != tt.want {
				t.Errorf("appendSFString(%q) = %s, want %s", tt.in, got, tt.want)
			}
			h := http.Header{}
			Writer{Style: IETF}.Write(h, t0, []Policy{{Name: tt.in, Result: allow(1, 1, 0)}})
			if got, want := h.Get("RateLimit"), tt.want+";r=1;t=0"; got != want {
				t.Errorf("Write(name %q): RateLimit = %s, want %s", tt.in, got, want)
			}
		})
	}
}

func TestHeaderNamesCanonical(t *testing.T) {
	t.Parallel()
	for spelled, key := range map[string]string{
		"X-RateLimit-Limit":     keyLimit,
		"X-RateLimit-Remaining": keyRemaining,
		"X-RateLimit-Reset":     keyReset,
		"Retry-After":           keyRetryAfter,
		"RateLimit-Policy":      keyPolicy,
		"RateLimit":             keyRateLimit,
	} {
		if got := http.CanonicalHeaderKey(spelled); got != key {
			t.Errorf("CanonicalHeaderKey(%q) = %q, want the key Write uses, %q", spelled, got, key)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		w       Writer
		wantErr string // "" for valid
		field   string
	}{
		{"zero", Writer{}, "", ""},
		{"ietf delta", Writer{Style: IETF, Reset: DeltaSeconds}, "", ""},
		{"both", Writer{Style: Both}, "", ""},
		{"none", Writer{Style: None}, "", ""},
		{"style 4", Writer{Style: 4}, "redlimit: headers.Writer.Style unknown value 4", "headers.Writer.Style"},
		{"style 9", Writer{Style: 9}, "redlimit: headers.Writer.Style unknown value 9", "headers.Writer.Style"},
		{"reset 2", Writer{Reset: 2}, "redlimit: headers.Writer.Reset unknown value 2", "headers.Writer.Reset"},
		{"reset 255", Writer{Style: IETF, Reset: 255}, "redlimit: headers.Writer.Reset unknown value 255", "headers.Writer.Reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.w.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("%+v.Validate() = %v, want nil", tt.w, err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("%+v.Validate() = %v, want %s", tt.w, err, tt.wantErr)
			}
			if !errors.Is(err, algorithms.ErrInvalidConfig) {
				t.Errorf("%+v.Validate() = %v, want errors.Is ErrInvalidConfig", tt.w, err)
			}
			var ce *algorithms.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Errorf("%+v.Validate() = %#v, want a *ConfigError with Field %q", tt.w, err, tt.field)
			}
		})
	}
}

func TestStyleString(t *testing.T) {
	t.Parallel()
	for s, want := range map[Style]string{XRateLimit: "x-ratelimit", IETF: "ietf", Both: "both", None: "none", 9: "Style(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Style(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
	for f, want := range map[ResetFormat]string{EpochSeconds: "epoch", DeltaSeconds: "delta", 7: "ResetFormat(7)"} {
		if got := f.String(); got != want {
			t.Errorf("ResetFormat(%d).String() = %q, want %q", uint8(f), got, want)
		}
	}
}

// layeredDenial is the request of the handler tests: allowed by "ip", denied
// by "user".
var layeredDenial = []Policy{
	{Name: "ip", Window: time.Minute, Result: allow(1000, 997, 3*time.Second)},
	{Name: "user", Window: time.Hour, Result: deny(100, 0, 11500*time.Millisecond, 20*time.Minute)},
}

func denyHandler(w Writer) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		w.Write(rw.Header(), t0, layeredDenial)
		http.Error(rw, "Too Many Requests", http.StatusTooManyRequests)
	})
}

// wantLayeredDenial is what a client reads for layeredDenial with
// Writer{Style: Both}, looked up with the documented spellings.
var wantLayeredDenial = map[string]string{
	"X-RateLimit-Limit":     "100",
	"X-RateLimit-Remaining": "0",
	"X-RateLimit-Reset":     "1700001201",
	"Retry-After":           "12",
	"RateLimit-Policy":      `"ip";q=1000;w=60, "user";q=100;w=3600`,
	"RateLimit":             `"ip";r=997;t=3, "user";r=0;t=1200`,
}

func TestHandlerRecorder(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	denyHandler(Writer{Style: Both}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	resp := rec.Result()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status = %d, want 429", resp.StatusCode)
	}
	for name, want := range wantLayeredDenial {
		if got := resp.Header.Values(name); !slices.Equal(got, []string{want}) {
			t.Errorf("resp.Header.Values(%q) = %q, want [%q]", name, got, want)
		}
		if got := resp.Header.Get(strings.ToLower(name)); got != want {
			t.Errorf("resp.Header.Get(%q) = %q, want %q", strings.ToLower(name), got, want)
		}
	}
}

// TestHandlerWire reads the raw HTTP/1.1 response: each field appears once,
// under its canonical name.
func TestHandlerWire(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(denyHandler(Writer{Style: Both}))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, name := range slices.Sorted(maps.Keys(wantLayeredDenial)) {
		line := "\r\n" + http.CanonicalHeaderKey(name) + ": " + wantLayeredDenial[name] + "\r\n"
		if n := strings.Count(head+"\r\n", line); n != 1 {
			t.Errorf("response head has %d lines %q, want 1; head:\n%s", n, strings.TrimSpace(line), head)
		}
	}
}
