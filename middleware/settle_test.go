package middleware_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware"
)

// failedLogins costs 1 for a 401 or 403, nothing otherwise.
func failedLogins(status int, _ int64) int64 {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return 1
	}
	return 0
}

// login answers 200 to the password "right", 401 to any other.
var login = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Password") != "right" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "welcome")
})

// loginRules limit failed logins per IP and per user, 5 per hour each.
func loginRules(t testing.TB, alg algorithms.Algorithm) []specRule {
	return []specRule{
		{Name: "login-ip", Key: ipFunc(t), Algorithm: alg, Limit: algorithms.PerHour(5), ResponseCost: failedLogins},
		{Name: "login-user", Key: userFunc, Algorithm: alg, Limit: algorithms.PerHour(5), ResponseCost: failedLogins},
	}
}

// failedLoginsConcurrently runs 64 goroutines × 8 logins of one user from
// one IP through h (on a clock that stands still), one in forty with a
// wrong password, then wrong passwords one after another until one is
// refused: over the run exactly 5 failed logins reach the handler. Before
// that, 10 successful logins one after another all pass: beyond the
// limit, since each is given back.
func failedLoginsConcurrently(t *testing.T, mw *middleware.Middleware) {
	t.Helper()
	h := mw.Handler(login)
	var failed, succeeded, refused atomic.Int64
	attempt := func(right bool) int {
		pw := "wrong"
		if right {
			pw = "right"
		}
		w := serve(h, req("POST", "/login", "203.0.113.7:1234", "X-User", "alice", "X-Password", pw))
		switch w.Code {
		case http.StatusUnauthorized:
			failed.Add(1)
		case http.StatusOK:
			succeeded.Add(1)
		case http.StatusTooManyRequests:
			refused.Add(1)
		default:
			t.Errorf("status %d", w.Code)
		}
		return w.Code
	}
	// first, one after another: a successful login is given back before
	// the next starts, so 10 succeed where no more than 5 could without
	// refunds (under 64 goroutines how many succeed depends on how soon
	// the refunds land, so that phase only counts the failed ones)
	for i := range 10 {
		if code := attempt(true); code != http.StatusOK {
			t.Fatalf("sequential login %d: status %d, want 200", i, code)
		}
		waitFor(t, "the refund", func() bool { return middleware.Pending(mw) == 0 })
	}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 8 {
				attempt((g*8+i)%40 != 39)
			}
		})
	}
	wg.Wait()
	// the refunds of the successful logins are made after their responses
	waitFor(t, "the refunds", func() bool { return middleware.Pending(mw) == 0 })
	for attempt(false) != http.StatusTooManyRequests {
	}
	if got := failed.Load(); got != 5 {
		t.Fatalf("%d failed logins reached the handler, want exactly 5 (%d succeeded, %d refused)", got, succeeded.Load(), refused.Load())
	}
}

// TestFailedLoginsExactConcurrent: "count only failed logins" under 64
// goroutines, exact on every algorithm, in memory, on a real
// redis-server (with the deny cache) and on a real 3-master cluster (the
// per-IP and per-user keys in different hash slots).
func TestFailedLoginsExactConcurrent(t *testing.T) {
	for _, alg := range refundable {
		t.Run("memory/"+alg.String(), func(t *testing.T) {
			mw := newMW(t, newMemory(t, fixed), spec{Rules: loginRules(t, alg)})
			failedLoginsConcurrently(t, mw)
		})
	}
	srv := redistest.Require(t)
	for _, alg := range refundable {
		t.Run("redis/"+alg.String(), func(t *testing.T) {
			b, err := redisstore.New(srv.Client(t), redisstore.Config{Now: fixed})
			if err != nil {
				t.Fatal(err)
			}
			mw := newMW(t, b, spec{Prefix: settlePrefix(t), Timeout: 10 * time.Second, Rules: loginRules(t, alg)})
			failedLoginsConcurrently(t, mw)
		})
	}
	redistest.RequireCluster(t)
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	client := cl.Client(t)
	for _, alg := range refundable {
		t.Run("cluster/"+alg.String(), func(t *testing.T) {
			b, err := redisstore.New(client, redisstore.Config{Now: fixed})
			if err != nil {
				t.Fatal(err)
			}
			mw := newMW(t, b, spec{Prefix: settlePrefix(t), Timeout: 10 * time.Second, Rules: loginRules(t, alg)})
			failedLoginsConcurrently(t, mw)
		})
	}
}

