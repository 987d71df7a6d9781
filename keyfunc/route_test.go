package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// keyRecorder is a stand-in for the rate-limit middleware: it computes the
// key of each request it sees, then calls the next handler.
type keyRecorder struct {
	fn  Func
	key string
	err error
	ran bool
}

func (k *keyRecorder) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.key, k.err = k.fn(r)
		k.ran = true
		next.ServeHTTP(w, r)
	})
}

var ok = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func serve(h http.Handler, method, target string) {
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, target, nil))
}

func TestRouteServeMux(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, method, target, want string
	}{
		{"GET /api/x", http.MethodGet, "/api/x", "GET /api/x"},
		{"GET /users/{id}", http.MethodGet, "/users/42", "GET /users/{id}"},
		{"GET /users/{id}", http.MethodHead, "/users/42", "GET /users/{id}"},
		{"POST /users/{id}/avatar", http.MethodPost, "/users/7/avatar", "POST /users/{id}/avatar"},
		{"GET /files/{path...}", http.MethodGet, "/files/a/b/c", "GET /files/{path...}"},
		{"GET  \t/spaced", http.MethodGet, "/spaced", "GET /spaced"},
		{"/static/", http.MethodGet, "/static/app.js", "/static/"},
		{"/any", http.MethodDelete, "/any", "/any"},
		{"/any", "PROPFIND", "/any", "/any"},
		{"example.com/host", http.MethodPut, "http://example.com/host", "example.com/host"},
		{"GET example.com/h2", http.MethodGet, "http://example.com/h2", "GET example.com/h2"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			rec := &keyRecorder{fn: Route()}
			mux := http.NewServeMux()
			mux.Handle(tt.pattern, rec.Handler(ok))
			serve(mux, tt.method, tt.target)
			if !rec.ran || rec.err != nil || rec.key != tt.want {
				t.Errorf("Route() under ServeMux pattern %q, %s %s = %q, %v (ran %v); want %q",
					tt.pattern, tt.method, tt.target, rec.key, rec.err, rec.ran, tt.want)
			}
		})
	}
}

func TestRouteServeMuxOutside(t *testing.T) {
	t.Parallel()
	// Wrapping the whole mux runs before routing: no pattern yet.
	rec := &keyRecorder{fn: Route()}
	mux := http.NewServeMux()
	mux.Handle("GET /x", ok)
	serve(rec.Handler(mux), http.MethodGet, "/x")
	if !errors.Is(rec.err, ErrNoKey) || rec.key != "" {
		t.Errorf("Route() around the mux = %q, %v; want ErrNoKey", rec.key, rec.err)
	}
}

func TestRouteChi(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mount  func(r chi.Router, mw func(http.Handler) http.Handler)
		method string
		target string
		want   string
	}{
		{"with", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Get("/users/{id}", ok)
		}, http.MethodGet, "/users/42", "/users/{id}"},
		{"with any method", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Handle("/any", ok)
		}, http.MethodPatch, "/any", "/any"},
		{"with method in pattern", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Handle("POST /login", ok)
		}, http.MethodPost, "/login", "/login"}, // chi strips the method
		{"with regexp param", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Get("/articles/{slug:[a-z-]+}", ok)
		}, http.MethodGet, "/articles/hello-world", "/articles/{slug:[a-z-]+}"},
		{"group", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.Group(func(r chi.Router) {
				r.Use(mw)
				r.Post("/orders/{id}", ok)
			})
		}, http.MethodPost, "/orders/9", "/orders/{id}"},
		{"sub-router", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.Route("/api", func(r chi.Router) {
				r.With(mw).Get("/items/{id}", ok)
			})
		}, http.MethodGet, "/api/items/3", "/api/items/{id}"},
		{"mounted router", func(r chi.Router, mw func(http.Handler) http.Handler) {
			sub := chi.NewRouter()
			sub.With(mw).Delete("/{id}", ok)
			r.Mount("/v1/things", sub)
		}, http.MethodDelete, "/v1/things/5", "/v1/things/{id}"},
		{"wildcard", func(r chi.Router, mw func(http.Handler) http.Handler) {
			r.With(mw).Get("/files/*", ok)
		}, http.MethodGet, "/files/a/b", "/files/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &keyRecorder{fn: Route()}
			r := chi.NewRouter()
			tt.mount(r, rec.Handler)
			serve(r, tt.method, tt.target)
			if !rec.ran || rec.err != nil || rec.key != tt.want {
				t.Errorf("Route() in chi (%s), %s %s = %q, %v (ran %v); want %q",
					tt.name, tt.method, tt.target, rec.key, rec.err, rec.ran, tt.want)
			}
		})
	}
}

func TestRouteChiTopLevelUse(t *testing.T) {
	t.Parallel()
	rec := &keyRecorder{fn: Route()}
	r := chi.NewRouter()
	r.Use(rec.Handler)
	r.Get("/users/{id}", ok)
	serve(r, http.MethodGet, "/users/42")
	if !rec.ran || !errors.Is(rec.err, ErrNoKey) || rec.key != "" {
		t.Fatalf("Route() in a top-level chi r.Use = %q, %v (ran %v); want ErrNoKey", rec.key, rec.err, rec.ran)
	}
	var e *Error
	if !errors.As(rec.err, &e) || e.Func != "Route" || !strings.Contains(e.Reason, "r.With") {
		t.Errorf("Route() error %q does not say where to mount the limiter", rec.err)
	}
}

func TestRouteAllocs(t *testing.T) {
	fn := Route()
	r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
	r.Pattern = "GET /users/{id}"
	if n := testing.AllocsPerRun(100, func() { _, _ = fn(r) }); n != 0 {
		t.Errorf("Route() with a stdlib pattern: %v allocs, want 0", n)
	}
	r.Pattern = "/users/{id}"
	if n := testing.AllocsPerRun(100, func() { _, _ = fn(r) }); n != 0 {
		t.Errorf("Route() with a pattern without a method: %v allocs, want 0", n)
	}
}

func TestMethod(t *testing.T) {
	t.Parallel()
	fn := Method()
	for _, tt := range []struct{ method, want string }{
		{"GET", "GET"}, {"HEAD", "HEAD"}, {"POST", "POST"}, {"PUT", "PUT"}, {"PATCH", "PATCH"},
		{"DELETE", "DELETE"}, {"CONNECT", "CONNECT"}, {"OPTIONS", "OPTIONS"}, {"TRACE", "TRACE"},
		{"PROPFIND", otherMethod}, {"get", otherMethod}, {"M1", otherMethod}, {otherMethod, otherMethod},
		{strings.Repeat("X", 1000), otherMethod},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method = tt.method
		if got, err := fn(r); err != nil || got != tt.want {
			t.Errorf("Method()(%.20s) = %q, %v; want %q", tt.method, got, err, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Method = ""
	if got, err := fn(r); err != nil || got != "GET" {
		t.Errorf(`Method()("") = %q, %v; want "GET"`, got, err)
	}
}
