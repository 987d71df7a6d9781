package redlimit_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/contract"
)

var t0 = time.Unix(1_700_000_000, 0)

func fixed() time.Time { return t0 }

func newMemory(t testing.TB) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Config{Now: fixed})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newEngine builds an Limiter, defaulting Logger to one that drops
// everything and Timeout to 10s, and closes it when t ends. The default
// 100ms Timeout is a race against the wall clock that a loaded machine
// loses: a call to a real redis-server (or to a stub run from the guard
// goroutine) past it is refused, and after FallbackAfter of such failures
// the fallback decides, so exact counts would split between two backends.
// Tests whose point is a timeout set Timeout, or call redlimit.New for the
// default.
func newEngine(t testing.TB, b algorithms.Backend, cfg redlimit.Config) *redlimit.Limiter {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	e, err := redlimit.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

var twoPerHour = []redlimit.Rule{{Name: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)}}

// decide runs one Decide of in (see inOrder) and returns a copy of the
// decision.
func decide(e *redlimit.Limiter, ctx context.Context, in ...redlimit.Input) redlimit.Decision {
	var d redlimit.Decision
	e.Decide(ctx, inOrder(e, in), &d)
	return d
}

// inOrder returns a copy of in whose Inputs that name no rule name e's
// rules in rule order: the tests write a request's Inputs in rule order.
func inOrder(e *redlimit.Limiter, in []redlimit.Input) []redlimit.Input {
	rules := e.Rules()
	out := slices.Clone(in)
	for i := range out {
		if out[i].Rule == "" && i < len(rules) {
			out[i].Rule = rules[i].Name
		}
	}
	return out
}

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

// counting is a user's wrapper around memstore. It counts calls and
// records whether they had a deadline; it reports no capability.
type counting struct {
	next      *memstore.Store
	calls     atomic.Int64
	deadlines atomic.Int64
}

func (c *counting) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	c.calls.Add(1)
	if _, ok := ctx.Deadline(); ok {
		c.deadlines.Add(1)
	}
	return c.next.Allow(ctx, checks, results)
}

// traitsWrapper carries the traits of a built-in store, as a wrapper
// embedding one does.
type traitsWrapper struct {
	contract.Carrier
	*counting
}

// claiming has the methods that said the same before they were internal:
// a Backend of a user cannot claim a built-in store's treatment.
type claiming struct{ *counting }

func (claiming) InProcess() bool       { return true }
func (claiming) CachesDenials() bool   { return true }
func (claiming) HonoursDeadline() bool { return true }

// TestCapabilities: a store is treated by the traits it carries, as
// memstore is: InProcess gets no deny cache and no timeout, CachesDenials
// gets no second deny cache, and a Backend that carries none gets both,
// whatever methods it has.
func TestCapabilities(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		wrap                    func(*counting) algorithms.Backend
		calls, local, deadlines int64
	}{
		{"memstore itself", nil, 100, 0, 0},
		{"in-process wrapper", func(c *counting) algorithms.Backend {
			return traitsWrapper{contract.Carry(contract.Traits{InProcess: true}), c}
		}, 100, 0, 0},
		{"denial-caching wrapper", func(c *counting) algorithms.Backend {
			return traitsWrapper{contract.Carry(contract.Traits{CachesDenials: true}), c}
		}, 100, 0, 100},
		{"a user's claims", func(c *counting) algorithms.Backend { return claiming{c} }, 3, 97, 3},
		{"plain wrapper", func(c *counting) algorithms.Backend { return c }, 3, 97, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &counting{next: newMemory(t)}
			var b algorithms.Backend = c.next
			if tt.wrap != nil {
				b = tt.wrap(c)
			}
			e := newEngine(t, b, redlimit.Config{Rules: twoPerHour})
			allowed := 0
			for range 100 {
				if d := decide(e, context.Background(), redlimit.Input{Material: "all"}); d.Allowed {
					allowed++
				} else if d.Rules[0].Result.RetryAfter <= 0 {
					t.Fatalf("denial without RetryAfter: %+v", d.Rules[0])
				}
			}
			if tt.wrap == nil {
				c.calls.Store(100) // memstore itself is not counted: it decided every call
			}
			if allowed != 2 || c.calls.Load() != tt.calls || int64(e.Status().LocalDenials) != tt.local || c.deadlines.Load() != tt.deadlines {
				t.Errorf("%d allowed, %d backend calls (%d with a deadline), %d local denials; want 2, %d (%d), %d",
					allowed, c.calls.Load(), c.deadlines.Load(), e.Status().LocalDenials, tt.calls, tt.deadlines, tt.local)
			}
		})
	}
}

