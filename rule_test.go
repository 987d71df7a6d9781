package redlimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// plans is a LimitFunc backed by a map a test edits: the plan table of a
// database. An unknown key is an error, and calls are counted.
type plans struct {
	mu    sync.Mutex
	limit map[string]algorithms.Limit
	calls atomic.Int64
}

func (p *plans) set(material string, l algorithms.Limit) {
	p.mu.Lock()
	p.limit[material] = l
	p.mu.Unlock()
}

var errNoPlan = errors.New("plans: no plan")

func (p *plans) lookup(_ context.Context, material string) (algorithms.Limit, error) {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.limit[material]
	if !ok {
		return algorithms.Limit{}, errNoPlan
	}
	return l, nil
}

func newPlans(m map[string]algorithms.Limit) *plans { return &plans{limit: m} }

// TestLimitFunc: each key is limited by the limit its function returns,
// exactly, and the decision reports that limit.
func TestLimitFunc(t *testing.T) {
	p := newPlans(map[string]algorithms.Limit{
		"free": algorithms.PerHour(2),
		"pro":  algorithms.PerHour(5),
		"team": algorithms.PerHour(1).WithBurst(3),
	})
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingLog, algorithms.SlidingWindow, algorithms.TokenBucket, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{{Name: "plan", Algorithm: alg, LimitFunc: p.lookup}}})
			want := map[string]int{"free": 2, "pro": 5, "team": 3}
			if alg != algorithms.TokenBucket && alg != algorithms.GCRA {
				want["team"] = 0 // a Burst on a window: an invalid limit, never decided
			}
			for material, n := range want {
				allowed := 0
				for range 10 {
					d := decide(e, context.Background(), redlimit.Input{Material: material})
					rd := d.Rules[0]
					if rd.LimitFailed {
						if d.Err == nil || !errors.Is(d.Err, algorithms.ErrInvalidConfig) {
							t.Fatalf("%s: LimitFailed with Err %v, want an invalid limit", material, d.Err)
						}
						continue
					}
					if rd.Limit != p.limit[material] || rd.Result.Limit != p.limit[material].Capacity(alg) {
						t.Fatalf("%s: rule decided under %v (Result.Limit %d), want %v", material, rd.Limit, rd.Result.Limit, p.limit[material])
					}
					if d.Allowed {
						allowed++
					}
				}
				if allowed != n {
					t.Errorf("%s: %d of 10 allowed, want %d", material, allowed, n)
				}
			}
		})
	}
}

