package admin

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// fullHandler is a Handler with one source of 16 rules whose summaries
// are full: each rule saw 5,000 keys, an IP in one of 64 /24s and a user
// ID; the windows have all their history.
func fullHandler(tb testing.TB) *Handler {
	h, err := newHandler(Config{Authorize: Token("t")})
	if err != nil {
		tb.Fatal(err)
	}
	mem, _ := memstore.New(memstore.Config{})
	var rules []redlimit.Rule
	for i := range 16 {
		rules = append(rules, redlimit.Rule{Name: "rule" + strconv.Itoa(i), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100),
			Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(1000)}})
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: rules})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	src, _ := h.Source("api")
	src.Attach(e)
	d := redlimit.Decision{Source: redlimit.SourcePrimary, Rules: make([]redlimit.RuleDecision, 16)}
	keys := make([]string, 5000)
	for i := range keys {
		if i%2 == 0 {
			keys[i] = "rate:r:gcra:{10." + strconv.Itoa(i%64) + ".0." + strconv.Itoa(i%250) + "}"
		} else {
			keys[i] = "rate:r:gcra:{user-" + strconv.Itoa(i) + "}"
		}
	}
	for tick := range ringLen {
		for i, k := range keys {
			for r := range d.Rules {
				d.Rules[r] = redlimit.RuleDecision{Name: rules[r].Name, Key: k, Evaluated: true, Result: algorithms.Result{Limit: 100, Allowed: i%3 != 0}}
			}
			d.Latency = time.Duration(1000 + 10*i)
			src.observe(&d)
		}
		if tick < ringLen-1 {
			h.advance()
		}
	}
	return h
}

// BenchmarkPage: the page and its JSON with 16 rules and full summaries.
// The target is under 10 ms a page.
func BenchmarkPage(b *testing.B) {
	h := fullHandler(b)
	for _, format := range []string{"html", "json"} {
		b.Run(format, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/?format="+format, nil)
			r.Header.Set("Authorization", "Bearer t")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