// overrunning ignores its context until release is closed, after telling
// late that its deadline has passed.
type overrunning struct {
	late    chan struct{}
	release chan struct{}
}

func (o *overrunning) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	<-ctx.Done()
	close(o.late)
	<-o.release
	return &algorithms.BackendError{Backend: "stub", Err: ctx.Err()}
}

// honouring carries the trait of a redisstore whose client honours
// deadlines.
type honouring struct {
	contract.Carrier
	*overrunning
}

// TestDeadlineCapability: a backend that honours deadlines is called
// directly and waited for, even past its deadline; one that does not is
// abandoned at Timeout and counted as stalled until it returns.
func TestDeadlineCapability(t *testing.T) {
	for _, honours := range []bool{true, false} {
		o := &overrunning{late: make(chan struct{}), release: make(chan struct{})}
		var b algorithms.Backend = o
		if honours {
			b = honouring{contract.Carry(contract.Traits{HonoursDeadline: true}), o}
		}
		e := newEngine(t, b, redlimit.Config{Rules: twoPerHour, OnError: redlimit.FailClosed, Timeout: 10 * time.Millisecond, NoDenyCache: true})
		done := make(chan redlimit.Decision)
		go func() { done <- decide(e, context.Background(), redlimit.Input{Material: "x"}) }()
		<-o.late // the backend is past its deadline and still running
		var d redlimit.Decision
		if honours {
			select {
			case d = <-done:
				t.Fatalf("honouring backend: Decide returned before the backend did: %+v", d)
			default:
			}
			close(o.release)
			d = <-done
		} else {
			d = <-done // returns while the backend is still held
			if got := e.Status().Stalled; got != 1 {
				t.Errorf("abandoned call: Stalled() = %d, want 1", got)
			}
			close(o.release)
			waitFor(t, "the abandoned call to finish", func() bool { return e.Status().Stalled == 0 })
		}
		if !d.Failed || d.Allowed || !errors.Is(d.Err, context.DeadlineExceeded) {
			t.Errorf("honours=%v: %+v, want Failed with a deadline error", honours, d)
		}
		var be *algorithms.BackendError
		want := map[bool]string{true: "stub", false: "engine"}[honours]
		if !errors.As(d.Err, &be) || be.Backend != want {
			t.Errorf("honours=%v: Err %v, want a BackendError of %q", honours, d.Err, want)
		}
	}
}

// hanging ignores its context: Allow returns only when release is closed.
type hanging struct {
	release chan struct{}
	calls   atomic.Int64
}

func (h *hanging) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	h.calls.Add(1)
	<-h.release
	return &algorithms.BackendError{Backend: "stub", Err: errors.New("read timeout")}
}

