package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

func TestSanitize(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 129)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"ipv4", "203.0.113.7", "203.0.113.7"},
		{"ipv6 prefix", "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{"join", "GET:/users/:203.0.113.7", "GET:/users/:203.0.113.7"},
		{"printable ascii kept", "!\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az|~", "!\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az|~"},
		{"braces", "{tag}", "%7Btag%7D"},
		{"brace inside", "user{1}x", "user%7B1%7Dx"},
		{"percent", "100%", "100%25"},
		{"percent looks escaped", "%7B", "%257B"},
		{"space", "GET /users/{id}", "GET%20/users/%7Bid%7D"},
		{"tab newline cr", "a\tb\nc\r", "a%09b%0Ac%0D"},
		{"nul and del", "\x00\x7f", "%00%7F"},
		{"non-ascii", "é", "%C3%A9"},
		{"invalid utf-8", "\xff\xfe", "%FF%FE"},
		{"hash look-alike", "h:0123456789abcdef0123456789abcdef", "%68:0123456789abcdef0123456789abcdef"},
		{"h without colon kept", "hx", "hx"},
		{"h alone kept", "h", "h"},
		{"colon h kept", ":h:", ":h:"},
		{"128 bytes kept", strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{"129 bytes hashed", long, hashOf(long)},
		{"escaping past 128 hashed", strings.Repeat("a", 126) + "{", hashOf(strings.Repeat("a", 126) + "{")},
		{"escaping up to 128 kept", strings.Repeat("a", 125) + "{", strings.Repeat("a", 125) + "%7B"},
		{"1 MB hashed", strings.Repeat("{", 1<<20), hashOf(strings.Repeat("{", 1<<20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Sanitize(tt.in); got != tt.want {
				t.Errorf("Sanitize(%s) = %q, want %q", quoteTrunc(tt.in), got, tt.want)
			}
			checkSanitized(t, tt.in, Sanitize(tt.in))
		})
	}
}

// hashOf is the documented hashed form, computed independently.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "h:" + hex.EncodeToString(sum[:16])
}

// checkSanitized fails unless out is a valid result of Sanitize.
func checkSanitized(t *testing.T, in, out string) {
	t.Helper()
	if len(out) > MaxMaterialLen {
		t.Fatalf("Sanitize(%s) is %d bytes long", quoteTrunc(in), len(out))
	}
	if !utf8.ValidString(out) {
		t.Fatalf("Sanitize(%s) = %q is not valid UTF-8", quoteTrunc(in), out)
	}
	for i := 0; i < len(out); i++ {
		if c := out[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			t.Fatalf("Sanitize(%s) = %q holds byte %#x", quoteTrunc(in), out, c)
		}
	}
}

func TestSanitizeInjective(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	inputs := []string{
		"", "a", "a{b", "a_b", "a%7Bb", "a%257Bb", "a%b", "a%25b", "a b", "a%20b", "a+b", "a\x00b", "a%00b",
		"{", "}", "%", "%7B", "%7D", "%25", "%%", "%257B",
		"é", "%C3%A9", "\xc3\xa9", "e\u0301",
		"h:", "%68:", "h:" + strings.Repeat("0", 32), "%68:" + strings.Repeat("0", 32),
		hashOf(long), long, long + "y", long[:128], long[:127] + "{", long[:126] + "{",
		strings.Repeat("a", 128), strings.Repeat("a", 129),
	}
	seen := make(map[string]string, len(inputs))
	for _, in := range inputs {
		out := Sanitize(in)
		if prev, ok := seen[out]; ok && prev != in {
			t.Errorf("Sanitize(%s) = Sanitize(%s) = %q", quoteTrunc(in), quoteTrunc(prev), out)
		}
		seen[out] = in
	}
}

// TestSanitizeAllocs enforces the budget: clean input costs nothing.
func TestSanitizeAllocs(t *testing.T) {
	for _, tt := range []struct {
		in     string
		allocs float64
	}{
		{"203.0.113.7", 0},
		{"GET:/users/:2001:db8:1:2::/64", 0},
		{strings.Repeat("a", 128), 0},
		{"GET /users/{id}", 1},
		{strings.Repeat("a", 1000), 1}, // the result; the hash state stays on the stack
	} {
		if n := testing.AllocsPerRun(100, func() { _ = Sanitize(tt.in) }); n > tt.allocs {
			t.Errorf("Sanitize(%s): %v allocs, budget %v", quoteTrunc(tt.in), n, tt.allocs)
		}
	}
	in := "203.0.113.7"
	if out := Sanitize(in); out != in || unsafe.StringData(out) != unsafe.StringData(in) {
		t.Errorf("Sanitize(%q) = %q, a copy; want the input itself", in, out)
	}
}

func BenchmarkSanitize(b *testing.B) {
	for _, bm := range []struct{ name, in string }{
		{"clean", "GET:/users/:203.0.113.7"},
		{"escape", "GET /users/{id}:203.0.113.7"},
		{"hash-200B", strings.Repeat("k", 200)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Sanitize(bm.in)
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a{b", "a_b", "%7B", "h:00", "%68:00", "é", "\x00", strings.Repeat("{", 60)} {
		f.Add(s, s+"x")
	}
	f.Add("a{b", "a%7Bb")
	f.Add(strings.Repeat("a", 126)+"{", strings.Repeat("a", 126)+"%7B")
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := Sanitize(a), Sanitize(b)
		checkSanitized(t, a, sa)
		checkSanitized(t, b, sb)
		if (a == b) != (sa == sb) {
			t.Fatalf("Sanitize(%q) = %q, Sanitize(%q) = %q", a, sa, b, sb)
		}
		if sa == a != isClean(a) {
			t.Fatalf("Sanitize(%q) = %q: clean input must be returned unchanged, and only clean input", a, sa)
		}
	})
}

// isClean is the documented definition of material Sanitize keeps as is.
func isClean(s string) bool {
	if len(s) > MaxMaterialLen || strings.HasPrefix(s, "h:") {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || c == '{' || c == '}' || c == '%' {
			return false
		}
	}
	return true
}

// quoteTrunc quotes s for a failure message, cut to a readable length.
func quoteTrunc(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		return strconv.Quote(s[:maxLen]) + "..."
	}
	return strconv.Quote(s)
}
