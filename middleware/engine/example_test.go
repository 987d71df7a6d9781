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
