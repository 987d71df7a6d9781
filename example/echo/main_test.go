package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// TestMain starts the shared redis-server of the real-Redis tests (the
// redlimit module's internal/redistest, reachable from this nested module
// through its import path): without redis-server they skip, except in CI.
func TestMain(m *testing.M) {
	redis.SetLogger(discardRedisLog{})
	os.Exit(redistest.Main(m))
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// t0 is the fixed time of the tests: a whole second, so epoch resets are
// t0 plus whole seconds.
var t0 = time.Unix(1_700_000_000, 0)

func fixed() time.Time { return t0 }

var quiet = slog.New(slog.DiscardHandler)

// backend is a way to build a Backend on the fixed clock: in process, on
// miniredis, on a real redis-server.
type backend struct {
	name string
	new  func(t *testing.T) algorithms.Backend
}

var backends = []backend{
	{"memstore", func(t *testing.T) algorithms.Backend {
		m, err := memstore.New(memstore.Config{Now: fixed})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
	{"miniredis", func(t *testing.T) algorithms.Backend {
		mr := miniredis.RunT(t)
		client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		return redisStore(t, client)
	}},
	{"redis-server", func(t *testing.T) algorithms.Backend {
		return redisStore(t, redistest.Require(t).Client(t))
	}},
}

func redisStore(t *testing.T, client redis.Scripter) algorithms.Backend {
	t.Helper()
	s, err := redisstore.New(client, redisstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newMW builds a Limiter and its Middleware from s (see spec), defaulting
// Now to the fixed clock, Logger to quiet, Prefix to one of the test's
// own (the real redis-server is shared by the package's tests) and
// Timeout to 10s (a call that a busy machine delays past the default
// 100ms would be decided by the fallback, and exact counts would be split
// between two backends), and closes both when t ends.
func newMW(t testing.TB, b algorithms.Backend, s spec) *middleware.Middleware {
	t.Helper()
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Now == nil {
		s.Now = fixed
	}
	if s.Logger == nil {
		s.Logger = quiet
	}
	if s.Prefix == "" {
		s.Prefix = prefix(t)
	}
	return s.New(t, b)
}

// prefix is a storage-key prefix of t's own: its name, with the
// characters a prefix may not hold replaced.
func prefix(t testing.TB) string {
	return "t-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '.'
	}, t.Name())
}

// ipFunc is keyfunc.IP trusting no proxy.
func ipFunc(t testing.TB) keyfunc.Func {
	t.Helper()
	f, err := keyfunc.IP(keyfunc.IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// req builds a request from remote with header pairs ("Name", "value", ...).
func req(method, target, remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// created is an Echo handler: 200, "created\n".
func created(c echo.Context) error { return c.String(http.StatusOK, "created\n") }

// rateHeaders are every field the middleware may write, and those its
// default deny and error answers set.
var rateHeaders = []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After",
	"Ratelimit-Policy", "Ratelimit", "Content-Type", "X-Content-Type-Options", "Cache-Control"}

// response is what a client sees of an answer: status, the rate headers,
// body.
type response struct {
	code   int
	header map[string]string
	body   string
}

func responseOf(w *httptest.ResponseRecorder) response {
	h := map[string]string{}
	for _, k := range rateHeaders {
		if v := w.Header().Values(k); len(v) > 0 {
			h[k] = strings.Join(v, " | ")
		}
	}
	b, _ := io.ReadAll(w.Body)
	return response{w.Code, h, string(b)}
}
