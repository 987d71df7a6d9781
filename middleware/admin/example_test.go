package admin_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/admin"
)

// A service wires the admin page to its middleware: the Source's hook
// counts every decision, Attach gives it the Limiter for rules, lookups
// and resets. The page is served on an internal listener; here it is
// asked for its JSON.
func Example() {
	adm, err := admin.New(admin.Config{
		Authorize: admin.Token("s3cret"), // or your own func(*http.Request) (who string, ok bool)
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer adm.Close()
	api, _ := adm.Source("api")

	now := time.Unix(1_700_000_000, 0)
	store, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	ip, _ := keyfunc.IP(keyfunc.IPConfig{})
	lim, err := redlimit.New(store, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}},
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules:      []middleware.Rule{{Name: "ip", Key: ip}},
		OnDecision: api.OnHTTP,
	})
	if err != nil {
		panic(err)
	}
	defer mw.Close()
	api.Attach(lim)
	api.DescribeKeys(map[string]string{"ip": "client IP"})

	app := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 5 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.9:4711"
		app.ServeHTTP(httptest.NewRecorder(), r)
	}

	// http.ListenAndServe("127.0.0.1:9090", adm) in a service.
	r := httptest.NewRequest("GET", "/debug/redlimit/?format=json", nil)
	r.Header.Set("Authorization", "Bearer s3cret")
	w := httptest.NewRecorder()
	adm.ServeHTTP(w, r)
	var page struct {
		Sources []struct {
			Rules []struct {
				Name       string
				Limit      string
				Totals     map[string]uint64
				MostDenied []struct{ Key string } `json:"most_denied"`
			}
		}
	}
	json.Unmarshal(w.Body.Bytes(), &page)
	rule := page.Sources[0].Rules[0]
	fmt.Println(rule.Name, rule.Limit, "allowed", rule.Totals["allowed"], "denied", rule.Totals["denied"])
	fmt.Println("most denied:", rule.MostDenied[0].Key)
	// Output:
	// ip 3/1m0s allowed 3 denied 2
	// most denied: 203.0.113.0/24
}
