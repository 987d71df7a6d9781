package browser

import (
	"context"
	"encoding/base64"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/admin"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the page's screenshot to docs/admin.png")

// browser returns the path of chromium, skipping t without one, or
// failing it with CI=true.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no chromium is installed (.ci/run installs it)")
	}
	t.Skip("chromium not installed")
	return ""
}

// service is a small API limited per client IP (5 a minute) and per user
// (X-User, skipped without one), with a shadow rule on a header, and its
// admin page on a listener of its own.
type service struct {
	api, admin *httptest.Server
	logs       logBuffer
}

// logBuffer is the service's log: written by its handlers, read by the
// test, with no happens-before edge the race detector sees between them
// (it runs through the browser).
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newService(t *testing.T) *service {
	s := &service{}
	adm, err := admin.New(admin.Config{Authorize: admin.Token("s3cret"), Logger: slog.New(slog.NewTextHandler(&s.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := adm.Source("api")
	mem, _ := memstore.New(memstore.Config{})
	ip, _ := keyfunc.IP(keyfunc.IPConfig{})
	lim, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(5)},
		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100).WithBurst(20), MissingKey: redlimit.SkipMissingKey,
			Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(1000).WithBurst(100)}},
		{Name: "search", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerSecond(2), MissingKey: redlimit.SkipMissingKey, Shadow: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{
			{Name: "ip", Key: ip},
			{Name: "user", Key: mustKey(keyfunc.Header("X-User")), Tier: func(r *http.Request) string { return r.Header.Get("X-Plan") }},
			{Name: "search", Key: mustKey(keyfunc.Header("X-User"))},
		},
		OnDecision: src.OnHTTP,
	})
	if err != nil {
		t.Fatal(err)
	}
	src.Attach(lim)
	src.DescribeKeys(map[string]string{"ip": "client IP", "user": "X-User header", "search": "X-User header"})
	s.api = httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })))
	s.admin = httptest.NewServer(http.StripPrefix("/debug", adm))
	t.Cleanup(func() { s.api.Close(); s.admin.Close(); adm.Close(); mw.Close() })
	return s
}

// get sends one request to the API and returns its status.
func (s *service) get(t *testing.T, user string) int {
	req, _ := http.NewRequest("GET", s.api.URL+"/", nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminPage drives the page in chromium: a burst from one client is
// denied, the page shows the denials and the client among the most
// denied, the lookup finds the key exhausted, Reset frees it, and the
// client's next request is allowed.
func TestAdminPage(t *testing.T) {
	exe := browser(t)
	s := newService(t)
	// A burst of 8 from this client (127.0.0.1): 5 allowed, 3 denied.
	statuses := ""
	for i := range 8 {
		user := []string{"alice", "bob", "alice", "carol", "alice", "alice", "bob", "alice"}[i]
		statuses += map[int]string{200: "A", 429: "D"}[s.get(t, user)]
	}
	if statuses != "AAAAADDD" {
		t.Fatalf("burst: %s, want AAAAADDD", statuses)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1200, 900), chromedp.NoSandbox)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("oncall:s3cret"))
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.admin.URL+"/debug/")); err != nil {
		t.Fatal(err)
	}
	// The 1m row: rule, window (and how long the page has counted, while
	// less than the window), then the counters in order: allowed 5,
	// denied 3, denied locally 0.
	if row := text("#decisions-api-ip"); !regexp.MustCompile(`^ip\s+1m( \(\d+s\))?\s+5\s+3\s+0\s`).MatchString(row) {
		t.Errorf("decisions row of ip = %q, want ip 1m 5 3 ...", row)
	}
	if top := strings.Join(strings.Fields(text("#denied-api-ip")), " "); !strings.Contains(top, "127.0.0.0/24 3 0") {
		t.Errorf("most denied of ip = %q, want 127.0.0.0/24 with 3", top)
	}
	rules := text("#rules-api")
	for _, s := range []string{"sliding_window", "5/1m0s", "client IP", "shadow", "pro: 1000/1m0s burst 100"} {
		if !strings.Contains(rules, s) {
			t.Errorf("rules table lacks %q: %q", s, rules)
		}
	}

	// Look the key up: exhausted.
	err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#lookup select[name=rule]`), "api/ip"),
		chromedp.SendKeys(chromedp.CSS(`#lookup input[name=key]`), "127.0.0.1"),
		chromedp.Click(chromedp.CSS(`#lookup button`)),
		chromedp.WaitVisible(chromedp.CSS(`#lookup-result`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if verdict, remaining := text("#lookup-verdict"), text("#lookup-remaining"); verdict != "denied" || remaining != "0" {
		t.Errorf("lookup: next %q, remaining %q; want denied, 0", verdict, remaining)
	}
	if *updateScreenshot {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../../docs/admin.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Reset it: the page says so, the key is full, the next request passes.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#reset button`)), chromedp.WaitVisible(chromedp.CSS(`#message`))); err != nil {
		t.Fatal(err)
	}
	message, verdict, remaining := text("#message"), text("#lookup-verdict"), text("#lookup-remaining")
	if !strings.Contains(message, `Reset api/ip key "127.0.0.1" (by oncall)`) || verdict != "allowed" || remaining != "5" {
		t.Errorf("after reset: message %q, next %q, remaining %q", message, verdict, remaining)
	}
	if got := s.get(t, ""); got != 200 {
		t.Errorf("the client's next request: %d, want 200", got)
	}
	if !strings.Contains(s.logs.String(), "who=oncall") || !strings.Contains(s.logs.String(), "key=127.0.0.1") {
		t.Errorf("reset log: %q", s.logs.String())
	}
}
