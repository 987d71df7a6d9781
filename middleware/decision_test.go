package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// TestCheck decides inside a handler: Check consumes like the Handler does,
// WriteHeaders writes the same fields, and the handler answers itself.
func TestCheck(t *testing.T) {
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules:   []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
		Headers: headers.Writer{Style: headers.Both},
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := mw.Check(r)
		if err != nil {
			t.Errorf("Check: %v", err)
		}
		mw.WriteHeaders(w.Header(), d)
		if !d.Allowed {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	})
	ietf := func(r, t string) map[string]string {
		return map[string]string{"Ratelimit-Policy": `"ip";q=3;w=60`, "Ratelimit": `"ip";r=` + r + ";t=" + t}
	}
	merge := func(a, b map[string]string) map[string]string {
		for k, v := range b {
			a[k] = v
		}
		return a
	}
	steps := []struct {
		code int
		want map[string]string
	}{
		{200, merge(xHeaders("3", "2", epoch0+20, ""), ietf("2", "20"))},
		{200, merge(xHeaders("3", "1", epoch0+40, ""), ietf("1", "40"))},
		{200, merge(xHeaders("3", "0", epoch0+60, ""), ietf("0", "60"))},
		{429, merge(xHeaders("3", "0", epoch0+60, "20"), ietf("0", "60"))},
	}
	for i, st := range steps {
		checkResponse(t, "request "+itoa(int64(i+1)), serve(h, req("GET", "/", "192.0.2.1:1")), st.code, st.want)
	}

	// The Decision is the caller's: a later request does not change it.
	d1, _ := mw.Check(req("GET", "/", "192.0.2.7:1"))
	d2, _ := mw.Check(req("GET", "/", "192.0.2.8:1"))
	if d1.Rules[0].Key != "rate:ip:gcra:{192.0.2.7}" || d2.Rules[0].Key != "rate:ip:gcra:{192.0.2.8}" || d1.Rules[0].Result.Remaining != 2 {
		t.Errorf("Check decisions share memory: %+v, %+v", d1.Rules, d2.Rules)
	}
}

// TestCheckError: Check returns the error the policy handled, and the
// Decision still says what to do.
func TestCheckError(t *testing.T) {
	broken := keyfunc.Func(func(*http.Request) (string, error) { return "", errors.New("session store down") })
	for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules:   []specRule{{Name: "user", Key: broken, Algorithm: algorithms.GCRA, Limit: gcra3}},
			OnError: policy,
		})
		d, err := mw.Check(req("GET", "/", "192.0.2.1:1"))
		if err == nil || err != d.Err || err.Error() != "session store down" {
			t.Errorf("%v: Check error %v (Decision.Err %v), want the key func's", policy, err, d.Err)
		}
		if want := policy != redlimit.FailClosed; d.Allowed != want {
			t.Errorf("%v: Allowed %v, want %v", policy, d.Allowed, want)
		}
		h := http.Header{}
		mw.WriteHeaders(h, d)
		if len(h) != 0 {
			t.Errorf("%v: WriteHeaders for an undecided request wrote %v", policy, h)
		}
	}
}

// TestDecisionInContext: with DecisionInContext the next handler finds the
// Decision; without, it does not (and the deny handler always does).
func TestDecisionInContext(t *testing.T) {
	for _, in := range []bool{false, true} {
		var got *redlimit.Decision
		var found bool
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules:             []specRule{{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3}},
			DecisionInContext: in,
		})
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, found = middleware.FromContext(r.Context())
		}))
		serve(h, req("GET", "/", "192.0.2.1:1"))
		serve(h, req("GET", "/", "192.0.2.2:1")) // a pooled scratch must not show through
		if found != in {
			t.Fatalf("DecisionInContext %v: FromContext found %v", in, found)
		}
		if in && (!got.Allowed || got.Source != redlimit.SourcePrimary || len(got.Rules) != 1 ||
			got.Rules[0].Key != "rate:ip:gcra:{192.0.2.2}" || got.Rules[0].Result.Remaining != 2) {
			t.Errorf("Decision in context %+v", got)
		}
	}
	if _, found := middleware.FromContext(context.Background()); found {
		t.Error("FromContext(Background) found a Decision")
	}
}

// TestOnDecision: the hook is called once per request, with the rule names,
// keys and results, whatever the outcome.
func TestOnDecision(t *testing.T) {
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
			{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
		},
		OnDecision: rec.hook,
	})
	h := mw.Handler(ok)
	requests := []*http.Request{
		req("GET", "/", "192.0.2.1:1", "X-User", "alice"),
		req("GET", "/", "192.0.2.1:1", "X-User", "alice"), // denied by user
		req("GET", "/", "192.0.2.1:1"),                    // anonymous: missing key
	}
	for _, r := range requests {
		serve(h, r)
	}
	if rec.len() != len(requests) {
		t.Fatalf("OnDecision called %d times for %d requests", rec.len(), len(requests))
	}
	for i, r := range rec.reqs {
		if r != requests[i] {
			t.Errorf("call %d: OnDecision got another request", i)
		}
	}
	d := rec.got
	want := []struct {
		allowed bool
		keys    [2]string
		remain  [2]int64
		eval    [2]bool
	}{
		{true, [2]string{"rate:ip:gcra:{192.0.2.1}", "rate:user:gcra:{alice}"}, [2]int64{99, 0}, [2]bool{true, true}},
		{false, [2]string{"rate:ip:gcra:{192.0.2.1}", "rate:user:gcra:{alice}"}, [2]int64{99, 0}, [2]bool{true, true}},
		{false, [2]string{"rate:ip:gcra:{192.0.2.1}", ""}, [2]int64{0, 0}, [2]bool{false, false}},
	}
	for i, w := range want {
		got := d[i]
		if got.Allowed != w.allowed || got.Latency <= 0 {
			t.Errorf("decision %d: Allowed %v Latency %v, want %v and > 0", i, got.Allowed, got.Latency, w.allowed)
		}
		for j, rd := range got.Rules {
			if rd.Name != []string{"ip", "user"}[j] || rd.Key != w.keys[j] || rd.Result.Remaining != w.remain[j] || rd.Evaluated != w.eval[j] {
				t.Errorf("decision %d rule %d: %+v, want key %q remaining %d evaluated %v", i, j, rd, w.keys[j], w.remain[j], w.eval[j])
			}
		}
	}
	if !d[2].Rules[1].MissingKey || d[1].Rules[1].Result.Allowed || d[1].Rules[1].Result.RetryAfter != 60e9 {
		t.Errorf("rule decisions: %+v / %+v", d[1].Rules[1], d[2].Rules[1])
	}
}

