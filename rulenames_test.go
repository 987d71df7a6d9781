package redlimit_test

import (
	"slices"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestRulesOrder: Rules lists the rules in rule order, the With rules
// after the base ones, in a fresh slice each time.
func TestRulesOrder(t *testing.T) {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim := algorithms.PerSecond(1)
	base, err := redlimit.New(mem, redlimit.Config{Rules: []redlimit.Rule{{Name: "ip", Algorithm: algorithms.GCRA, Limit: lim}}})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	route, err := base.With(redlimit.Rule{Name: "route", Algorithm: algorithms.FixedWindow, Limit: lim})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(route.Rules()); !slices.Equal(got, []string{"ip", "route"}) {
		t.Fatalf("Rules() = %q, want [ip route]", got)
	}
	got := base.Rules()
	got[0].Name = "changed"
	if got := names(base.Rules()); !slices.Equal(got, []string{"ip"}) {
		t.Fatalf("Rules() after changing a returned slice = %q, want [ip]", got)
	}
}

func names(rules []redlimit.Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}
