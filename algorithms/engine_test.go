package algorithms_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
)

// The conformance vectors and the random workload, played through the
// decision engine over memstore: the engine adds keys, tiers and policy,
// and must not change a single Result. (The test lives here because the
// vectors' loader is internal to this tree.)

// TestEngineConformance plays every vector through an engine: one rule per
// vector limit, the vector's key as key material. A scenario whose keys are
// shared by its limits becomes one rule whose tiers are those limits,
// when they share an algorithm.
func TestEngineConformance(t *testing.T) {
	for _, sc := range backendtest.LoadVectors(t) {
		t.Run(sc.File+"/"+sc.Name, func(t *testing.T) {
			t.Parallel()
			for _, st := range sc.Steps {
				if st.Label != "" || st.Refund != "" {
					t.Skip("refunds: see the engine's own tests")
				}
			}
			names := slices.Sorted(maps.Keys(sc.Limits))
			var rules []redlimit.Rule
			ruleOf := map[string]int{} // limit name -> rule index
			if sc.Shared {
				alg := sc.Limits[names[0]].Alg
				tiers := map[string]algorithms.Limit{}
				for _, n := range names {
					if sc.Limits[n].Alg != alg {
						// The engine keys each algorithm apart by design
						// (the tag in the storage key): a rule cannot
						// change algorithm and keep its state.
						t.Skipf("limits %v change algorithm on one key", names)
					}
					tiers[n] = sc.Limits[n].Limit
					ruleOf[n] = 0
				}
				rules = []redlimit.Rule{{Name: "shared", Algorithm: alg, Limit: sc.Limits[names[0]].Limit, Tiers: tiers}}
			} else {
				for i, n := range names {
					rules = append(rules, redlimit.Rule{Name: "r" + strconv.Itoa(i), Algorithm: sc.Limits[n].Alg, Limit: sc.Limits[n].Limit, MissingKey: redlimit.SkipMissingKey})
					ruleOf[n] = i
				}
			}
			mem, clock := newMemory(t)
			e, err := redlimit.New(mem, redlimit.Config{Rules: rules, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var d redlimit.Decision
			held := map[backendtest.CheckSpec]*redlimit.Decision{} // a vector's check -> the Decision that took its lease
			for _, st := range sc.Steps {
				clock.T = sc.Start.Add(st.At)
				if st.Op != "" {
					if !playLeaseStep(t, e, st, held) {
						return
					}
					continue
				}
				in := make([]redlimit.Input, len(rules))
				for i := range in {
					in[i] = redlimit.Input{Rule: rules[i].Name, Missing: true}
				}
				for _, c := range st.Checks {
					if _, again := held[backendtest.CheckSpec{Key: c.Key, Lease: c.Lease}]; again && c.Lease != 0 {
						// the engine draws a lease per decision: it never acquires with one twice
						return
					}
					x := &in[ruleOf[c.Limit]]
					if !x.Missing {
						t.Skipf("line %d checks one rule twice in one call", st.Line)
					}
					*x = redlimit.Input{Rule: x.Rule, Material: c.Key, Cost: c.Cost}
					if sc.Shared {
						x.Tier = c.Limit
					}
				}
				e.Decide(context.Background(), in, &d)
				if d.Err != nil {
					t.Fatalf("line %d: %s: Decide: %v", st.Line, st.Text, d.Err)
				}
				if holdsSlots(&d) {
					for _, c := range st.Checks {
						held[backendtest.CheckSpec{Key: c.Key, Lease: c.Lease}] = d.Clone()
					}
				}
				for i, c := range st.Checks {
					rd := d.Rules[ruleOf[c.Limit]]
					if rd.Result != st.Want[i] {
						t.Errorf("line %d: %s\n  check %d: Decide(%s, T0+%v) = %s, want %s",
							st.Line, st.Text, i, rd.Key, st.At, backendtest.FormatResult(rd.Result), backendtest.FormatResult(st.Want[i]))
					}
				}
			}
		})
	}
}

// TestEngineDifferential: the random workload through an engine decides
// exactly as memstore called directly.
func TestEngineDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			work := backendtest.RandomWorkload(seed, 120)
			direct, dc := newMemory(t)
			behind, ec := newMemory(t)
			// The workload's rules: "r<i>:{<material>}", one algorithm
			// and limit per rule index.
			var rules []redlimit.Rule
			for _, cl := range work {
				for _, ch := range cl.Checks {
					i, _ := strconv.Atoi(ch.Key[1:strings.IndexByte(ch.Key, ':')])
					for len(rules) <= i {
						rules = append(rules, redlimit.Rule{Name: "r" + strconv.Itoa(len(rules)), MissingKey: redlimit.SkipMissingKey})
					}
					rules[i].Algorithm, rules[i].Limit = ch.Algorithm, ch.Limit
				}
			}
			e, err := redlimit.New(behind, redlimit.Config{Rules: rules, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var d redlimit.Decision
			for step, cl := range work {
				want := backendtest.Run(t, direct, dc, "", cl)
				ec.T = cl.At
				in := make([]redlimit.Input, len(rules))
				idx := make([]int, len(cl.Checks))
				for i := range in {
					in[i] = redlimit.Input{Rule: rules[i].Name, Missing: true}
				}
				for j, ch := range cl.Checks {
					i, _ := strconv.Atoi(ch.Key[1:strings.IndexByte(ch.Key, ':')])
					material := ch.Key[strings.IndexByte(ch.Key, '{')+1 : len(ch.Key)-1]
					in[i] = redlimit.Input{Rule: rules[i].Name, Material: material, Cost: ch.Cost}
					idx[j] = i
				}
				e.Decide(context.Background(), in, &d)
				if d.Err != nil {
					t.Fatalf("step %d: %v", step, d.Err)
				}
				for j, i := range idx {
					if got := d.Rules[i].Result; got != want[j] {
						t.Fatalf("step %d check %d (%v %v cost %d at t0+%v): engine %+v, memstore %+v",
							step, j, cl.Checks[j].Algorithm, cl.Checks[j].Limit, cl.Checks[j].Cost, cl.At.Sub(backendtest.T0), got, want[j])
					}
				}
				if allowed := d.Allowed; allowed != allAllowed(want) {
					t.Fatalf("step %d: engine allowed %v, memstore %+v", step, allowed, want)
				}
			}
		})
	}
}

func allAllowed(rs []algorithms.Result) bool {
	for _, r := range rs {
		if !r.Allowed {
			return false
		}
	}
	return true
}

// holdsSlots reports whether d, allowed, took the slots of a concurrency
// rule (which Settle releases).
func holdsSlots(d *redlimit.Decision) bool {
	for i := range d.Rules {
		if rd := &d.Rules[i]; d.Allowed && rd.Algorithm == algorithms.Concurrency && rd.Evaluated && rd.Result.Allowed {
			return true
		}
	}
	return false
}