// TestStalledBound: past MaxStalled abandoned calls still running, calls to
// the stalled backend fail at once instead of piling up goroutines.
func TestStalledBound(t *testing.T) {
	base := runtime.NumGoroutine()
	b := &hanging{release: make(chan struct{})}
	e := newEngine(t, b, redlimit.Config{Rules: twoPerHour, OnError: redlimit.FailOpen, Timeout: 20 * time.Millisecond})
	// Concurrent calls until MaxStalled calls hang (a call scheduled after
	// its own deadline fails before calling, so it may take rounds).
	for round := 0; e.Status().Stalled < redlimit.MaxStalled && round < 10; round++ {
		var wg sync.WaitGroup
		for range redlimit.MaxStalled - e.Status().Stalled {
			wg.Go(func() { decide(e, context.Background(), redlimit.Input{Material: "x"}) })
		}
		wg.Wait()
	}
	if got := e.Status().Stalled; got != redlimit.MaxStalled {
		t.Fatalf("%d abandoned calls, want %d", got, redlimit.MaxStalled)
	}
	calls := b.calls.Load()
	// A call would hang until release is closed: no new call means the
	// request did not wait.
	d := decide(e, context.Background(), redlimit.Input{Material: "x"})
	if !d.Allowed || b.calls.Load() != calls {
		t.Errorf("past the bound: %+v, %d new calls; want allowed without calling", d, b.calls.Load()-calls)
	}
	if d.Err == nil || !strings.Contains(d.Err.Error(), "too many backend calls still running") || !strings.HasPrefix(d.Err.Error(), "redlimit: engine backend: ") {
		t.Errorf("Err %v", d.Err)
	}
	close(b.release)
	waitFor(t, "abandoned calls to finish", func() bool { return e.Status().Stalled == 0 })
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// failing fails every call and counts them, the probe's apart: the probe
// calls every 10ms or so during a run of failures, so how many it made
// depends on how fast the machine runs the test.
type failing struct{ calls, probes atomic.Int64 }

func (f *failing) Allow(_ context.Context, checks []algorithms.Check, _ []algorithms.Result) error {
	if len(checks) > 0 && strings.Contains(checks[0].Key, ":_probe:") {
		f.probes.Add(1)
	} else {
		f.calls.Add(1)
	}
	return &algorithms.BackendError{Backend: "stub", Err: errors.New("down")}
}

// TestWithShares: an Limiter derived with With shares its parent's deny
// cache and its fallback state; its rules come after the parent's.
func TestWithShares(t *testing.T) {
	c := &counting{next: newMemory(t)}
	parent := newEngine(t, c, redlimit.Config{Rules: twoPerHour})
	child, err := parent.With(redlimit.Rule{Name: "route", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(100)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		decide(parent, context.Background(), redlimit.Input{Material: "a"})
	}
	d := decide(child, context.Background(), redlimit.Input{Material: "a"}, redlimit.Input{Material: "/x"})
	if d.Allowed || c.calls.Load() != 3 || child.Status().LocalDenials != 1 || parent.Status().LocalDenials != 1 {
		t.Errorf("child: allowed %v after %d backend calls, local denials %d/%d; want the parent's denial answered locally",
			d.Allowed, c.calls.Load(), child.Status().LocalDenials, parent.Status().LocalDenials)
	}
	if got := []string{d.Rules[0].Name, d.Rules[1].Name}; got[0] != "k" || got[1] != "route" {
		t.Errorf("child rules %v", got)
	}

	f := &failing{}
	parent = newEngine(t, f, redlimit.Config{Rules: twoPerHour, ProbeInterval: time.Hour, FallbackAfter: time.Nanosecond})
	child, err = parent.With()
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(parent, context.Background(), redlimit.Input{Material: "a"}); !d.Failed {
		t.Fatalf("parent, first failure: %+v, want refused undecided", d)
	}
	if d := decide(parent, context.Background(), redlimit.Input{Material: "a"}); d.Source != redlimit.SourceFallback || !d.Allowed {
		t.Fatalf("parent: %+v, want the fallback", d)
	}
	if d := decide(child, context.Background(), redlimit.Input{Material: "a"}); d.Source != redlimit.SourceFallback || f.calls.Load() != 2 || d.Rules[0].Result.Remaining != 0 {
		t.Errorf("child: %+v after %d primary calls; want the shared fallback, its key at 0 remaining, no new primary call", d, f.calls.Load())
	}
}

// TestDecideInputs: what each Input leads to, on a memstore.
func TestDecideInputs(t *testing.T) {
	rules := []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: redlimit.SkipMissingKey,
			Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(100)}},
		{Name: "beta", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1), Shadow: true},
	}
	boom := errors.New("boom")
	for _, tt := range []struct {
		name  string
		in    []redlimit.Input
		check func(t *testing.T, d redlimit.Decision)
	}{
		{"all keyed, pro tier", []redlimit.Input{{Material: "1.2.3.4"}, {Material: "alice", Tier: "pro", Cost: 5}, {Material: "b"}}, func(t *testing.T, d redlimit.Decision) {
			if !d.Allowed || d.Source != redlimit.SourcePrimary || d.Rules[1].Limit != algorithms.PerMinute(100) || d.Rules[1].Result.Remaining != 95 ||
				d.Rules[0].Key != "rate:ip:gcra:{1.2.3.4}" || d.Rules[1].Key != "rate:user:tb:{alice}" || d.Rules[2].Key != "rate:beta:fw:{b}" {
				t.Errorf("%+v", d)
			}
		}},
		{"unknown tier gets Limit", []redlimit.Input{{Material: "1.2.3.5"}, {Material: "bob", Tier: "gold"}, {Material: "c"}}, func(t *testing.T, d redlimit.Decision) {
			if d.Rules[1].Limit != algorithms.PerMinute(10) || d.Rules[1].Result.Limit != 10 || d.Rules[1].Algorithm != algorithms.TokenBucket {
				t.Errorf("%+v", d.Rules[1])
			}
		}},
		{"missing user skipped", []redlimit.Input{{Material: "1.2.3.6"}, {Missing: true}, {Material: "d"}}, func(t *testing.T, d redlimit.Decision) {
			if !d.Allowed || !d.Rules[1].Skipped || d.Rules[1].Key != "" || !d.Rules[0].Evaluated {
				t.Errorf("%+v", d)
			}
		}},
		{"missing ip denied", []redlimit.Input{{Missing: true}, {Material: "carol"}, {Material: "e"}}, func(t *testing.T, d redlimit.Decision) {
			if d.Allowed || d.Failed || !d.Rules[0].MissingKey || d.Rules[1].Key != "" || d.Source != redlimit.SourceNone {
				t.Errorf("%+v", d)
			}
		}},
		{"negative cost", []redlimit.Input{{Material: "1.2.3.7", Cost: -1}, {Material: "dave"}, {Material: "f"}}, func(t *testing.T, d redlimit.Decision) {
			if d.Allowed || !d.Failed || !d.Rules[0].InvalidCost || d.Err == nil || d.Err.Error() != `redlimit: rule "ip": Cost must be >= 0, got -1` {
				t.Errorf("%+v", d)
			}
		}},
		// As the middleware always did: under a policy that lets the
		// request through, the rules before the failed Input are still
		// decided; the rules after it are not.
		{"failed input goes to the policy", []redlimit.Input{{Material: "1.2.3.8"}, {Err: boom}, {Material: "g"}}, func(t *testing.T, d redlimit.Decision) {
			if !d.Allowed || !errors.Is(d.Err, boom) || !d.Rules[0].Evaluated || d.Rules[2].Key != "" || d.Rules[2].Evaluated {
				t.Errorf("%+v", d)
			}
		}},
		{"inputs in any order", []redlimit.Input{{Rule: "beta", Material: "h"}, {Rule: "ip", Material: "1.2.3.9"}, {Rule: "user", Material: "erin"}}, func(t *testing.T, d redlimit.Decision) {
			if !d.Allowed || d.Rules[0].Key != "rate:ip:gcra:{1.2.3.9}" || d.Rules[1].Key != "rate:user:tb:{erin}" || d.Rules[2].Key != "rate:beta:fw:{h}" {
				t.Errorf("%+v", d)
			}
		}},
		{"a rule without an Input has no key", []redlimit.Input{{Rule: "ip", Material: "1.2.3.10"}}, func(t *testing.T, d redlimit.Decision) {
			if !d.Allowed || !d.WouldDeny || !d.Rules[0].Evaluated || !d.Rules[1].Skipped || !d.Rules[2].MissingKey || len(d.Rules) != 3 {
				t.Errorf("%+v", d)
			}
		}},
		{"an Input naming no rule", []redlimit.Input{{Rule: "ip", Material: "1.2.3.11"}, {Rule: "nope", Material: "x"}}, func(t *testing.T, d redlimit.Decision) {
			var ce *algorithms.ConfigError
			if d.Allowed || !d.Failed || !errors.As(d.Err, &ce) || ce.Rule != "nope" || ce.Field != "Input.Rule" || d.Rules[0].Evaluated || len(d.Rules) != 3 {
				t.Errorf("%+v", d)
			}
		}},
		{"two Inputs for one rule", []redlimit.Input{{Rule: "ip", Material: "1.2.3.12"}, {Rule: "ip", Material: "1.2.3.13"}}, func(t *testing.T, d redlimit.Decision) {
			var ce *algorithms.ConfigError
			if d.Allowed || !d.Failed || !errors.As(d.Err, &ce) || ce.Rule != "ip" || ce.Field != "Input.Rule" || d.Rules[0].Evaluated {
				t.Errorf("%+v", d)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
			tt.check(t, decide(e, context.Background(), tt.in...))
		})
	}
}

