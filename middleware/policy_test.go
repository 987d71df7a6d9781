package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// TestDefaultDenied: plain text unless the client asks for JSON, then an
// RFC 9457 problem with the draft's quota-exceeded type.
func TestDefaultDenied(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
			{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
		},
	})
	h := mw.Handler(ok)
	serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice"))
	tests := []struct {
		accept, contentType string
	}{
		{"", "text/plain; charset=utf-8"},
		{"text/html,application/xhtml+xml,*/*;q=0.8", "text/plain; charset=utf-8"},
		{"text/plain, application/problem+json", "text/plain; charset=utf-8"},
		{"application/problem+json", "application/problem+json"},
		{"Application/Problem+JSON; charset=utf-8", "application/problem+json"},
		{"application/json", "application/problem+json"},
		{"image/webp, application/json;q=0.9, text/plain;q=0.1", "application/problem+json"},
	}
	for _, tt := range tests {
		w := serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice", "Accept", tt.accept))
		checkResponse(t, "Accept "+tt.accept, w, http.StatusTooManyRequests, xHeaders("1", "0", epoch0+60, "60"))
		if got := w.Header().Get("Content-Type"); got != tt.contentType {
			t.Errorf("Accept %q: Content-Type %q, want %q", tt.accept, got, tt.contentType)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("Accept %q: headers %v lack nosniff/no-store", tt.accept, w.Header())
		}
		const detail = "rate limit exceeded: ip, user; retry in 60s"
		if tt.contentType != "application/problem+json" {
			if got := w.Body.String(); got != detail+"\n" {
				t.Errorf("Accept %q: body %q, want %q", tt.accept, got, detail+"\n")
			}
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("Accept %q: body %q is not JSON: %v", tt.accept, w.Body.String(), err)
		}
		want := map[string]any{
			"type":              "https://iana.org/assignments/http-problem-types#quota-exceeded",
			"title":             "Too Many Requests",
			"status":            float64(429),
			"detail":            detail,
			"violated-policies": []any{"ip", "user"},
		}
		if len(p) != len(want) {
			t.Errorf("Accept %q: problem has fields %v, want exactly %v", tt.accept, p, want)
		}
		for k, v := range want {
			if got, _ := json.Marshal(p[k]); string(got) != mustJSON(v) {
				t.Errorf("Accept %q: problem %s = %s, want %s", tt.accept, k, got, mustJSON(v))
			}
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestDeniedHandler: a custom Config.Denied sees the Decision in the
// context and the rate-limit headers already written.
func TestDeniedHandler(t *testing.T) {
	var seen *redlimit.Decision
	var hdr string
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}},
		Denied: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen, _ = middleware.FromContext(r.Context())
			hdr = w.Header().Get("Retry-After")
			w.WriteHeader(http.StatusTeapot)
		}),
	})
	h := mw.Handler(ok)
	serve(h, req("GET", "/", "192.0.2.1:1"))
	w := serve(h, req("GET", "/", "192.0.2.1:1"))
	if w.Code != http.StatusTeapot || hdr != "60" {
		t.Errorf("status %d, Retry-After seen by Denied %q; want 418 and 60", w.Code, hdr)
	}
	if seen == nil || seen.Allowed || seen.Rules[0].Name != "ip" || seen.Rules[0].Result.RetryAfter != time.Minute || seen.Source != redlimit.SourcePrimary {
		t.Errorf("Denied saw %+v", seen)
	}
	// The Decision is the handler's to keep: later requests leave it alone.
	serve(h, req("GET", "/", "192.0.2.2:1"))
	if seen.Rules[0].Key != "rate:ip:gcra:{192.0.2.1}" || seen.Allowed {
		t.Errorf("kept Decision changed: %+v", seen)
	}
}

// failing is a Backend that fails every call while down is set, and
// otherwise decides with a Memory backend on the fixed clock.
type failing struct {
	down  atomic.Bool
	calls atomic.Int64
	mem   *memstore.Store
}

var errDown = errors.New("connection refused")

func (f *failing) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	f.calls.Add(1)
	if f.down.Load() {
		return &algorithms.BackendError{Backend: "stub", Err: errDown}
	}
	return f.mem.Allow(ctx, checks, results)
}

