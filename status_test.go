package redlimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// outOfProcess hides a memstore's InProcess: the engine puts a deny cache
// in front of it. fail makes every call fail.
type outOfProcess struct {
	mem  *memstore.Store
	fail bool
}

func (o *outOfProcess) Allow(ctx context.Context, c []algorithms.Check, r []algorithms.Result) error {
	if o.fail {
		return errors.New("down")
	}
	return o.mem.Allow(ctx, c, r)
}

// TestRulesAndStatus: Rules copies the rules (Config.Shadow applied),
// Status reports the deny cache and the fallback.
func TestRulesAndStatus(t *testing.T) {
	mem, _ := memstore.New(memstore.Config{})
	b := &outOfProcess{mem: mem}
	tiers := map[string]algorithms.Limit{"pro": algorithms.PerSecond(10)}
	e, err := redlimit.New(b, redlimit.Config{Shadow: false, Prefix: "p", FallbackAfter: time.Nanosecond, Rules: []redlimit.Rule{
		{Name: "a", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1), Tiers: tiers},
		{Name: "b", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(5), Shadow: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rules := e.Rules()
	if len(rules) != 2 || rules[0].Name != "a" || rules[0].Limit != algorithms.PerSecond(1) || rules[0].Shadow || !rules[1].Shadow {
		t.Fatalf("Rules() = %+v", rules)
	}
	rules[0].Tiers["pro"] = algorithms.PerSecond(99)
	if e.Rules()[0].Tiers["pro"] != algorithms.PerSecond(10) {
		t.Fatal("Rules() shares its Tiers with the engine")
	}
	ctx := context.Background()
	e.Allow(ctx, "k")
	e.Allow(ctx, "k")
	e.Allow(ctx, "k") // a local denial
	st := e.Status()
	if st != (redlimit.Status{Prefix: "p", Policy: redlimit.Fallback, DenyCache: true, DenyCacheKeys: 1, LocalDenials: 1}) {
		t.Fatalf("Status() = %+v", st)
	}
	b.fail = true
	e.Allow(ctx, "other")
	if st := e.Status(); st.OnFallback {
		t.Fatalf("Status() after one failure = %+v, want not OnFallback", st)
	}
	e.Allow(ctx, "other")
	if st := e.Status(); !st.OnFallback {
		t.Fatalf("Status() after a failure = %+v, want OnFallback", st)
	}
}
