package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// Count only failed logins: 3 wrong passwords an hour per user. The
// check is made before the handler, so a locked user is refused without
// reaching it; a login that succeeds gives its unit back after the
// response. The headers, written before the handler, count the request's
// own reservation.
func ExampleRule_responseCost() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfunc.Header("X-User")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(3), Refundable: true}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{
			Name: "login",
			Key:  user,
			ResponseCost: func(status int, _ int64) int64 {
				if status == http.StatusUnauthorized || status == http.StatusForbidden {
					return 1
				}
				return 0
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	login := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "secret" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "welcome")
	}))
	for _, pw := range []string{"secret", "guess1", "secret", "guess2", "guess3", "guess4", "secret"} {
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-User", "alice")
		r.Header.Set("X-Password", pw)
		w := httptest.NewRecorder()
		login.ServeHTTP(w, r)
		fmt.Printf("%-6s -> %d, %s failed logins left\n", pw, w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// secret -> 200, 2 failed logins left
	// guess1 -> 401, 2 failed logins left
	// secret -> 200, 1 failed logins left
	// guess2 -> 401, 1 failed logins left
	// guess3 -> 401, 0 failed logins left
	// guess4 -> 429, 0 failed logins left
	// secret -> 429, 0 failed logins left
}
