package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware/engine"
)

// A caller that has its keys already (a job queue, an RPC server) decides
// with the engine directly: one Input per rule, in rule order.
func ExampleEngine_Decide() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	e, err := engine.New(mem, engine.Config{Rules: []engine.Rule{
		{Name: "tenant", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2),
			Tiers: map[string]algorithms.Limit{"pro": algorithms.PerMinute(100)}},
		{Name: "user", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerMinute(10), MissingKey: engine.SkipMissingKey},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	var d engine.Decision // reused: Decide then allocates nothing
	for i := range 3 {
		in := []engine.Input{{Material: "acme"}, {Material: "alice"}}
		e.Decide(context.Background(), in, &d)
		fmt.Printf("call %d: allowed=%v tenant remaining=%d retry after %v; key %s\n",
			i, d.Allowed, d.Rules[0].Result.Remaining, d.Rules[0].Result.RetryAfter, d.Rules[0].Key)
	}
	// A pro tenant, and a job without a user: the user rule is skipped.
	e.Decide(context.Background(), []engine.Input{{Material: "globex", Tier: "pro"}, {Missing: true}}, &d)
	fmt.Printf("pro: allowed=%v limit=%d, user skipped=%v\n", d.Allowed, d.Rules[0].Result.Limit, d.Rules[1].Skipped)
	// Output:
	// call 0: allowed=true tenant remaining=1 retry after 0s; key rate:tenant:gcra:{acme}
	// call 1: allowed=true tenant remaining=0 retry after 0s; key rate:tenant:gcra:{acme}
	// call 2: allowed=false tenant remaining=0 retry after 30s; key rate:tenant:gcra:{acme}
	// pro: allowed=true limit=100, user skipped=true
}

// A rule whose limit comes from each customer's plan, looked up per call
// (here a map; in a service, a cached database read). A function that
// means "unknown customers get the free plan" returns that plan; an error
// says the limit cannot be known: the engine never substitutes a limit of
// its own. The rule is then left out (under FailClosed the request is
// refused) and Decision.Err names the rule.
func ExampleRule_limitFunc() {
	now := time.Unix(1_700_000_000, 0)
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	plans := map[string]algorithms.Limit{"acme": algorithms.PerMinute(2), "globex": algorithms.PerMinute(100)}
	e, err := engine.New(mem, engine.Config{Rules: []engine.Rule{{
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

	var d engine.Decision
	for _, customer := range []string{"acme", "acme", "acme", "globex", "initech"} {
		e.Decide(context.Background(), []engine.Input{{Material: customer}}, &d)
		fmt.Printf("%s: allowed=%v limit=%v remaining=%d err=%v\n", customer, d.Allowed, d.Rules[0].Limit, d.Rules[0].Result.Remaining, d.Err)
	}
	// Output:
	// acme: allowed=true limit=2/1m0s remaining=1 err=<nil>
	// acme: allowed=true limit=2/1m0s remaining=0 err=<nil>
	// acme: allowed=false limit=2/1m0s remaining=0 err=<nil>
	// globex: allowed=true limit=100/1m0s remaining=99 err=<nil>
	// initech: allowed=true limit=0/0s remaining=0 err=redlimit: rule "plan": LimitFunc failed: no plan for "initech"
}
