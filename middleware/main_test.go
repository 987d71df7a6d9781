package middleware_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// TestMain starts the shared redis-server the real-Redis benchmarks use.
// The failure-policy tests start (and kill) servers of their own.
// go-redis's own log lines (failed dials while a test has killed its
// server) are dropped.
func TestMain(m *testing.M) {
	redis.SetLogger(discardRedisLog{})
	os.Exit(redistest.Main(m))
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// t0 is the fixed time of the tests: a whole second, so epoch resets are
// t0 plus whole seconds.
var t0 = time.Unix(1_700_000_000, 0)

func fixed() time.Time { return t0 }

const epoch0 = 1_700_000_000

// quiet is a logger that drops everything: error-policy tests would
// otherwise fill the test output with warnings.
var quiet = slog.New(slog.DiscardHandler)

// newMemory returns a Memory backend on clock now.
func newMemory(t testing.TB, now func() time.Time) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Config{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newMW builds a Limiter and its Middleware from s (see spec), defaulting
// Now to the fixed clock, Logger to quiet and Timeout to 10s, and closes
// both when t ends. The default 100ms Timeout is a race against the wall
// clock that a loaded machine loses: a call to a real redis-server or
// miniredis (or to a stub run from the limiter's guard goroutine) past it
// is refused, and after FallbackAfter of such failures the fallback
// decides, so exact counts would split between two backends. Tests whose
// point is a timeout set Timeout themselves.
func newMW(t testing.TB, b algorithms.Backend, s spec) *middleware.Middleware {
	t.Helper()
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Now == nil {
		s.Now = fixed
	}
	if s.Logger == nil {
		s.Logger = quiet
	}
	mw, err := build(b, s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { mw.Close() })
	return mw
}

// ipFunc is keyfunc.IP trusting no proxy.
func ipFunc(t testing.TB) keyfunc.Func {
	t.Helper()
	f, err := keyfunc.IP(keyfunc.IPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// userFunc keys a request by the X-User header an authentication layer
// would have checked; anonymous without it.
var userFunc = mustKey(keyfunc.User(func(r *http.Request) (string, bool) {
	u := r.Header.Get("X-User")
	return u, u != ""
}))

// ok is the next handler: 200 with body "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// req builds a request from remote with header pairs ("Name", "value", ...).
func req(method, target, remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// rateHeaders are every field the middleware may write.
var rateHeaders = []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After", "Ratelimit-Policy", "Ratelimit"}

// limitHeaders returns the rate-limit fields of h, each field's lines
// joined with "\n"; absent fields are left out.
func limitHeaders(h http.Header) map[string]string {
	got := map[string]string{}
	for _, k := range rateHeaders {
		if v, ok := h[k]; ok {
			got[k] = strings.Join(v, "\n")
		}
	}
	return got
}

// checkResponse compares a response's status and its rate-limit fields,
// exactly: a field absent from want must be absent.
func checkResponse(t *testing.T, step string, w *httptest.ResponseRecorder, code int, want map[string]string) {
	t.Helper()
	if w.Code != code {
		t.Errorf("%s: status %d, want %d (body %q)", step, w.Code, code, w.Body.String())
	}
	if got := limitHeaders(w.Header()); !maps.Equal(got, want) {
		t.Errorf("%s: headers\n got %v\nwant %v", step, fmtHeaders(got), fmtHeaders(want))
	}
}

func fmtHeaders(h map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		b.WriteString(k + ": " + h[k] + "; ")
	}
	return b.String()
}

// xHeaders are the X-RateLimit fields with an epoch reset, plus
// Retry-After when retry is not "".
func xHeaders(limit, remaining string, reset int64, retry string) map[string]string {
	h := map[string]string{
		"X-Ratelimit-Limit":     limit,
		"X-Ratelimit-Remaining": remaining,
		"X-Ratelimit-Reset":     itoa(reset),
	}
	if retry != "" {
		h["Retry-After"] = retry
	}
	return h
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// recorder collects the decisions given to Config.OnDecision, copied.
type recorder struct {
	mu   sync.Mutex
	got  []redlimit.Decision
	reqs []*http.Request
}

func (rec *recorder) hook(r *http.Request, d *redlimit.Decision) {
	c := *d
	c.Rules = slices.Clone(d.Rules)
	rec.mu.Lock()
	rec.got = append(rec.got, c)
	rec.reqs = append(rec.reqs, r)
	rec.mu.Unlock()
}

func (rec *recorder) last(t *testing.T) redlimit.Decision {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) == 0 {
		t.Fatal("OnDecision never called")
	}
	return rec.got[len(rec.got)-1]
}

func (rec *recorder) len() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.got)
}

// syncBuffer is a bytes.Buffer safe for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// slogTo returns a text logger at Info writing to w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// latencyMargin is how much later than its deadline a request may return
// on this machine, now: 150ms plus 20 times the worst lateness of a 10ms
// timer measured now. A loaded machine wakes timers late, and a request's
// deadline is a timer too; a missing deadline shows as a wait for the
// backend (seconds, or forever), far past any such margin. Tests measure
// it before and after the requests they bound, and keep the larger.
func latencyMargin() time.Duration {
	var late time.Duration
	for range 5 {
		start := time.Now()
		time.Sleep(10 * time.Millisecond)
		late = max(late, time.Since(start)-10*time.Millisecond)
	}
	return 150*time.Millisecond + 20*late + 3*schedWaitSinceLast()
}

// schedWait holds the scheduler's latencies as the last call of
// schedWaitSinceLast read them.
var schedWait struct {
	sync.Mutex
	last redistest.SchedHist
	read bool
}

// schedWaitSinceLast returns the longest time a goroutine of the process
// waited, runnable, for a CPU since the previous call: on a machine whose
// other processes keep the CPUs busy, the requests timed between two calls
// of latencyMargin may have waited that long, more than once, for reasons
// that are not the limiter's.
func schedWaitSinceLast() time.Duration {
	now := redistest.SchedLatencies()
	schedWait.Lock()
	defer schedWait.Unlock()
	var d time.Duration
	if schedWait.read {
		d = now.Since(schedWait.last).Quantile(1)
	}
	schedWait.last, schedWait.read = now, true
	return d
}

// waitFor polls cond for up to 10 seconds: what it waits for happens at
// once or never, and a loaded machine may take a while.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func runtimeGoroutines() int { return runtime.NumGoroutine() }

// waitGoroutines waits up to 10 seconds for the number of goroutines to come
// back to base, and fails with every stack when it does not. No slack: the
// tests using it do not run in parallel, and go-redis keeps no goroutine
// once its client is closed, so a single leaked probe or call shows.
func waitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the test:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
