// Command chaos runs redlimit's fault-schedule harness (package
// internal/chaos): application instances driving every algorithm against
// a Redis topology it starts on 127.0.0.1, faults injected on a seeded
// schedule, and a checker that reads the recorded history.
//
//	chaos -topology single|sentinel|cluster|all -duration 60s -runs 100 -seed 1
//	chaos -short                  # the short mode `make test` runs
//	chaos -short -topology cluster -seed 1 -duration 8s  # one of its runs again (the replay line it prints)
//	chaos -mutate overadmit       # a broken backend: must report violations (also lockout, norefund, nocompensate)
//	chaos -check h-single-7.jsonl # check histories written by -history again, with this build's checker
//
// It prints each run's summary and every violation, with its history
// excerpt, its seed and the command that replays it; its last line is
//
//	chaos: R runs, D decisions, F faults, V violations (over-admission lost to failover: L)
//
// and it exits 1 when V > 0. See docs/reliability.md, "The chaos harness".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/chaos"
	"github.com/redlimit/redlimit/internal/chaos/world"
)

func main() {
	if chaos.IsWorker() {
		redis.SetLogger(quiet{})
		if err := chaos.Worker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "chaos worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

func run() int {
	topology := flag.String("topology", "single", "single, sentinel, cluster, or all")
	duration := flag.Duration("duration", 60*time.Second, "length of each run (faults, then a fault-free quarter)")
	runs := flag.Int("runs", 1, "runs per topology, seeds seed, seed+1, ...")
	seed := flag.Uint64("seed", 1, "seed of the first run")
	mutate := flag.String("mutate", "", `"", overadmit, lockout, norefund or nocompensate: a broken backend the checker must catch`)
	short := flag.Bool("short", false, "the short mode: fixed seeds covering every fault kind on every topology; with -seed or -topology, the runs they name with the short mode's checker (a replay of one of its runs)")
	processes := flag.Bool("processes", false, "run the application instances as separate OS processes")
	verbose := flag.Bool("v", false, "print each run's schedule and faults as they are injected")
	history := flag.String("history", "", "write each run's history (JSON lines) to this file prefix")
	kinds := flag.String("kinds", "", "comma-separated fault kinds to draw from (default: every kind the world offers, and instance-crash)")
	replicas := flag.Int("replicas", 0, "Sentinel and Cluster runs in the exact mode: a decision counts once this many replicas acknowledged it (redisstore.Config.Replicas); 0, asynchronous replication")
	check := flag.Bool("check", false, "check the history files named as arguments (written by -history) with this build's checker, as a long run (-short: as the short mode; -v: list what each lost to failovers)")
	flag.Parse()
	redis.SetLogger(quiet{})
	if *check {
		return checkFiles(flag.Args(), *short, *verbose)
	}

	if *mutate != "" && !slices.Contains(chaos.Mutations, *mutate) {
		fmt.Fprintf(os.Stderr, "chaos: -mutate %q: want one of %s\n", *mutate, strings.Join(chaos.Mutations, ", "))
		return 2
	}
	tops := []string{*topology}
	if *topology == "all" {
		tops = chaos.Topologies()
	}
	for _, t := range tops {
		if !slices.Contains(chaos.Topologies(), t) {
			fmt.Fprintf(os.Stderr, "chaos: -topology %q: this build runs %s\n", t, strings.Join(chaos.Topologies(), ", "))
			return 2
		}
	}

	// -short with a seed or a topology replays runs of the short mode: the
	// runs those flags name, checked as the short mode checks its own.
	replay := false
	flag.Visit(func(f *flag.Flag) { replay = replay || f.Name == "seed" || f.Name == "topology" })
	var plan []chaos.Options
	if *short && !replay {
		plan = chaos.ShortPlan(*mutate)
	} else {
		// Topologies interleave (seed s on each, then s+1): a long run cut
		// short still covers every topology evenly.
		for i := range *runs {
			for _, t := range tops {
				o := chaos.Options{Topology: t, Seed: *seed + uint64(i), Duration: *duration, Mutate: *mutate, Processes: *processes, Short: *short}
				if t != world.Single {
					o.Replicas = *replicas // a single node has no replica to wait for
				}
				if *kinds != "" {
					o.Kinds = strings.Split(*kinds, ",")
				}
				plan = append(plan, o)
			}
		}
	}
	if *history != "" {
		for i := range plan {
			plan[i].HistoryFile = fmt.Sprintf("%s-%s-%d.jsonl", *history, plan[i].Topology, plan[i].Seed)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var tot chaos.Totals
	if *short && !replay {
		tot = chaos.ExecuteParallel(ctx, plan, os.Stdout, *verbose)
	} else {
		tot = chaos.Execute(ctx, plan, os.Stdout, *verbose)
	}
	for top, ks := range tot.Uncovered() {
		fmt.Printf("chaos: %s: fault kinds never injected: %s\n", top, strings.Join(ks, ", "))
	}
	for top, ks := range tot.Kinds {
		fmt.Printf("chaos: %s: faults by kind: %v\n", top, ks)
	}
	fmt.Printf("chaos: %v in all\n", time.Since(start).Round(time.Millisecond))
	fmt.Println(tot.Line())
	if tot.Violations > 0 {
		return 1
	}
	return 0
}

// quiet drops go-redis's log lines (dial failures while a node is down are
// the point of the exercise).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// checkFiles checks each history file again (a checker changed since the
// runs, say) and prints what Execute prints of a run: its summary line,
// every violation, and the totals line.
func checkFiles(files []string, short, verbose bool) int {
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "chaos: -check: name the history files")
		return 2
	}
	opts := chaos.Options{Short: short}.CheckOptions()
	var t chaos.Totals
	for _, f := range files {
		file, err := os.Open(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
		h, err := chaos.ReadHistory(file)
		file.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", f, err)
			return 2
		}
		s := chaos.Check(h, opts)
		t.Runs++
		t.Decisions += s.Decisions
		t.Faults += s.Faults
		t.Violations += len(s.Violations)
		t.Lost += s.LostUnits
		fmt.Printf("chaos: check %s: %d decisions, %d faults, %d violations, lost to failover %d, give-backs checked at %d of %d peeks, fallbacks admitted %d of their bound %d\n", f, s.Decisions, s.Faults, len(s.Violations), s.LostUnits, s.GiveBackChecked, s.GiveBackPeeks, s.FallbackUnits, s.FallbackBound)
		for _, v := range s.Violations {
			fmt.Printf("VIOLATION %s\n", v)
		}
		if verbose {
			for _, v := range s.Lost {
				fmt.Printf("  lost to failover: %s\n", strings.SplitN(v.String(), "\n", 2)[0])
			}
		}
	}
	fmt.Println(t.Line())
	if t.Violations > 0 {
		return 1
	}
	return 0
}
