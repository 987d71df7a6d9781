package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
)

// transcript drives one router through the scenario and records every
// response's status and rate-limit headers.
func transcript(t *testing.T, router string) []string {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	a, err := newApp(mem, trusted, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.chiRouter()
	if router == "std" {
		h = a.stdMux()
	}
	var out []string
	do := func(method, path, user, remote, xff string) int {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = remote
		if user != "" {
			req.Header.Set("X-User-ID", user)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		hd := rec.Header()
		out = append(out, fmt.Sprintf("%s %s user=%q -> %d limit=%s remaining=%s retry=%s %s", method, path, user, rec.Code,
			hd.Get("X-Ratelimit-Limit"), hd.Get("X-Ratelimit-Remaining"), hd.Get("Retry-After"), strings.TrimSpace(string(body))))
		return rec.Code
	}
	// Payments: 5 per user per minute, then 429.
	for range 6 {
		do("POST", "/api/payments", "alice", "192.0.2.1:1234", "")
	}
	// Another user is not affected.
	do("POST", "/api/payments", "bob", "192.0.2.1:1234", "")
	// Orders: 10 per user per minute; alice's user rule (100/min) has 5 used.
	for range 11 {
		do("POST", "/api/orders", "alice", "192.0.2.1:1234", "")
	}
	// The payments denials did not consume alice's user rule: 100-5-10 = 85 left.
	do("GET", "/api/profile", "alice", "192.0.2.1:1234", "")
	// Anonymous: IP only.
	do("GET", "/api/profile", "", "192.0.2.7:1", "")
	// Behind a trusted proxy the client IP comes from X-Forwarded-For; a
	// spoofed header from an untrusted peer is ignored.
	do("GET", "/api/profile", "", "10.0.0.5:80", "198.51.100.9")
	do("GET", "/api/profile", "", "192.0.2.7:1", "198.51.100.9")
	// healthz is never limited, and unknown routes are not rate limited.
	for range 3 {
		do("GET", "/healthz", "", "192.0.2.1:1234", "")
	}
	return out
}

func TestRoutersBehaveAlike(t *testing.T) {
	chi, std := transcript(t, "chi"), transcript(t, "std")
	if len(chi) != len(std) {
		t.Fatalf("chi %d responses, std %d", len(chi), len(std))
	}
	for i := range chi {
		if chi[i] != std[i] {
			t.Errorf("step %d:\n chi: %s\n std: %s", i, chi[i], std[i])
		}
	}
	want := map[int]string{
		0:  `POST /api/payments user="alice" -> 201 limit=5 remaining=4 retry=`,
		4:  `POST /api/payments user="alice" -> 201 limit=5 remaining=0 retry=`,
		5:  `POST /api/payments user="alice" -> 429 limit=5 remaining=0 retry=60 rate limit exceeded: payments; retry in 60s`,
		6:  `POST /api/payments user="bob" -> 201 limit=5 remaining=4 retry=`,
		16: `POST /api/orders user="alice" -> 201 limit=10 remaining=0 retry=`,
		17: `POST /api/orders user="alice" -> 429 limit=10 remaining=0 retry=6 rate limit exceeded: orders; retry in 6s`,
		18: `GET /api/profile user="alice" -> 200 limit=100 remaining=84 retry=`,
		19: `GET /api/profile user="" -> 200 limit=1000 remaining=999 retry=`,
		20: `GET /api/profile user="" -> 200 limit=1000 remaining=999 retry=`,
		21: `GET /api/profile user="" -> 200 limit=1000 remaining=998 retry=`,
		22: `GET /healthz user="" -> 200 limit= remaining= retry= ok`,
	}
	for i, w := range want {
		if !strings.HasPrefix(chi[i], w) {
			t.Errorf("step %d: got %s\nwant prefix %s", i, chi[i], w)
		}
	}
}
