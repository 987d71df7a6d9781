package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A caller that has its keys already (a job queue, an RPC server) decides
// with the limiter directly: one Input per rule, keyed by rule name, in
// any order. A rule without an Input has no key material.
func ExampleLimiter_Decide() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "tenant", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2),
			Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(100)}},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: redlimit.SkipMissingKey},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	var d redlimit.Decision // reused: Decide then allocates nothing
	for i := range 3 {
		in := []redlimit.Input{{Rule: "tenant", Material: "acme"}, {Rule: "user", Material: "alice"}}
		e.Decide(context.Background(), in, &d)
		fmt.Printf("call %d: allowed=%v tenant remaining=%d retry after %v; key %s\n",
			i, d.Allowed, d.Rules[0].Result.Remaining, d.Rules[0].Result.RetryAfter, d.Rules[0].Key)
	}
	// A pro tenant, and a job without a user: the user rule is skipped.
	e.Decide(context.Background(), []redlimit.Input{{Rule: "tenant", Material: "globex", Tier: "pro"}}, &d)
	fmt.Printf("pro: allowed=%v limit=%d, user skipped=%v\n", d.Allowed, d.Rules[0].Result.Limit, d.Rules[1].Skipped)
	// Output:
	// call 0: allowed=true tenant remaining=1 retry after 0s; key rate:tenant:gcra:{acme}
	// call 1: allowed=true tenant remaining=0 retry after 0s; key rate:tenant:gcra:{acme}
	// call 2: allowed=false tenant remaining=0 retry after 30s; key rate:tenant:gcra:{acme}
	// pro: allowed=true limit=100, user skipped=true
}

// The key-first API: a worker limits its jobs per tenant with one line,
// no Input, no HTTP. The rules are decided together, all-or-nothing, with
// the timeout, error policy and deny cache of Decide.
func ExampleLimiter_Allow() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	jobs, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "jobs", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)},
	}})
	if err != nil {
		panic(err)
	}
	defer jobs.Close()

	for i := range 4 {
		d := jobs.Allow(context.Background(), "tenant:acme")
		if !d.Allowed {
			fmt.Printf("job %d: later, retry after %v\n", i, d.Rules[0].Result.RetryAfter)
			continue
		}
		fmt.Printf("job %d: run, %d left\n", i, d.Rules[0].Result.Remaining)
	}
	// A batch of 2 costs 2.
	d := jobs.AllowN(context.Background(), "tenant:globex", 2)
	fmt.Printf("batch: allowed=%v, %d left\n", d.Allowed, d.Rules[0].Result.Remaining)
	// Output:
	// job 0: run, 2 left
	// job 1: run, 1 left
	// job 2: run, 0 left
	// job 3: later, retry after 20s
	// batch: allowed=true, 1 left
}

// An outbound pacer: at most 10 calls a second to a partner's API, one
// every 100ms, from any number of goroutines (and, on a redisstore,
// instances). Wait sleeps by the exact RetryAfter. The clock is injected
// here so the output is exact; a service leaves Now and Sleep unset.
func ExampleLimiter_Wait() {
	start := time.Unix(1_700_000_000, 0)
	now := start
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	pacer, err := redlimit.New(mem, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "partner", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10).WithBurst(1)}},
		Sleep: func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil },
	})
	if err != nil {
		panic(err)
	}
	defer pacer.Close()

	for i := range 4 {
		if err := pacer.Wait(context.Background(), "api.partner.example"); err != nil {
			panic(err)
		}
		fmt.Printf("call %d at +%v\n", i, now.Sub(start))
	}
	// A cost that can never fit fails at once.
	err = pacer.WaitN(context.Background(), "api.partner.example", 2)
	fmt.Println(errors.Is(err, redlimit.ErrNeverAllowed), err)
	// Output:
	// call 0 at +0s
	// call 1 at +100ms
	// call 2 at +200ms
	// call 3 at +300ms
	// true redlimit: can never be allowed: rule "partner": cost 2 is above its capacity 1
}

