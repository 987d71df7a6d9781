package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/middleware"
)

// The README's quick start with chi: 100 requests a minute per API key on
// one route, counted in Redis, so every instance of the service shares the
// limit. (miniredis stands in for your Redis, with a Timeout long enough
// for go test on a loaded machine, where its first call, which loads the
// script, can take longer than the default 100ms; a service serves r with
// http.ListenAndServe and keeps the default Timeout.)
func ExamplePerHeader_chi() {
	mr, _ := miniredis.Run() // your Redis: redis.NewClient(&redis.Options{Addr: "redis:6379", ...})
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	backend, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	perKey, err := middleware.PerHeader(backend, "X-API-Key", algorithms.GCRA, algorithms.PerMinute(100),
		middleware.WithLimiterConfig(redlimit.Config{Timeout: 5 * time.Second})) // go test on a busy machine; a service keeps the default 100ms
	if err != nil {
		log.Fatal(err)
	}
	defer perKey.Close()
	r := chi.NewRouter()
	r.With(perKey.Handler).Get("/api/orders", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "your orders")
	})
	req := httptest.NewRequest("GET", "/api/orders", nil)
	req.Header.Set("X-API-Key", "k-123")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	fmt.Print(w.Code, " ", w.Header().Get("X-RateLimit-Remaining"), " ", w.Body)
	// Output: 200 99 your orders
}

// The README's quick start with http.ServeMux: 2 requests a minute per
// client IP, in process (one instance; redisstore.New for several).
func ExamplePerIP_serveMux() {
	backend, err := memstore.New(memstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	perIP, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	defer perIP.Close()

	mux := http.NewServeMux()
	mux.Handle("GET /hello", perIP.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	for range 3 {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", "/hello", nil))
		fmt.Println(w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 1 false
	// 200 0 false
	// 429 0 true
}