// settlePrefix is a Config.Prefix unique to t.
func settlePrefix(t *testing.T) string {
	return "settle" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// TestRefundOn5xx: a rule that gives back the request's cost when the
// handler fails (a 5xx, or a panic before any status) charges only the
// requests the handler served; the headers are those of the reservation.
func TestRefundOn5xx(t *testing.T) {
	mem := newMemory(t, fixed)
	var settleErrs []error
	var mu sync.Mutex
	mw := newMW(t, mem, spec{
		OnSettleError: func(_ *http.Request, err error) { mu.Lock(); settleErrs = append(settleErrs, err); mu.Unlock() },
		Rules: []specRule{{
			Name: "api", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10),
			Cost: func(*http.Request) int64 { return 2 },
			ResponseCost: func(status int, written int64) int64 {
				switch {
				case status >= 500:
					return 0
				case written > 100:
					return 99 // above the reservation: an error, the reservation stays
				case status == http.StatusTeapot:
					return -1 // negative: an error, the reservation stays
				}
				return 2
			},
		}},
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			http.Error(w, "down", http.StatusBadGateway)
		case "/panic":
			panic(http.ErrAbortHandler)
		case "/big":
			w.Write(make([]byte, 200))
		case "/teapot":
			w.WriteHeader(http.StatusTeapot)
		default:
			io.WriteString(w, "ok")
		}
	}))
	remaining := func() int64 {
		return mw.Limiter().Peek(t.Context(), "203.0.113.7").Rules[0].Result.Remaining
	}
	steps := []struct {
		path   string
		code   int
		header string // X-RateLimit-Remaining: the reservation's
		left   int64  // after the settle
	}{
		{"/", 200, "8", 8},
		{"/fail", 502, "6", 8},
		{"/", 200, "6", 6},
		{"/big", 200, "4", 4},
		{"/teapot", 418, "2", 2},
		{"/fail", 502, "0", 2},
		{"/", 200, "0", 0},
		{"/fail", 429, "0", 0},
	}
	for _, st := range steps {
		w := httptest.NewRecorder()
		func() {
			defer func() { recover() }()
			h.ServeHTTP(w, req("GET", st.path, "203.0.113.7:1"))
		}()
		if w.Code != st.code || w.Header().Get("X-Ratelimit-Remaining") != st.header || remaining() != st.left {
			t.Fatalf("GET %s: %d remaining header %q, then %d left; want %d %q %d", st.path, w.Code, w.Header().Get("X-Ratelimit-Remaining"), remaining(), st.code, st.header, st.left)
		}
	}
	// A panic before any status is a 500: refunded.
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want the handler's panic", v)
			}
		}()
		mw2 := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{{Name: "api", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10),
			ResponseCost: func(status int, _ int64) int64 {
				if status >= 500 {
					return 0
				}
				return 1
			}}}})
		defer func() {
			if r := mw2.Limiter().Peek(t.Context(), "203.0.113.7").Rules[0].Result.Remaining; r != 10 {
				t.Errorf("after a panic: %d left, want 10", r)
			}
		}()
		mw2.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).ServeHTTP(httptest.NewRecorder(), req("GET", "/", "203.0.113.7:1"))
	}()
	mu.Lock()
	defer mu.Unlock()
	if len(settleErrs) != 2 {
		t.Fatalf("settle errors %v, want 2 (above the reservation, negative)", settleErrs)
	}
	var ce *algorithms.ConfigError
	for _, err := range settleErrs {
		if !errors.As(err, &ce) || ce.Rule != "api" {
			t.Fatalf("settle error %v, want a ConfigError naming the rule", err)
		}
	}
}

