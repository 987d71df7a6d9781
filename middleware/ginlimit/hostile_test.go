package ginlimit_test

import (
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

// hostileEngine is a gin engine, without gin.Recovery (a panic reaches
// the test), limited per client IP behind trusted proxies in 10.0.0.0/8,
// per API key when there is one, and per route, recording every storage
// key decided.
func hostileEngine(t *testing.T) (*gin.Engine, *decisions) {
	trusted, err := keyfunc.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{TrustedProxies: trusted})
	if err != nil {
		t.Fatal(err)
	}
	var rec decisions
	mw := newMW(t, backends[0].new(t), spec{
		Rules: []specRule{
			{Name: "ip", Key: ip, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)},
			{Name: "key", Key: mustKey(keyfunc.Header("X-API-Key")), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000), MissingKey: redlimit.SkipMissingKey},
			{Name: "route", Key: mustKey(keyfunc.Or(keyfunc.Route(), keyfunc.Const("no-route"))), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000)},
		},
		OnDecision: rec.hook,
	})
	r := gin.New()
	r.Use(ginlimit.Handler(mw))
	r.GET("/users/:id", func(c *gin.Context) { c.String(200, "user %q", c.Param("id")) })
	r.Any("/files/*path", func(c *gin.Context) { c.String(200, "file %q", c.Param("path")) })
	return r, &rec
}

// TestHostileRequests: whatever a client sends (forged, huge or binary
// forwarding headers and keys, odd methods and paths, no address) the
// limiter answers without a panic, every storage key is bounded and has
// exactly one pair of braces, and the answer is one a client may get.
func TestHostileRequests(t *testing.T) {
	huge := strings.Repeat("1.2.3.4, ", 10_000)
	binary := "\x00\xff{}%\r\n\t é \x7f"
	tests := []struct {
		name   string
		method string
		target string
		remote string
		hdr    []string
	}{
		{"huge forwarded-for from a trusted proxy", "GET", "/users/1", "10.0.0.1:1", []string{"X-Forwarded-For", huge}},
		{"binary forwarded-for from a trusted proxy", "GET", "/users/1", "10.0.0.1:1", []string{"X-Forwarded-For", binary, "X-Forwarded-For", binary}},
		{"Forwarded with junk", "GET", "/users/1", "10.0.0.1:1", []string{"Forwarded", `for="[::1"; by=}{, for=` + binary}},
		{"huge API key", "GET", "/users/1", "203.0.113.7:1", []string{"X-API-Key", strings.Repeat("{", 1<<20)}},
		{"binary API key", "GET", "/users/1", "203.0.113.7:1", []string{"X-API-Key", binary}},
		{"several API keys", "GET", "/users/1", "203.0.113.7:1", []string{"X-API-Key", "a", "X-API-Key", "b"}},
		{"hostile Accept", "GET", "/users/1", "203.0.113.7:1", []string{"Accept", strings.Repeat("application/problem+json;q=", 1000)}},
		{"encoded path", "GET", "/users/%00%ff%7B", "203.0.113.7:1", nil},
		{"dot segments", "GET", "/files/../../etc/passwd", "203.0.113.7:1", nil},
		{"made-up method", "FROB", "/files/a", "203.0.113.7:1", nil},
		{"no route", "GET", "/" + strings.Repeat("x", 10_000), "203.0.113.7:1", nil},
		{"no address", "GET", "/users/1", "", nil},
		{"address without port", "GET", "/users/1", "garbage", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, rec := hostileEngine(t)
			for i := range 4 {
				w := httptest.NewRecorder()
				func() {
					defer func() {
						if v := recover(); v != nil {
							t.Fatalf("request %d panicked: %v", i+1, v)
						}
					}()
					r.ServeHTTP(w, req(tt.method, tt.target, tt.remote, tt.hdr...))
				}()
				switch w.Code {
				case 200, 404, 405, 429:
				default:
					t.Errorf("request %d: status %d", i+1, w.Code)
				}
			}
			for _, k := range rec.take() {
				if len(k) > 200 || k != "" && (strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1) {
					t.Errorf("storage key %q (%d bytes): want at most 200 bytes and one pair of braces", k, len(k))
				}
			}
		})
	}
}

// TestHostileForwardedFor: a client that is not a trusted proxy cannot
// change its bucket with forwarding headers: its fourth request in a
// minute is refused, each time with a new forged address.
func TestHostileForwardedFor(t *testing.T) {
	r, rec := hostileEngine(t)
	var got []string
	for i := range 4 {
		w := serve(r, req("GET", "/users/"+strconv.Itoa(i), "203.0.113.7:"+strconv.Itoa(40000+i), "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)))
		got = append(got, strconv.Itoa(w.Code)+" "+rec.take()[0])
	}
	pfx := prefix(t)
	want := []string{"200 " + pfx + ":ip:gcra:{203.0.113.7}", "200 " + pfx + ":ip:gcra:{203.0.113.7}", "200 " + pfx + ":ip:gcra:{203.0.113.7}", "429 " + pfx + ":ip:gcra:{203.0.113.7}"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("got %q,\nwant %q", got, want)
	}
}