// TestErrorPolicies against a Backend that fails: FailOpen lets requests
// through bare, FailClosed answers with ErrorHandler, Fallback decides with
// the fallback backend; every decision carries the error.
func TestErrorPolicies(t *testing.T) {
	rules := []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}}
	t.Run("fail open", func(t *testing.T) {
		b := &failing{mem: newMemory(t, fixed)}
		b.down.Store(true)
		var rec recorder
		mw := newMW(t, b, spec{Rules: rules, OnError: redlimit.FailOpen, OnDecision: rec.hook})
		for range 5 {
			checkResponse(t, "down", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 200, map[string]string{})
			if d := rec.last(t); !d.Allowed || !errors.Is(d.Err, errDown) || !errors.Is(d.Err, algorithms.ErrBackend) || d.Source != redlimit.SourceNone || d.Rules[0].Evaluated {
				t.Errorf("decision %+v", d)
			}
		}
		b.down.Store(false)
		checkResponse(t, "up", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))
	})
	t.Run("fail closed", func(t *testing.T) {
		b := &failing{mem: newMemory(t, fixed)}
		b.down.Store(true)
		mw := newMW(t, b, spec{Rules: rules, OnError: redlimit.FailClosed})
		w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
		checkResponse(t, "down", w, http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"})
		if w.Body.String() != "rate limiter unavailable\n" {
			t.Errorf("body %q", w.Body.String())
		}
		var seen error
		custom := newMW(t, b, spec{Rules: rules, OnError: redlimit.FailClosed,
			ErrorHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				d, _ := middleware.FromContext(r.Context())
				seen = d.Err
				w.WriteHeader(http.StatusTooManyRequests)
			})})
		w = serve(custom.Handler(ok), req("GET", "/", "192.0.2.1:1"))
		if w.Code != http.StatusTooManyRequests || !errors.Is(seen, errDown) {
			t.Errorf("custom ErrorHandler: status %d, saw Err %v", w.Code, seen)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		b := &failing{mem: newMemory(t, fixed)}
		b.down.Store(true)
		var rec recorder
		mw := newMW(t, b, spec{Rules: rules, ProbeInterval: 10 * time.Millisecond, FallbackAfter: time.Millisecond,
			FallbackBackend: newMemory(t, fixed), OnDecision: rec.hook})
		// The first failure is refused (503); the next, FallbackAfter
		// later, switches to the fallback.
		checkResponse(t, "first failure", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 503, map[string]string{"Retry-After": "1"})
		if d := rec.last(t); !d.Failed || d.Source != redlimit.SourceNone || !errors.Is(d.Err, errDown) {
			t.Errorf("first failure: %+v, want refused undecided", d)
		}
		time.Sleep(2 * time.Millisecond)
		for i, want := range threeAndDenied {
			checkResponse(t, "down "+itoa(int64(i)), serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), want.code, want.headers)
			d := rec.last(t)
			if d.Source != redlimit.SourceFallback || (i == 0) != (d.Err != nil) {
				t.Errorf("request %d: Source %v Err %v; want fallback, Err on the first only", i, d.Source, d.Err)
			}
		}
		calls := b.calls.Load()
		b.down.Store(false)
		start := time.Now()
		for rec.last(t).Source != redlimit.SourcePrimary {
			if time.Since(start) > 10*time.Second {
				t.Fatal("still on the fallback 10s after the backend came back")
			}
			time.Sleep(time.Millisecond)
			serve(mw.Handler(ok), req("GET", "/", "192.0.2.9:1"))
		}
		t.Logf("back on the primary %v after it recovered (probe every 10ms), %d primary calls while down", time.Since(start).Round(time.Millisecond), calls)
		if calls > 10 {
			t.Errorf("%d calls to the primary while it was down; the fallback should take over after the first", calls)
		}
	})
	t.Run("key func error", func(t *testing.T) {
		broken := func(*http.Request) (string, error) { return "", errors.New("session store down") }
		for _, tt := range []struct {
			policy redlimit.ErrorPolicy
			code   int
		}{{redlimit.Fallback, 200}, {redlimit.FailOpen, 200}, {redlimit.FailClosed, 503}} {
			mw := newMW(t, newMemory(t, fixed), spec{OnError: tt.policy,
				Rules: []specRule{{Name: "s", Key: broken, Algorithm: algorithms.GCRA, Limit: gcra3}}})
			if w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")); w.Code != tt.code {
				t.Errorf("%v: status %d, want %d", tt.policy, w.Code, tt.code)
			}
		}
	})
}