// TestShadow: a shadow rule that denies reports WouldDeny, and the live
// rules are charged as if it did not exist.
func TestShadow(t *testing.T) {
	rules := []redlimit.Rule{
		{Name: "live", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(5)},
		{Name: "shadow", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1), Shadow: true},
	}
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: rules})
	in := []redlimit.Input{{Material: "a"}, {Material: "a"}}
	for i, want := range []int64{4, 3, 2} {
		d := decide(e, context.Background(), in...)
		if !d.Allowed || d.WouldDeny != (i > 0) || d.Rules[0].Result.Remaining != want {
			t.Errorf("call %d: allowed %v, would deny %v, live remaining %d; want true, %v, %d", i, d.Allowed, d.WouldDeny, d.Rules[0].Result.Remaining, i > 0, want)
		}
	}
}

// TestOnDecision: the hook sees every decision, with its latency, and the
// caller's context.
func TestOnDecision(t *testing.T) {
	type key struct{}
	var got []redlimit.Decision
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: twoPerHour, OnDecision: func(ctx context.Context, d *redlimit.Decision) {
		if ctx.Value(key{}) != "v" {
			t.Error("hook without the caller's context")
		}
		got = append(got, *d.Clone())
	}})
	ctx := context.WithValue(context.Background(), key{}, "v")
	for range 3 {
		decide(e, ctx, redlimit.Input{Material: "a"})
	}
	if len(got) != 3 || !got[0].Allowed || !got[1].Allowed || got[2].Allowed || got[2].Latency <= 0 {
		t.Errorf("hook saw %+v", got)
	}
}

