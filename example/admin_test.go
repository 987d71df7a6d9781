package main

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/admin"
)

// TestAdminPage: the example's admin page counts the per-route rules of
// the layered limiters, each rule once, and refuses a request without
// the token.
func TestAdminPage(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	mem, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	adm, err := admin.New(admin.Config{Authorize: admin.Token("tok"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	src, _ := adm.Source("example")
	a, err := newApp(mem, nil, slog.New(slog.DiscardHandler), src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.chiRouter()
	for range 7 { // payments: 5 a minute per user
		r := httptest.NewRequest("POST", "/api/payments", nil)
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("X-User-ID", "alice")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	r := httptest.NewRequest("GET", "/debug/redlimit/?format=json", nil)
	w := httptest.NewRecorder()
	adm.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatalf("without the token: %d, want 401", w.Code)
	}
	r.Header.Set("Authorization", "Bearer tok")
	w = httptest.NewRecorder()
	adm.ServeHTTP(w, r)
	var page struct {
		Sources []struct {
			Rules []struct {
				Name   string            `json:"name"`
				Totals map[string]uint64 `json:"totals"`
			} `json:"rules"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || len(page.Sources) != 1 {
		t.Fatalf("page: %d %s", w.Code, w.Body)
	}
	got := map[string]map[string]uint64{}
	var names []string
	for _, r := range page.Sources[0].Rules {
		names = append(names, r.Name)
		got[r.Name] = r.Totals
	}
	if len(names) != 4 || names[0] != "ip" || names[1] != "user" || names[2] != "orders" || names[3] != "payments" {
		t.Fatalf("rules %v, want [ip user orders payments]", names)
	}
	if p := got["payments"]; p["allowed"] != 5 || p["denied"] != 2 {
		t.Errorf("payments totals %v, want 5 allowed, 2 denied", p)
	}
	if ip := got["ip"]; ip["allowed"] != 7 {
		t.Errorf("ip totals %v, want 7 allowed", ip)
	}
}

func TestListenLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0"} {
		if ln, err := listenLoopback(addr); err == nil {
			ln.Close()
			t.Errorf("listenLoopback(%q) = nil error, want a refusal", addr)
		}
	}
	ln, err := listenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
