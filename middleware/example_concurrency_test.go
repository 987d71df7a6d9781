package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// At most 3 exports per user in flight at once, across every instance
// (on a redisstore): a slot is taken before the handler and released
// when it returns, panics included. A slot whose instance dies comes back
// when its lease (here 30s) expires; a longer export renews its lease.
// The fourth concurrent export is denied: Retry-After is when the
// earliest lease expires, an upper bound (a slot usually frees sooner).
func ExampleNew_concurrency() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfunc.Header("X-User")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "exports", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, 30*time.Second)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{{Name: "exports", Key: user}}})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()
	var running sync.WaitGroup
	done := make(chan struct{})
	export := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Done()
		<-done // the export takes a while
	}))
	get := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/export", nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		export.ServeHTTP(w, r)
		return w
	}

	running.Add(3)
	var finished sync.WaitGroup
	for range 3 {
		finished.Go(func() { get() })
	}
	running.Wait() // three exports in flight
	w := get()
	fmt.Println(w.Code, "limit", w.Header().Get("X-RateLimit-Limit"), "remaining", w.Header().Get("X-RateLimit-Remaining"), "retry after", w.Header().Get("Retry-After"))

	close(done) // the three exports end, and free their slots
	finished.Wait()
	running.Add(1)
	w = get()
	fmt.Println(w.Code, "limit", w.Header().Get("X-RateLimit-Limit"), "remaining", w.Header().Get("X-RateLimit-Remaining"))
	// Output:
	// 429 limit 3 remaining 0 retry after 30
	// 200 limit 3 remaining 2
}