// TestNewInvalid: every configuration error is an *algorithms.ConfigError
// naming its field, with one "redlimit: " prefix.
func TestNewInvalid(t *testing.T) {
	mem := newMemory(t)
	good := twoPerHour[0]
	for _, tt := range []struct {
		backend algorithms.Backend
		cfg     redlimit.Config
		want    string
	}{
		{nil, redlimit.Config{Rules: twoPerHour}, `redlimit: backend must not be nil`},
		{mem, redlimit.Config{}, `redlimit: Config.Rules must hold at least one rule`},
		{mem, redlimit.Config{Rules: twoPerHour, Prefix: "a b"}, `redlimit: Config.Prefix must not contain braces or spaces, got "a b"`},
		{mem, redlimit.Config{Rules: twoPerHour, OnError: 9}, `redlimit: Config.OnError unknown policy ErrorPolicy(9)`},
		{mem, redlimit.Config{Rules: []redlimit.Rule{good, good}}, `redlimit: rule "k": Name is used by two rules`},
		{mem, redlimit.Config{Rules: []redlimit.Rule{{Name: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2), MissingKey: 5}}}, `redlimit: rule "k": MissingKey unknown value`},
		{mem, redlimit.Config{Rules: []redlimit.Rule{{Name: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2), Tiers: map[string]algorithms.Limit{"x": {}}}}},
			`redlimit: rule "k": Tiers["x"].Limit.Rate must be > 0, got 0`},
		{&failing{}, redlimit.Config{Rules: twoPerHour, DenyCache: denycacheConfig(-1)}, `redlimit: denycache.Config.MaxKeys must be >= 0, got -1`},
	} {
		_, err := redlimit.New(tt.backend, tt.cfg)
		var ce *algorithms.ConfigError
		if err == nil || err.Error() != tt.want || !errors.As(err, &ce) || strings.Count(err.Error(), "redlimit: ") != 1 {
			t.Errorf("New = %v, want the *algorithms.ConfigError %q", err, tt.want)
		}
	}
	e := newEngine(t, mem, redlimit.Config{Rules: twoPerHour})
	if _, err := e.With(good); err == nil || err.Error() != `redlimit: rule "k": Name is used by two rules` {
		t.Errorf("With(duplicate) = %v", err)
	}
}