// TestResponseCostResponseController: the ResponseWriter that a
// ResponseCost rule wraps still flushes, through http.ResponseController
// and as an http.Flusher.
func TestResponseCostResponseController(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{{Name: "api", Key: ipFunc(t), Algorithm: algorithms.GCRA,
		Limit: algorithms.PerHour(10), ResponseCost: failedLogins}}})
	flushed := make(chan bool, 1)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a")
		ok := http.NewResponseController(w).Flush() == nil
		w.(http.Flusher).Flush()
		flushed <- ok
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ok := <-flushed; !ok || resp.StatusCode != 200 {
		t.Fatalf("status %d, flushed %v", resp.StatusCode, ok)
	}
}

// BenchmarkHandlerResponseCost measures one allowed request of a
// ResponseCost rule whose response costs nothing (a successful login):
// the reservation, the response and the refund, on the memory backend
// and, when a redis-server is available, on the shared real one.
func BenchmarkHandlerResponseCost(b *testing.B) {
	rules := func(tb testing.TB) []specRule {
		return []specRule{{Name: "login", Key: ipFunc(tb), Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 30), ResponseCost: failedLogins}}
	}
	b.Run("memory", func(b *testing.B) {
		benchSerial(b, newMW(b, newMemory(b, fixed), spec{Rules: rules(b), Now: time.Now}).Handler(ok))
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Require(b)
		rb, err := redisstore.New(srv.Client(b), redisstore.Config{Now: fixed})
		if err != nil {
			b.Fatal(err)
		}
		benchSerial(b, newMW(b, rb, spec{Rules: rules(b), Prefix: "bench" + strconv.FormatInt(time.Now().UnixNano(), 36), Now: time.Now}).Handler(ok))
	})
}

// TestCheckSettle: a handler that decides with Check settles with Settle,
// once.
func TestCheckSettle(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{Rules: loginRules(t, algorithms.FixedWindow)})
	r := req("POST", "/login", "203.0.113.7:1", "X-User", "alice")
	d, err := mw.Check(r)
	if err != nil || !d.Allowed {
		t.Fatalf("Check = %+v, %v", d, err)
	}
	if err := mw.Settle(r, d, http.StatusOK, 7); err != nil {
		t.Fatal(err)
	}
	if err := mw.Settle(r, d, http.StatusOK, 7); !errors.Is(err, algorithms.ErrNotRefunded) {
		t.Fatalf("second Settle = %v, want ErrNotRefunded", err)
	}
	for _, rd := range mw.Limiter().Peek(t.Context(), "alice").Rules {
		if rd.Name == "login-user" && rd.Result.Remaining != 5 {
			t.Fatalf("after a settled 200: %d left, want 5", rd.Result.Remaining)
		}
	}
}

// refundable lists the algorithms whose charges can be refunded: all but
// concurrency, whose slots are released instead.
var refundable = slices.DeleteFunc(slices.Clone(algorithms.Algorithms), func(a algorithms.Algorithm) bool {
	return a == algorithms.Concurrency
})

// bareWriter has only the methods of http.ResponseWriter, and Unwrap.
type bareWriter struct{ w http.ResponseWriter }

func (b bareWriter) Header() http.Header         { return b.w.Header() }
func (b bareWriter) Write(p []byte) (int, error) { return b.w.Write(p) }
func (b bareWriter) WriteHeader(code int)        { b.w.WriteHeader(code) }
func (b bareWriter) Unwrap() http.ResponseWriter { return b.w }