// TestNoStaleRules: a request that stops at one rule (missing key, key
// func error) reports the rules after it as not evaluated, and writes no
// header from them, even though the pooled working memory last held another
// client's decision.
func TestNoStaleRules(t *testing.T) {
	var rec recorder
	mw := newMW(t, newMemory(t, fixed), spec{
		Rules: []specRule{
			{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: gcra3},
			{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
		},
		Headers:    headers.Writer{Style: headers.Both},
		OnDecision: rec.hook,
	})
	h := mw.Handler(ok)
	for i := range 20 { // sync.Pool may drop an item now and then (always under -race)
		serve(h, req("GET", "/", "198.51.100.1:1", "X-User", "alice"))
		w := serve(h, req("GET", "/", "192.0.2.1:1"))
		checkResponse(t, "anonymous "+itoa(int64(i)), w, http.StatusTooManyRequests, map[string]string{})
		if d := rec.last(t); d.Rules[1] != (redlimit.RuleDecision{Name: "ip"}) {
			t.Fatalf("anonymous request %d: rule after the missing key is %+v, want untouched", i, d.Rules[1])
		}
	}
}

// TestSlog: at Debug every decision is logged with its rules; at Info
// decisions are not logged.
func TestSlog(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf syncBuffer
		mw := newMW(t, newMemory(t, fixed), spec{
			Rules: []specRule{
				{Name: "ip", Key: ipFunc(t), Algorithm: algorithms.GCRA, Limit: gcra3},
				{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: gcra3, MissingKey: redlimit.SkipMissingKey},
			},
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})),
		})
		serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1"))
		out := buf.String()
		if level == slog.LevelInfo {
			if out != "" {
				t.Errorf("Info level logged %q", out)
			}
			continue
		}
		for _, want := range []string{
			`level=DEBUG msg="redlimit: decision" allowed=true would_deny=false source=primary latency=`,
			`ip.key=rate:ip:gcra:{192.0.2.1} ip.allowed=true ip.remaining=2 ip.retry_after=0s ip.skipped=false`,
			`user.key="" user.allowed=false user.remaining=0 user.retry_after=0s user.skipped=true`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("debug log lacks %q:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "\n"); n != 1 {
			t.Errorf("debug log has %d lines for one request:\n%s", n, out)
		}
	}
}

// TestMissingKeyStopsKeyFuncs: a request without key material for a rule
// that denies it (DenyMissingKey, not in shadow mode) is answered there:
// the later rules' key funcs do not run, and it is denied by that rule.
// Under SkipMissingKey, or in shadow mode (the rule's or the whole
// middleware's), the later rules still run and decide; so they do after
// a rule that found its key.
func TestMissingKeyStopsKeyFuncs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		missing redlimit.MissingKey
		shadow  string
		stops   bool
	}{
		{"deny", redlimit.DenyMissingKey, "", true},
		{"skip", redlimit.SkipMissingKey, "", false},
		{"shadow rule", redlimit.DenyMissingKey, "rule", false},
		{"shadow middleware", redlimit.DenyMissingKey, "all", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			second := func(r *http.Request) (string, error) {
				calls.Add(1)
				return "k", nil
			}
			var rec recorder
			mw := newMW(t, newMemory(t, fixed), spec{
				Shadow:     tt.shadow == "all",
				OnDecision: rec.hook,
				Rules: []specRule{
					{Name: "user", Key: userFunc, Algorithm: algorithms.GCRA, Limit: gcra3, MissingKey: tt.missing, Shadow: tt.shadow == "rule"},
					{Name: "second", Key: second, Algorithm: algorithms.GCRA, Limit: gcra3},
				},
			})
			w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1")) // no X-User
			d := rec.last(t)
			if tt.stops {
				if calls.Load() != 0 || w.Code != http.StatusTooManyRequests || !d.Rules[0].MissingKey || d.Rules[1].Evaluated {
					t.Fatalf("%d second key func calls, status %d, %+v; want none, 429, denied by the user rule's missing key", calls.Load(), w.Code, d.Rules)
				}
			} else if calls.Load() != 1 || w.Code != http.StatusOK || !d.Rules[1].Evaluated {
				t.Fatalf("%d second key func calls, status %d, %+v; want 1, 200, the second rule decided", calls.Load(), w.Code, d.Rules)
			}
			// with a key, every rule's func runs
			if w := serve(mw.Handler(ok), req("GET", "/", "192.0.2.1:1", "X-User", "alice")); w.Code != http.StatusOK || calls.Load() != map[bool]int64{true: 1, false: 2}[tt.stops] {
				t.Fatalf("with a key: status %d, %d second key func calls in all", w.Code, calls.Load())
			}
		})
	}
}
