package keyfunc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// A service behind two load balancers in 10.0.0.0/8 keys clients by the
// address their balancer appends to X-Forwarded-For; whatever the client
// wrote itself, to the left, does not count.
func ExampleIP() {
	proxies, err := keyfunc.ParseTrustedProxies("10.0.0.0/8", "2001:db8:ffff::/48")
	if err != nil {
		panic(err)
	}
	clientIP, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: proxies})
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:51234"                                   // the inner balancer
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.1") // spoofed, client, outer balancer
	fmt.Println(clientIP(r))

	r.RemoteAddr = "198.51.100.9:40000" // not a proxy: its header is ignored
	fmt.Println(clientIP(r))

	r.RemoteAddr = "[2001:db8:1:2::77]:40000" // IPv6 clients are grouped by /64
	fmt.Println(clientIP(r))
	// Output:
	// 203.0.113.7 <nil>
	// 198.51.100.9 <nil>
	// 2001:db8:1:2::/64 <nil>
}

// A missing key is an error wrapping ErrNoKey, never an empty key.
func ExampleHeader() {
	apiKey, err := keyfunc.Header("X-API-Key")
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	_, err = apiKey(r)
	fmt.Println(errors.Is(err, keyfunc.ErrNoKey))
	fmt.Println(err)

	r.Header.Set("X-API-Key", "k-123")
	fmt.Println(apiKey(r))
	// Output:
	// true
	// redlimit: keyfunc Header("X-API-Key"): header absent
	// k-123 <nil>
}

// A key func that could never find a key is refused when it is built,
// with a configuration error naming the argument.
func ExampleHeader_invalidName() {
	_, err := keyfunc.Header("")
	fmt.Println(err)
	fmt.Println(errors.Is(err, algorithms.ErrInvalidConfig))
	// Output:
	// redlimit: keyfunc.Header name must not be empty
	// true
}

// One bucket per endpoint and client.
func ExampleJoin() {
	clientIP, err := keyfunc.IP(keyfunc.IPConfig{})
	if err != nil {
		panic(err)
	}
	key, err := keyfunc.Join(keyfunc.Const("login"), keyfunc.Method(), clientIP)
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest(http.MethodPost, "/login", nil)
	r.RemoteAddr = "203.0.113.7:1234"
	fmt.Println(key(r))
	// Output:
	// login:POST:203.0.113.7 <nil>
}

type userKey struct{}

// Signed-in users are limited by their ID, anonymous requests by their IP.
// The prefixes keep the two key spaces apart.
func ExampleOr() {
	clientIP, err := keyfunc.IP(keyfunc.IPConfig{})
	if err != nil {
		panic(err)
	}
	userID, err := keyfunc.ContextValue(userKey{})
	if err != nil {
		panic(err)
	}
	user, err := keyfunc.Join(keyfunc.Const("user"), userID)
	if err != nil {
		panic(err)
	}
	ip, err := keyfunc.Join(keyfunc.Const("ip"), clientIP)
	if err != nil {
		panic(err)
	}
	key, err := keyfunc.Or(user, ip)
	if err != nil {
		panic(err)
	}

	anonymous := httptest.NewRequest(http.MethodGet, "/", nil)
	anonymous.RemoteAddr = "203.0.113.7:1234"
	fmt.Println(key(anonymous))

	signedIn := anonymous.WithContext(context.WithValue(anonymous.Context(), userKey{}, "alice"))
	fmt.Println(key(signedIn))
	// Output:
	// ip:203.0.113.7 <nil>
	// user:alice <nil>
}

// Route reads the pattern http.ServeMux matched, so the limiter wraps the
// handler registered on the mux. A pattern without a method is one bucket
// for every method.
func ExampleRoute() {
	route := keyfunc.Route()
	limiter := func(next http.Handler) http.Handler { // stands in for the rate-limit middleware
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Println(route(r))
			next.ServeHTTP(w, r)
		})
	}
	show := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", limiter(show))
	mux.Handle("/static/", limiter(show))

	for _, target := range []string{"/users/42", "/users/43", "/static/app.js"} {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
	}

	// Wrapped around the whole mux, the limiter runs before routing.
	_, err := route(httptest.NewRequest(http.MethodGet, "/users/42", nil))
	fmt.Println(errors.Is(err, keyfunc.ErrNoKey))
	// Output:
	// GET /users/{id} <nil>
	// GET /users/{id} <nil>
	// /static/ <nil>
	// true
}