// TestErrorLogThrottled: a failing backend is logged at Warn, at most once
// a second, with the count of errors.
func TestErrorLogThrottled(t *testing.T) {
	var buf syncBuffer
	b := &failing{mem: newMemory(t, fixed)}
	b.down.Store(true)
	mw := newMW(t, b, spec{
		Rules:   []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		OnError: redlimit.FailOpen,
		Logger:  slogTo(&buf),
	})
	for range 100 {
		serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
	}
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 1 || !strings.Contains(out, `level=WARN msg="redlimit: rate limit not decided" err="redlimit: stub backend: connection refused" policy=fail-open errors=1`) {
		t.Errorf("100 failures logged as:\n%s", out)
	}
}

// hanging is a Backend that ignores its context, like a go-redis client
// without ContextTimeoutEnabled talking to a stalled server: Allow returns
// only when release is closed.
type hanging struct {
	release chan struct{}
	calls   atomic.Int64
}

func (h *hanging) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	h.calls.Add(1)
	<-h.release
	return &algorithms.BackendError{Backend: "stub", Err: errors.New("read timeout")}
}

// TestTimeoutEnforced: a backend that ignores the context's deadline still
// cannot hold a request past Config.Timeout, under every policy.
func TestTimeoutEnforced(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, policy := range []redlimit.ErrorPolicy{redlimit.FailOpen, redlimit.FailClosed, redlimit.Fallback} {
		t.Run(policy.String(), func(t *testing.T) {
			b := &hanging{release: make(chan struct{})}
			var rec recorder
			mw := newMW(t, b, spec{
				Rules:         []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
				OnError:       policy,
				Timeout:       timeout,
				ProbeInterval: time.Hour,
				OnDecision:    rec.hook,
			})
			margin := latencyMargin()
			var slowest time.Duration
			for range 3 {
				start := time.Now()
				w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
				slowest = max(slowest, time.Since(start))
				if want := map[redlimit.ErrorPolicy]int{redlimit.FailClosed: 503}[policy]; want != 0 && w.Code != want {
					t.Errorf("status %d, want %d", w.Code, want)
				}
			}
			d := rec.got[0]
			if !errors.Is(d.Err, context.DeadlineExceeded) || !errors.Is(d.Err, algorithms.ErrBackend) {
				t.Errorf("Err %v, want a backend error wrapping context.DeadlineExceeded", d.Err)
			}
			// The backend holds every call until release is closed, below:
			// only the middleware's deadline can have ended these requests.
			if margin = max(margin, latencyMargin()); slowest < timeout || slowest > timeout+margin {
				t.Errorf("slowest request took %v with Timeout %v, want between it and %v more (the margin measured on this machine)", slowest, timeout, margin)
			}
			t.Logf("slowest request %v (Timeout %v), %d calls abandoned", slowest, timeout, mw.Stalled())
			close(b.release)
			waitFor(t, "abandoned calls to finish", func() bool { return mw.Stalled() == 0 })
		})
	}
}

// blockKey marks the requests the ctxBackend holds until their context
// ends.
type blockKey struct{}

// ctxBackend honours its context: it holds marked requests until the
// context is done and decides the others with a Memory backend.
type ctxBackend struct{ mem *memstore.Store }

func (b ctxBackend) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if ctx.Value(blockKey{}) != nil {
		<-ctx.Done()
		return &algorithms.BackendError{Backend: "stub", Err: ctx.Err()}
	}
	return b.mem.Allow(ctx, checks, results)
}

// TestClientGone: a request whose client goes away while the backend
// decides is not a backend failure: the Fallback policy does not switch the
// middleware to the fallback because of it.
func TestClientGone(t *testing.T) {
	var rec recorder
	mw := newMW(t, ctxBackend{newMemory(t, fixed)}, spec{
		Rules:         []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		ProbeInterval: time.Hour,
		OnDecision:    rec.hook,
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), blockKey{}, true))
	time.AfterFunc(5*time.Millisecond, cancel)
	serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1").WithContext(ctx))
	if d := rec.last(t); !errors.Is(d.Err, context.Canceled) {
		t.Errorf("gone client: Err %v, want context.Canceled", d.Err)
	}
	checkResponse(t, "next request", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))
	if d := rec.last(t); d.Source != redlimit.SourcePrimary {
		t.Errorf("next request decided by %v, want the primary", d.Source)
	}
}

// honest is a ctxBackend that honours deadlines, as a redisstore on a
// client that does.
type honest struct {
	contract.Carrier
	ctxBackend
}

