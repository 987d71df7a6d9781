package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// A calendar quota: 10,000 requests per calendar day in Europe/Berlin for
// each API key. X-RateLimit-Reset is the next midnight in Berlin, and a
// denied request's Retry-After the seconds until then.
func ExampleNew_calendarQuota() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	now := time.Date(2028, time.January, 31, 23, 59, 50, 0, berlin)
	clock := func() time.Time { return now } // a real service leaves both Now fields nil
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	apiKey, err := keyfunc.Header("X-API-Key")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "daily", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(10_000, berlin)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{
			Name: "daily",
			Key:  apiKey,
			Cost: func(r *http.Request) int64 {
				n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
				return max(n, 1)
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for _, step := range []struct {
		at     time.Duration
		target string
	}{{0, "/batch?n=9999"}, {time.Second, "/one"}, {2 * time.Second, "/one"}, {10 * time.Second, "/one"}} {
		now = time.Date(2028, time.January, 31, 23, 59, 50, 0, berlin).Add(step.at)
		r := httptest.NewRequest("GET", step.target, nil)
		r.Header.Set("X-API-Key", "k-42")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		reset, _ := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
		fmt.Printf("%s %d remaining=%s reset=%s retry-after=%q\n", now.Format("15:04:05"), w.Code,
			w.Header().Get("X-RateLimit-Remaining"), time.Unix(reset, 0).In(berlin).Format("Jan 2 15:04"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 23:59:50 200 remaining=1 reset=Feb 1 00:00 retry-after=""
	// 23:59:51 200 remaining=0 reset=Feb 1 00:00 retry-after=""
	// 23:59:52 429 remaining=0 reset=Feb 1 00:00 retry-after="8"
	// 00:00:00 200 remaining=9999 reset=Feb 2 00:00 retry-after=""
}