// onlyReader hides every method of its Reader but Read (io.Copy then
// uses the writer's ReadFrom).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestResponseCostWriterInterfaces: the ResponseWriter a ResponseCost
// rule wraps has the optional interfaces of the one it wraps, and only
// those, on real servers: on HTTP/1.1 a handler hijacks the connection
// (its ResponseCost then sees 101 and no bytes) and io.Copy goes through
// ReadFrom (its bytes counted); on HTTP/2, and behind a writer that has
// none of them, no Hijacker (nor ReaderFrom, nor Flusher) appears, while
// http.ResponseController still reaches what lies below through Unwrap.
// Before, the wrapper hid Hijacker and ReaderFrom, and showed a Flusher
// that did nothing when the writer had none.
func TestResponseCostWriterInterfaces(t *testing.T) {
	type seen struct {
		status  int
		written int64
	}
	costs := make(chan seen, 1)
	mw := newMW(t, newMemory(t, fixed), spec{Rules: []specRule{{Name: "api", Key: ipFunc(t), Algorithm: algorithms.GCRA,
		Limit: algorithms.PerHour(100), ResponseCost: func(status int, written int64) int64 {
			costs <- seen{status, written}
			return 1
		}}}})
	const size = 64 << 10
	has := func(w http.ResponseWriter) string {
		_, f := w.(http.Flusher)
		_, h := w.(http.Hijacker)
		_, r := w.(io.ReaderFrom)
		return fmt.Sprintf("flusher %v hijacker %v readerfrom %v", f, h, r)
	}
	interfaces := make(chan string, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		interfaces <- has(w)
		switch r.URL.Path {
		case "/hijack":
			hj, ok := w.(http.Hijacker)
			if !ok {
				http.Error(w, "no Hijacker", http.StatusInternalServerError)
				return
			}
			c, rw, err := hj.Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			defer c.Close()
			rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
			rw.Flush()
		case "/copy":
			if n, err := io.Copy(w, onlyReader{strings.NewReader(strings.Repeat("x", size))}); n != size || err != nil {
				t.Errorf("io.Copy = %d, %v", n, err)
			}
		case "/controller":
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Errorf("SetWriteDeadline through Unwrap: %v", err)
			}
			io.WriteString(w, "ok")
			if err := rc.Flush(); err != nil {
				t.Errorf("Flush through Unwrap: %v", err)
			}
		}
	})
	check := func(t *testing.T, c *http.Client, url, wantHas string, code int, body string, cost seen) {
		t.Helper()
		resp, err := c.Get(url)
		var gotBody []byte
		if err == nil {
			gotBody, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		// what the handler saw, and what its ResponseCost saw (after it)
		var gotHas string
		var gotCost seen
		select {
		case gotHas = <-interfaces:
		case <-time.After(10 * time.Second):
		}
		select {
		case gotCost = <-costs:
		case <-time.After(10 * time.Second):
		}
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		if gotHas != wantHas {
			t.Errorf("the handler's writer: %s, want %s", gotHas, wantHas)
		}
		if resp.StatusCode != code || string(gotBody) != body {
			t.Errorf("response %d %.20q (%d bytes), want %d %.20q", resp.StatusCode, gotBody, len(gotBody), code, body)
		}
		if gotCost != cost {
			t.Errorf("ResponseCost saw %+v, want %+v", gotCost, cost)
		}
	}

	h1 := httptest.NewServer(mw.Handler(handler))
	defer h1.Close()
	all := "flusher true hijacker true readerfrom true"
	t.Run("http1/hijack", func(t *testing.T) {
		check(t, h1.Client(), h1.URL+"/hijack", all, 200, "hijacked", seen{http.StatusSwitchingProtocols, 0})
	})
	t.Run("http1/copy", func(t *testing.T) {
		check(t, h1.Client(), h1.URL+"/copy", all, 200, strings.Repeat("x", size), seen{200, size})
	})

	h2 := httptest.NewUnstartedServer(mw.Handler(handler))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	t.Run("http2", func(t *testing.T) {
		check(t, h2.Client(), h2.URL+"/copy", "flusher true hijacker false readerfrom false", 200, strings.Repeat("x", size), seen{200, size})
	})

	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw.Handler(handler).ServeHTTP(bareWriter{w}, r)
	}))
	defer bare.Close()
	t.Run("bare", func(t *testing.T) {
		check(t, bare.Client(), bare.URL+"/controller", "flusher false hijacker false readerfrom false", 200, "ok", seen{200, 2})
	})
}