// TestLimitFuncErrors: a function error or an invalid limit is never
// replaced by another limit. The rule is not decided; the error policy
// says whether the request goes on without it (FailOpen, Fallback: the
// other rules still apply) or is refused (FailClosed: nothing consumed).
func TestLimitFuncErrors(t *testing.T) {
	p := newPlans(map[string]algorithms.Limit{
		"ok":         algorithms.PerHour(3),
		"zero":       {},
		"sub-µs":     {Rate: 1, Period: 1500 * time.Nanosecond},
		"neg-burst":  algorithms.PerHour(3).WithBurst(-1),
		"huge-burst": algorithms.PerHour(3).WithBurst(1 << 41),
	})
	tests := []struct {
		material string
		want     string
		invalid  bool
	}{
		{"unknown", `redlimit: rule "plan": LimitFunc failed: plans: no plan`, false},
		{"zero", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Rate must be > 0, got 0`, true},
		{"sub-µs", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Period must be a whole number of microseconds, got 1.5µs`, true},
		{"neg-burst", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Burst must be >= 0, got -1`, true},
		{"huge-burst", `redlimit: rule "plan": LimitFunc returned an invalid limit: Limit.Burst must be <= 2^40, got 2199023255552`, true},
	}
	for _, policy := range []redlimit.ErrorPolicy{redlimit.Fallback, redlimit.FailOpen, redlimit.FailClosed} {
		for _, tt := range tests {
			mem := newMemory(t)
			e := newEngine(t, mem, redlimit.Config{OnError: policy, Rules: []redlimit.Rule{
				{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)},
				{Name: "plan", Algorithm: algorithms.GCRA, LimitFunc: p.lookup},
			}})
			d := decide(e, context.Background(), redlimit.Input{Material: "192.0.2.1"}, redlimit.Input{Material: tt.material})
			var le *redlimit.LimitError
			if !errors.As(d.Err, &le) || le.Rule != "plan" || d.Err.Error() != tt.want {
				t.Errorf("%v %s: Err = %v, want the *LimitError %q", policy, tt.material, d.Err, tt.want)
			}
			if errors.Is(d.Err, algorithms.ErrInvalidConfig) != tt.invalid || !tt.invalid && !errors.Is(d.Err, errNoPlan) {
				t.Errorf("%v %s: Err %v does not unwrap to its cause", policy, tt.material, d.Err)
			}
			plan := d.Rules[1]
			if !plan.LimitFailed || plan.Evaluated || plan.Key != "" || plan.Limit != (algorithms.Limit{}) {
				t.Errorf("%v %s: plan rule %+v, want LimitFailed and nothing decided", policy, tt.material, plan)
			}
			// What the ip rule consumed: 1 unless the request was refused.
			var after redlimit.Decision
			e2 := newEngine(t, mem, redlimit.Config{Rules: []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)}}})
			e2.Decide(context.Background(), inOrder(e2, []redlimit.Input{{Material: "192.0.2.1"}}), &after)
			remaining := after.Rules[0].Result.Remaining
			if policy == redlimit.FailClosed || tt.invalid {
				// an invalid limit is a programmer error: refused under
				// every policy
				if d.Allowed || !d.Failed || d.Rules[0].Evaluated || remaining != 9 {
					t.Errorf("%v %s: allowed=%v failed=%v ip evaluated=%v, ip remaining after one more %d; want refused, nothing consumed (9)",
						policy, tt.material, d.Allowed, d.Failed, d.Rules[0].Evaluated, remaining)
				}
				continue
			}
			if !d.Allowed || d.Failed || !d.Rules[0].Evaluated || d.Rules[0].Result.Remaining != 9 || remaining != 8 || d.Source != redlimit.SourcePrimary {
				t.Errorf("%v %s: allowed=%v failed=%v source=%v ip %+v, remaining after one more %d; want allowed by the ip rule alone (9, then 8)",
					policy, tt.material, d.Allowed, d.Failed, d.Source, d.Rules[0], remaining)
			}
		}
	}
	// A shadow rule whose limit is unknown is left out under every policy.
	e := newEngine(t, newMemory(t), redlimit.Config{OnError: redlimit.FailClosed, Rules: []redlimit.Rule{
		{Name: "plan", Algorithm: algorithms.GCRA, LimitFunc: p.lookup, Shadow: true},
	}})
	if d := decide(e, context.Background(), redlimit.Input{Material: "unknown"}); !d.Allowed || d.Failed || d.WouldDeny || !d.Rules[0].LimitFailed || d.Err == nil {
		t.Errorf("shadow rule, unknown limit, FailClosed: %+v, want allowed, LimitFailed, Err set", d)
	}
	// A shadow rule whose limit is invalid would have refused the request.
	if d := decide(e, context.Background(), redlimit.Input{Material: "zero"}); !d.Allowed || d.Failed || !d.WouldDeny || !d.Rules[0].LimitFailed || !errors.Is(d.Err, algorithms.ErrInvalidConfig) {
		t.Errorf("shadow rule, invalid limit, FailClosed: %+v, want allowed, WouldDeny, LimitFailed, Err set", d)
	}
}

// TestLimitFuncCalls: the function is called once per Input that applies,
// with Decide's context and the Input's material, and never for an
// exempt, missing or negative-cost Input, nor after the request stops.
func TestLimitFuncCalls(t *testing.T) {
	type ctxKey struct{}
	var got []string
	fn := func(ctx context.Context, material string) (algorithms.Limit, error) {
		got = append(got, material+"/"+ctx.Value(ctxKey{}).(string))
		return algorithms.PerHour(100), nil
	}
	e := newEngine(t, newMemory(t), redlimit.Config{OnError: redlimit.FailClosed, Rules: []redlimit.Rule{
		{Name: "a", Algorithm: algorithms.GCRA, LimitFunc: fn, MissingKey: redlimit.SkipMissingKey},
		{Name: "b", Algorithm: algorithms.GCRA, LimitFunc: fn},
	}})
	ctx := context.WithValue(context.Background(), ctxKey{}, "req")
	for _, tt := range []struct {
		name string
		in   []redlimit.Input
		want []string
	}{
		{"both", []redlimit.Input{{Material: "x"}, {Material: "y"}}, []string{"x/req", "y/req"}},
		{"exempt", []redlimit.Input{{Material: "x", Exempt: true}, {Material: "y"}}, []string{"y/req"}},
		{"missing then skipped", []redlimit.Input{{Missing: true}, {Material: "y"}}, []string{"y/req"}},
		{"missing denies first", []redlimit.Input{{Material: "x"}, {Missing: true}}, []string{"x/req"}},
		{"negative cost", []redlimit.Input{{Material: "x", Cost: -1}, {Material: "y"}}, nil},
		{"Input.Limit", []redlimit.Input{{Material: "x", Limit: algorithms.PerHour(7)}, {Material: "y"}}, []string{"y/req"}},
		{"Input.LimitErr stops under FailClosed", []redlimit.Input{{Material: "x", LimitErr: errNoPlan}, {Material: "y"}}, nil},
		{"Input.Err", []redlimit.Input{{Err: errNoPlan}, {Material: "y"}}, nil},
	} {
		got = nil
		var d redlimit.Decision
		e.Decide(ctx, inOrder(e, tt.in), &d)
		if len(got) != len(tt.want) || len(got) > 0 && got[0] != tt.want[0] || len(got) > 1 && got[1] != tt.want[1] {
			t.Errorf("%s: LimitFunc calls %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestInputLimit: an Input's own Limit replaces the rule's (static, tier or
// function), is validated, and a caller's LimitErr is a *LimitError.
func TestInputLimit(t *testing.T) {
	e := newEngine(t, newMemory(t), redlimit.Config{OnError: redlimit.FailOpen, Rules: []redlimit.Rule{
		{Name: "k", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(100), Tiers: map[string]algorithms.Limit{"pro": algorithms.PerHour(1000)}},
	}})
	allowed := 0
	for range 5 {
		d := decide(e, context.Background(), redlimit.Input{Material: "a", Tier: "pro", Limit: algorithms.PerHour(2)})
		if d.Rules[0].Limit != algorithms.PerHour(2) {
			t.Fatalf("decided under %v, want the Input's 2/1h0m0s", d.Rules[0].Limit)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("%d of 5 allowed under the Input's limit, want 2", allowed)
	}
	d := decide(e, context.Background(), redlimit.Input{Material: "a", Limit: algorithms.PerHour(2).WithBurst(1)})
	if want := `redlimit: rule "k": LimitFunc returned an invalid limit: Limit.Burst is not used by fixed_window and must be 0, got 1`; d.Err == nil || d.Err.Error() != want || !d.Rules[0].LimitFailed || d.Allowed || !d.Failed {
		t.Errorf("invalid Input.Limit: Err %v, rule %+v; want %q, the request refused (a programmer error, even under FailOpen)", d.Err, d.Rules[0], want)
	}
	d = decide(e, context.Background(), redlimit.Input{Material: "a", LimitErr: errNoPlan})
	if want := `redlimit: rule "k": LimitFunc failed: plans: no plan`; d.Err == nil || d.Err.Error() != want || !errors.Is(d.Err, errNoPlan) || !d.Rules[0].LimitFailed {
		t.Errorf("Input.LimitErr: Err %v, rule %+v; want %q", d.Err, d.Rules[0], want)
	}
}

// TestLimitFuncDenyCache: the deny cache in front of a remote backend
// holds a denial for the limit it was made under only. A key denied under
// a small limit is decided by the backend, and allowed at once, as soon as
// its function returns a larger limit; under the same limit it is denied
// locally.
func TestLimitFuncDenyCache(t *testing.T) {
	for _, tt := range []struct {
		alg   algorithms.Algorithm
		small algorithms.Limit
		large algorithms.Limit
		// after the change: allowed at once, or denied with this RetryAfter
		retry time.Duration
	}{
		{algorithms.FixedWindow, algorithms.PerHour(1), algorithms.PerHour(100), 0},
		{algorithms.SlidingWindow, algorithms.PerHour(1), algorithms.PerHour(100), 0},
		{algorithms.SlidingLog, algorithms.PerHour(1), algorithms.PerHour(100), 0},
		// A bucket keeps its debt, cut to one full bucket of the new limit:
		// one emission interval of it (36s) at most.
		{algorithms.GCRA, algorithms.PerHour(1), algorithms.PerHour(100), 36 * time.Second},
		{algorithms.TokenBucket, algorithms.PerHour(1), algorithms.PerHour(100), 36 * time.Second},
		// A larger burst under the same rate is capacity at once.
		{algorithms.GCRA, algorithms.PerHour(1), algorithms.PerHour(1).WithBurst(5), 0},
	} {
		p := newPlans(map[string]algorithms.Limit{"alice": tt.small})
		cb := &counting{next: newMemory(t)}
		e := newEngine(t, cb, redlimit.Config{Rules: []redlimit.Rule{{Name: "plan", Algorithm: tt.alg, LimitFunc: p.lookup}}})
		name := tt.alg.String() + " " + tt.small.String() + " to " + tt.large.String()
		if d := decide(e, context.Background(), redlimit.Input{Material: "alice"}); !d.Allowed {
			t.Fatalf("%s: first request denied", name)
		}
		for i := range 3 {
			if d := decide(e, context.Background(), redlimit.Input{Material: "alice"}); d.Allowed {
				t.Fatalf("%s: request %d over the small limit allowed", name, i+2)
			}
		}
		if cb.calls.Load() != 2 || e.Status().LocalDenials != 2 {
			t.Fatalf("%s: %d backend calls, %d local denials; want 2 and 2 (the denial cached)", name, cb.calls.Load(), e.Status().LocalDenials)
		}
		p.set("alice", tt.large)
		d := decide(e, context.Background(), redlimit.Input{Material: "alice"})
		if cb.calls.Load() != 3 || e.Status().LocalDenials != 2 {
			t.Errorf("%s: after the change %d backend calls, %d local denials; want the backend asked (3, 2)", name, cb.calls.Load(), e.Status().LocalDenials)
		}
		if d.Allowed != (tt.retry == 0) || d.Rules[0].Result.RetryAfter != tt.retry || d.Rules[0].Limit != tt.large {
			t.Errorf("%s: after the change allowed=%v retry after %v under %v; want allowed=%v, %v, under %v",
				name, d.Allowed, d.Rules[0].Result.RetryAfter, d.Rules[0].Limit, tt.retry == 0, tt.retry, tt.large)
		}
	}
}

// TestLimitFuncInvalid: a rule takes its limit from Limit and Tiers or
// from LimitFunc, not both, and still needs a valid Algorithm.
func TestLimitFuncInvalid(t *testing.T) {
	fn := newPlans(nil).lookup
	for _, tt := range []struct {
		rule redlimit.Rule
		want string
	}{
		{redlimit.Rule{Name: "p", Algorithm: algorithms.GCRA, LimitFunc: fn, Limit: algorithms.PerHour(1)},
			`redlimit: rule "p": Limit must be the zero Limit when LimitFunc is set, got 1/1h0m0s`},
		{redlimit.Rule{Name: "p", Algorithm: algorithms.GCRA, LimitFunc: fn, Tiers: map[string]algorithms.Limit{"pro": algorithms.PerHour(1)}},
			`redlimit: rule "p": Tiers must be nil when LimitFunc is set: a rule takes its limit from Limit and Tiers, or from LimitFunc`},
		{redlimit.Rule{Name: "p", LimitFunc: fn},
			`redlimit: rule "p": Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)`},
	} {
		_, err := redlimit.New(newMemory(t), redlimit.Config{Rules: []redlimit.Rule{tt.rule}})
		var ce *algorithms.ConfigError
		if !errors.As(err, &ce) || err.Error() != tt.want {
			t.Errorf("New = %v, want the *algorithms.ConfigError %q", err, tt.want)
		}
	}
}
