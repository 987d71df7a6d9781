package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// Topologies lists the topologies this build's worlds can start.
func Topologies() []string { return []string{world.Single, world.Sentinel, world.Cluster} }

// shortSeeds are the short mode's fixed seeds, per topology: each run's
// schedule covers every fault kind the topology's world injects (TestShort
// checks it).
//
// Among the seeds that cover every kind, these draw the fewest faults that
// take seconds to heal (failovers, clock faults, kills), so that the
// short mode stays short: when the slow fault joined the kinds, seed 1
// drew one more clock fault on Sentinel (18 faults, 5 of them failovers
// or clock faults; seed 10: 16, 4) and one more kill on the single node
// (13 faults; seed 9: 12).
var shortSeeds = map[string]uint64{
	world.Single:   9,
	world.Sentinel: 10,
	world.Cluster:  1,
}

// shortDurations are the lengths of the short mode's runs, per topology:
// long enough for every kind its world offers.
var shortDurations = map[string]time.Duration{
	world.Single:   6 * time.Second,
	world.Sentinel: 8 * time.Second,
	world.Cluster:  8 * time.Second,
}

// ShortPlan is the short mode: one run per topology with its fixed seed,
// and on the single node one more with the instances as worker processes.
func ShortPlan(mutate string) []Options {
	var plan []Options
	for _, top := range Topologies() {
		plan = append(plan, Options{Topology: top, Seed: shortSeeds[top], Duration: shortDurations[top], Short: true, Mutate: mutate})
	}
	plan = append(plan, Options{Topology: world.Single, Seed: 2, Duration: shortDurations[world.Single], Short: true, Mutate: mutate, Processes: true})
	return plan
}

// Totals sums the runs of one invocation.
type Totals struct {
	Runs, Decisions, Faults, Violations int
	Lost                                int64
	// Kinds counts the faults injected, per topology and kind;
	// WorldKinds lists the kinds each topology's world offered.
	Kinds      map[string]map[string]int
	WorldKinds map[string][]string
	// Failed lists the runs that could not run (a world that did not
	// start): each is a violation, since nothing was checked.
	Failed []string
}

// Uncovered lists, per topology, the kinds its world offered that no run
// injected.
func (t Totals) Uncovered() map[string][]string {
	m := map[string][]string{}
	for top, ks := range t.WorldKinds {
		for _, k := range ks {
			if t.Kinds[top][k] == 0 {
				m[top] = append(m[top], k)
			}
		}
	}
	return m
}

// Line is the invocation's last line.
func (t Totals) Line() string {
	return fmt.Sprintf("chaos: %d runs, %d decisions, %d faults, %d violations (over-admission lost to failover: %d)",
		t.Runs, t.Decisions, t.Faults, t.Violations, t.Lost)
}

// Execute runs plan one run after the other, printing each run's summary
// and its violations (with the seed and the command that replays it) to
// out, and returns the totals. A run that fails to start counts as a
// violation.
func Execute(ctx context.Context, plan []Options, out io.Writer, verbose bool) Totals {
	t := Totals{Kinds: map[string]map[string]int{}, WorldKinds: map[string][]string{}}
	log := &lockedWriter{w: out}
	out = log
	for i, o := range plan {
		if ctx.Err() != nil {
			break
		}
		if verbose {
			o.Log = log
		}
		r, err := Run(ctx, o)
		t.Runs++
		if err != nil && r == nil {
			t.Violations++
			t.Failed = append(t.Failed, fmt.Sprintf("%s: %v", o.Replay(), err))
			fmt.Fprintf(out, "chaos: run %d/%d %s seed=%d: did not run: %v\n  replay: %s\n", i+1, len(plan), o.Topology, o.Seed, err, o.Replay())
			continue
		}
		s := r.Summary
		t.Decisions += s.Decisions
		t.Faults += s.Faults
		t.Violations += len(s.Violations)
		t.Lost += s.LostUnits
		t.WorldKinds[o.Topology] = r.Kinds
		if t.Kinds[o.Topology] == nil {
			t.Kinds[o.Topology] = map[string]int{}
		}
		for k, n := range s.FaultKinds {
			t.Kinds[o.Topology][k] += n
		}
		fmt.Fprintf(out, "chaos: run %d/%d %s seed=%d%s: %d decisions %s (%d from quota blocks), %d faults %s (%d promotions seen), %d violations, lost to failover %d, capacity lost %s, refunds failed %s, give-backs checked at %d of %d peeks, fallbacks admitted %d of their bound %d, max latency %v (%d slower explained by stalls of the process or its wait for a CPU), settles and releases over the bound %d (max %v)\n",
			i+1, len(plan), o.Topology, o.Seed, modeOf(o), s.Decisions, counts(s.Outcomes), s.FromBlocks, s.Faults, counts(s.FaultKinds), s.Observed,
			len(s.Violations), s.LostUnits, counts64(s.CapacityLost), counts64(s.RefundsFailed), s.GiveBackChecked, s.GiveBackPeeks, s.FallbackUnits, s.FallbackBound, s.MaxLatency.Round(time.Millisecond), s.Stalled, s.SlowAfter, s.MaxAfter.Round(time.Millisecond))
		for _, v := range s.Lost {
			fmt.Fprintf(out, "  lost to failover: %s\n", firstLine(v.String()))
		}
		for _, v := range s.Violations {
			fmt.Fprintf(out, "VIOLATION seed=%d %s\n  replay: %s\n", o.Seed, v, o.Replay())
		}
	}
	return t
}

func modeOf(o Options) string {
	var m []string
	if o.Processes {
		m = append(m, "processes")
	}
	if o.Mutate != "" {
		m = append(m, "mutate="+o.Mutate)
	}
	if o.Replicas > 0 {
		m = append(m, fmt.Sprintf("exact: replicas=%d", o.Replicas))
	}
	if len(m) == 0 {
		return ""
	}
	return " (" + strings.Join(m, ", ") + ")"
}

func counts(m map[string]int) string {
	var b []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = append(b, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return "{" + strings.Join(b, " ") + "}"
}

func counts64(m map[string]int64) string {
	var b []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = append(b, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return "{" + strings.Join(b, " ") + "}"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ExecuteParallel runs the runs of plan side by side (each starts its own
// world; most of a run's time is spent waiting for failovers and
// restarts), marks them Shared (goroutines are not counted per run), and
// prints each run's output in plan order once all have ended.
func ExecuteParallel(ctx context.Context, plan []Options, out io.Writer, verbose bool) Totals {
	outs := make([]strings.Builder, len(plan))
	tots := make([]Totals, len(plan))
	var wg sync.WaitGroup
	for i, o := range plan {
		o.Shared = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			tots[i] = Execute(ctx, []Options{o}, &outs[i], verbose)
		}()
	}
	wg.Wait()
	t := Totals{Kinds: map[string]map[string]int{}, WorldKinds: map[string][]string{}}
	for i := range plan {
		io.WriteString(out, outs[i].String())
		x := tots[i]
		t.Runs += x.Runs
		t.Decisions += x.Decisions
		t.Faults += x.Faults
		t.Violations += x.Violations
		t.Lost += x.Lost
		t.Failed = append(t.Failed, x.Failed...)
		for top, ks := range x.Kinds {
			if t.Kinds[top] == nil {
				t.Kinds[top] = map[string]int{}
			}
			for k, n := range ks {
				t.Kinds[top][k] += n
			}
		}
		for top, ks := range x.WorldKinds {
			t.WorldKinds[top] = append(t.WorldKinds[top], ks...)
		}
	}
	return t
}
