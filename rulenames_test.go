package redlimit_test

import (
	"slices"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// TestRuleNames: the names in rule order, the With rules after the base
// ones, and a fresh slice each time.
func TestRuleNames(t *testing.T) {
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
	if got := route.RuleNames(); !slices.Equal(got, []string{"ip", "route"}) {
		t.Fatalf("RuleNames() = %q, want [ip route]", got)
	}
	got := base.RuleNames()
	got[0] = "changed"
	if got := base.RuleNames(); !slices.Equal(got, []string{"ip"}) {
		t.Fatalf("RuleNames() after changing a returned slice = %q, want [ip]", got)
	}
}