// TestDecideAllocs: deciding an existing key on memstore allocates
// nothing when the caller reuses its Decision.
func TestDecideAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	e := newEngine(t, newMemory(t), redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1 << 20)},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerSecond(1 << 20), Tiers: map[string]algorithms.Limit{"pro": algorithms.PerSecond(1 << 21)}},
	}})
	in := []redlimit.Input{{Rule: "ip", Material: "192.0.2.1"}, {Rule: "user", Material: "alice", Tier: "pro"}}
	var d redlimit.Decision
	e.Decide(context.Background(), in, &d)
	if got := testing.AllocsPerRun(1000, func() { e.Decide(context.Background(), in, &d) }); got != 0 || !d.Allowed {
		t.Errorf("%v allocations per Decide (allowed %v), want 0", got, d.Allowed)
	}
	// Inputs out of rule order are matched by name without allocating
	// either.
	swapped := []redlimit.Input{in[1], in[0]}
	if got := testing.AllocsPerRun(1000, func() { e.Decide(context.Background(), swapped, &d) }); got != 0 || !d.Allowed || d.Rules[0].Key != "rate:ip:gcra:{192.0.2.1}" {
		t.Errorf("%v allocations per Decide of swapped Inputs (allowed %v), want 0", got, d.Allowed)
	}
}

func denycacheConfig(maxKeys int) denycache.Config { return denycache.Config{MaxKeys: maxKeys} }

// TestEmptyMaterialIsMissing: an empty Material is no key, not one bucket
// shared by every caller without a key (nor a key without a hash tag).
func TestEmptyMaterialIsMissing(t *testing.T) {
	t.Parallel()
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "deny", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
		{Name: "skip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100), MissingKey: redlimit.SkipMissingKey},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var d redlimit.Decision
	e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: ""}, {Material: ""}}), &d)
	if d.Allowed || !d.Rules[0].MissingKey || d.Rules[0].Key != "" {
		t.Errorf("Decide(\"\", \"\") = allowed %v, rule 0 %+v; want denied for a missing key", d.Allowed, d.Rules[0])
	}
	e.Decide(context.Background(), inOrder(e, []redlimit.Input{{Material: "alice"}, {Material: ""}}), &d)
	if !d.Allowed || !d.Rules[1].Skipped || d.Rules[1].Key != "" {
		t.Errorf("Decide(alice, \"\") = allowed %v, rule 1 %+v; want allowed, rule 1 skipped", d.Allowed, d.Rules[1])
	}
	if err := e.ResetInputs(context.Background(), []redlimit.Input{{Material: ""}, {Material: ""}}); err != nil {
		t.Errorf("ResetInputs(\"\", \"\") = %v, want nil (nothing to reset)", err)
	}
	if mem.Len() != 1 {
		t.Errorf("memstore holds %d keys, want 1 (alice's)", mem.Len())
	}
}
