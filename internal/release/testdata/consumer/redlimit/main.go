// The root module as a consumer uses it: the HTTP middleware on the Redis
// store (a go-redis client with its defaults, here of an embedded miniredis).
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/middleware"
)

func main() {
	mr, err := miniredis.Run()
	if err != nil {
		fail(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		fail(err)
	}
	perIP, err := middleware.PerIP(store, algorithms.GCRA, algorithms.PerMinute(2))
	if err != nil {
		fail(err)
	}
	defer perIP.Close()
	h := perIP.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	var got []string
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		got = append(got, fmt.Sprintf("%d remaining=%s retry-after=%q", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After")))
	}
	want := []string{`200 remaining=1 retry-after=""`, `200 remaining=0 retry-after=""`, `429 remaining=0 retry-after="30"`}
	for i := range want {
		if got[i] != want[i] {
			fail(fmt.Errorf("request %d: %s, want %s", i+1, got[i], want[i]))
		}
	}
	fmt.Println("ok: middleware on redisstore: 200, 200, 429 with Retry-After")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