// TestHonoursDeadline: a backend that promises to return by its context's
// deadline is called directly (nothing is abandoned) and still bounded by
// Timeout.
func TestHonoursDeadline(t *testing.T) {
	var rec recorder
	mw := newMW(t, honest{contract.Carry(contract.Traits{HonoursDeadline: true}), ctxBackend{newMemory(t, fixed)}}, spec{
		Rules:      []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		OnError:    redlimit.FailOpen,
		Timeout:    20 * time.Millisecond,
		OnDecision: rec.hook,
	})
	checkResponse(t, "normal", serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")), 200, xHeaders("3", "2", epoch0+20, ""))
	margin := latencyMargin()
	start := time.Now()
	r := req("GET", "/", "192.0.2.1:1")
	serve(mw.Handler(ok), r.WithContext(context.WithValue(r.Context(), blockKey{}, true)))
	took := time.Since(start)
	if margin = max(margin, latencyMargin()); took > 20*time.Millisecond+margin || !errors.Is(rec.last(t).Err, context.DeadlineExceeded) || mw.Stalled() != 0 {
		t.Errorf("blocked call: %v, Err %v, %d abandoned; want the deadline's error at 20ms (+ %v, the margin measured on this machine), nothing abandoned", took, rec.last(t).Err, mw.Stalled(), margin)
	}
}

// panicking is a Backend with a bug.
type panicking struct{}

func (panicking) Allow(context.Context, []algorithms.Check, []algorithms.Result) error {
	panic("index out of range")
}

// TestBackendPanic: a panic in a bounded backend call (its own goroutine)
// becomes an error for the policy instead of killing the process.
func TestBackendPanic(t *testing.T) {
	var rec recorder
	mw := newMW(t, panicking{}, spec{
		Rules:      []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		OnError:    redlimit.FailClosed,
		OnDecision: rec.hook,
	})
	w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
	if err := rec.last(t).Err; w.Code != 503 || err == nil || err.Error() != "redlimit: engine backend: panic: index out of range" {
		t.Errorf("status %d, Err %v", w.Code, err)
	}
}

// TestHeadersNoneDenied: with Style None a denial carries no field at all.
func TestHeadersNoneDenied(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:   []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)}},
		Headers: headers.Writer{Style: headers.None},
	})
	serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
	w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
	checkResponse(t, "denied", w, 429, map[string]string{})
	if w.Body.String() != "rate limit exceeded: ip\n" {
		t.Errorf("body %q", w.Body.String())
	}
}

// TestMissingKeyDenied: with Config.MissingKeyDenied set to Unauthorized,
// a request denied because a rule found no key gets 401 (text or problem
// JSON, naming the rule); rate denials still get DefaultDenied's 429, and
// a shadow rule's missing key changes nothing.
func TestMissingKeyDenied(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
			{Name: "api", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)},
			{Name: "tenant", Key: func(r *http.Request) (string, error) { return "", keyfunc.ErrNoKey }, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10), Shadow: true},
		},
		MissingKeyDenied: middleware.Unauthorized,
	})
	h := mw.Handler(ok)
	for i := range 3 {
		w := serve(h, req("GET", "/", "192.0.2.1:1"))
		checkResponse(t, "no key "+itoa(int64(i)), w, http.StatusUnauthorized, map[string]string{})
		if got, want := w.Body.String(), "unauthorized: no key for rule api\n"; got != want || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("no key: body %q (%s), want %q", got, w.Header().Get("Content-Type"), want)
		}
	}
	w := serve(h, req("GET", "/", "192.0.2.1:1", "Accept", "application/problem+json"))
	if got, want := w.Body.String(), `{"title":"Unauthorized","status":401,"detail":"unauthorized: no key for rule api"}`+"\n"; w.Code != 401 || got != want ||
		w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("no key, problem: %d %q (%v), want 401 %q", w.Code, got, w.Header(), want)
	}
	// The 401s charged nothing; then the ip rule denies by rate: 429.
	checkResponse(t, "key", serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice")), 200, xHeaders("1", "0", epoch0+60, ""))
	w = serve(h, req("GET", "/", "192.0.2.1:1", "X-User", "alice"))
	checkResponse(t, "rate", w, http.StatusTooManyRequests, xHeaders("1", "0", epoch0+60, "60"))
	if got := w.Body.String(); !strings.HasPrefix(got, "rate limit exceeded: ip") {
		t.Errorf("rate denial body %q, want DefaultDenied's", got)
	}
	// A missing key on a rate-denied IP: the missing key stops the
	// request first, so 401.
	if w := serve(h, req("GET", "/", "192.0.2.1:1")); w.Code != http.StatusUnauthorized {
		t.Errorf("no key, ip over its limit: %d, want 401", w.Code)
	}
}