// Support looks at a customer's state without spending anything (Peek),
// then unblocks them (Reset): their keys start afresh under every rule.
func ExampleLimiter_Reset() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	api, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "minute", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(5)},
		{Name: "day", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 1000, Period: 24 * time.Hour}},
	}})
	if err != nil {
		panic(err)
	}
	defer api.Close()
	ctx := context.Background()

	for api.Allow(ctx, "customer:42").Allowed {
	}
	show := func(when string) {
		d := api.Peek(ctx, "customer:42")
		fmt.Printf("%s: allowed=%v minute: %d left, retry after %v; day: %d left\n", when, d.Allowed,
			d.Rules[0].Result.Remaining, d.Rules[0].Result.RetryAfter, d.Rules[1].Result.Remaining)
	}
	show("blocked")
	show("peeked again") // Peek consumes nothing
	if err := api.Reset(ctx, "customer:42"); err != nil {
		panic(err)
	}
	show("reset")
	// Output:
	// blocked: allowed=false minute: 0 left, retry after 52s; day: 995 left
	// peeked again: allowed=false minute: 0 left, retry after 52s; day: 995 left
	// reset: allowed=true minute: 5 left, retry after 0s; day: 1000 left
}

// Several key materials per call: a per-IP and a per-user rule, one Input
// each, keyed by rule name. Peek and Reset take one material for every
// rule: resetting "alice" unblocks her user key (the ip rule has no key
// "alice").
func ExampleLimiter_Decide_materials() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(100)},
		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	ctx := context.Background()
	in := []redlimit.Input{{Rule: "user", Material: "alice"}, {Rule: "ip", Material: "203.0.113.7"}}

	var d redlimit.Decision
	for range 3 {
		e.Decide(ctx, in, &d)
	}
	fmt.Printf("third call: allowed=%v ip %d left, user %d left (retry after %v)\n", d.Allowed,
		d.Rules[0].Result.Remaining, d.Rules[1].Result.Remaining, d.Rules[1].Result.RetryAfter)

	if err := e.Reset(ctx, "alice"); err != nil { // unblock alice
		panic(err)
	}
	e.Decide(ctx, in, &d)
	fmt.Printf("after reset: allowed=%v user key %s, %d left\n", d.Allowed, d.Rules[1].Key, d.Rules[1].Result.Remaining)
	// Output:
	// third call: allowed=false ip 98 left, user 0 left (retry after 30s)
	// after reset: allowed=true user key rate:user:gcra:{alice}, 1 left
}

func ExampleRule_limitFunc() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	plans := map[string]algorithms.Limit{"acme": algorithms.PerMinute(2), "globex": algorithms.PerMinute(100)}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{{
		Name: "plan", Algorithm: algorithms.GCRA,
		LimitFunc: func(ctx context.Context, customer string) (algorithms.Limit, error) {
			l, ok := plans[customer]
			if !ok {
				return algorithms.Limit{}, fmt.Errorf("no plan for %q", customer)
			}
			return l, nil
		},
	}}})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	var d redlimit.Decision
	for _, customer := range []string{"acme", "acme", "acme", "globex", "initech"} {
		e.Decide(context.Background(), []redlimit.Input{{Rule: "plan", Material: customer}}, &d)
		fmt.Printf("%s: allowed=%v limit=%v remaining=%d err=%v\n", customer, d.Allowed, d.Rules[0].Limit, d.Rules[0].Result.Remaining, d.Err)
	}
	// Output:
	// acme: allowed=true limit=2/1m0s remaining=1 err=<nil>
	// acme: allowed=true limit=2/1m0s remaining=0 err=<nil>
	// acme: allowed=false limit=2/1m0s remaining=0 err=<nil>
	// globex: allowed=true limit=100/1m0s remaining=99 err=<nil>
	// initech: allowed=true limit=0/0s remaining=0 err=redlimit: rule "plan": LimitFunc failed: no plan for "initech"
}

// An adapter (an RPC interceptor, an admin page) reads the rules a
// Limiter enforces, in rule order.
func ExampleLimiter_Rules() {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10)},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(100)},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	for _, r := range e.Rules() {
		fmt.Println(r.Name, r.Algorithm, r.Limit)
	}
	// Output:
	// ip gcra 10/1s
	// user token_bucket 100/1m0s
}
