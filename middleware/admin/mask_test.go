package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func TestMaskKey(t *testing.T) {
	secret := []byte("0123456789abcdef")
	tests := []struct{ in, want string }{
		{"192.0.2.77", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.0/24"},
		{"2001:db8:1:2::5", "2001:db8:1::/48"},
		{"2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"192.0.2.128/25", "192.0.2.0/24"},
		{"alice", "#fdbf8b1cacd3"}, // HMAC-SHA-256 under secret (openssl dgst -sha256 -hmac)
		{"h:0123abcd", "h:0123abcd"},
	}
	for _, tt := range tests {
		if got := MaskKey(secret, tt.in); got != tt.want {
			t.Errorf("MaskKey(%q, %q) = %q, want %q", secret, tt.in, got, tt.want)
		}
	}
	if got := materialOf("rate:ip:fw:{192.0.2.1}"); got != "192.0.2.1" {
		t.Errorf("materialOf = %q", got)
	}
}

// dictionary is key material an attacker would try: names, e-mail
// addresses, numeric user ids.
func dictionary() []string {
	d := []string{"alice", "bob", "carol", "admin", "root", "alice@example.com", "bob@example.com"}
	for i := range 1000 {
		d = append(d, fmt.Sprint(i), fmt.Sprintf("user-%d", i), fmt.Sprintf("user%d@example.com", i))
	}
	return d
}

// plainMask is how key material was masked before: "#" and 12 hex digits
// of its unkeyed SHA-256, which anyone can compute.
func plainMask(material string) string {
	sum := sha256.Sum256([]byte(material))
	return "#" + hex.EncodeToString(sum[:6])
}

// TestMaskKeyDictionary: no mask of a dictionary's material, under the
// process's secret or a configured one, is its plain SHA-256: hashing a
// dictionary recovers nothing. (With the unkeyed SHA-256 every one of
// them was recovered.)
func TestMaskKeyDictionary(t *testing.T) {
	plain := map[string]string{}
	for _, m := range dictionary() {
		plain[plainMask(m)] = m
	}
	h, err := newHandler(Config{Authorize: Token("t")})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range [][]byte{nil, []byte("a stable secret of the fleet")} {
		for _, m := range dictionary() {
			got := MaskKey(secret, m)
			if who, ok := plain[got]; ok {
				t.Fatalf("MaskKey(%q, %q) = %s, the plain SHA-256 of %q: a dictionary recovers it", secret, m, got, who)
			}
		}
	}
	if got := h.display("rate:user:fw:{alice}"); got == plainMask("alice") || got != MaskKey(nil, "alice") {
		t.Errorf("the page shows alice as %s, want the process's HMAC %s (not %s)", got, MaskKey(nil, "alice"), plainMask("alice"))
	}
}

// TestMaskKeySecrets: two secrets mask a key differently, one secret the
// same way every time, and a Handler masks with Config.MaskSecret.
func TestMaskKeySecrets(t *testing.T) {
	a, b := []byte("secret of fleet A..."), []byte("secret of fleet B...")
	if MaskKey(a, "alice") == MaskKey(b, "alice") {
		t.Errorf("two secrets mask alice alike: %s", MaskKey(a, "alice"))
	}
	if MaskKey(a, "alice") != MaskKey(bytes.Clone(a), "alice") {
		t.Errorf("one secret masks alice two ways")
	}
	if MaskKey(nil, "alice") == MaskKey(a, "alice") {
		t.Errorf("the process's secret masks alice as secret a does")
	}
	h, err := newHandler(Config{Authorize: Token("t"), MaskSecret: a})
	if err != nil {
		t.Fatal(err)
	}
	a[0] = 'S' // New copied it
	if got, want := h.display("rate:user:fw:{alice}"), MaskKey([]byte("secret of fleet A..."), "alice"); got != want {
		t.Errorf("a Handler with MaskSecret shows alice as %s, want %s", got, want)
	}
	_, err = newHandler(Config{Authorize: Token("t"), MaskSecret: []byte("short")})
	var ce *algorithms.ConfigError
	if !errors.As(err, &ce) || ce.Field != "admin.Config.MaskSecret" {
		t.Errorf("a 5-byte MaskSecret: %v, want a ConfigError naming admin.Config.MaskSecret", err)
	}
}

// TestMaskKeyProcesses: two processes mask a key differently by default
// (each draws its secret), and alike with one configured secret. Each
// process is this test binary running maskHelper.
func TestMaskKeyProcesses(t *testing.T) {
	if os.Getenv("REDLIMIT_MASK_HELPER") == "1" {
		maskHelper()
		return
	}
	run := func(secret string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestMaskKeyProcesses$")
		cmd.Env = append(os.Environ(), "REDLIMIT_MASK_HELPER=1", "REDLIMIT_MASK_SECRET="+secret)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper process: %v", err)
		}
		for line := range strings.Lines(string(out)) {
			if m, ok := strings.CutPrefix(strings.TrimSpace(line), "mask="); ok {
				return m
			}
		}
		t.Fatalf("helper process printed no mask: %q", out)
		return ""
	}
	p1, p2 := run(""), run("")
	if p1 == p2 {
		t.Errorf("two processes without MaskSecret show alice alike (%s): their secrets should be their own", p1)
	}
	s1, s2 := run("the fleet's shared secret"), run("the fleet's shared secret")
	if s1 != s2 {
		t.Errorf("two processes with one MaskSecret show alice as %s and %s, want one mask", s1, s2)
	}
	if s1 != MaskKey([]byte("the fleet's shared secret"), "alice") {
		t.Errorf("a process with MaskSecret shows alice as %s, want %s", s1, MaskKey([]byte("the fleet's shared secret"), "alice"))
	}
}

// maskHelper prints how a Handler configured from the environment shows
// the key material alice.
func maskHelper() {
	h, err := newHandler(Config{Authorize: Token("t"), MaskSecret: []byte(os.Getenv("REDLIMIT_MASK_SECRET"))})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("mask=" + h.display("rate:user:fw:{alice}"))
}
