package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// watchRow is one rule's decisions over one interval, summed over the
// endpoints.
type watchRow struct {
	Rule      string  `json:"rule"` // "source/rule"
	Allowed   uint64  `json:"allowed"`
	Denied    uint64  `json:"denied"` // by the backend and by deny caches
	Local     uint64  `json:"denied_local"`
	Shadow    uint64  `json:"shadow_denied"`
	Errors    uint64  `json:"errors"`
	Fallback  uint64  `json:"fallback"`
	PerSecond float64 `json:"decisions_per_second"`
	DeniedPS  float64 `json:"denied_per_second"`
}

type watchRound struct {
	Time    time.Time  `json:"time"`
	Seconds float64    `json:"seconds"`
	Rules   []watchRow `json:"rules"`
}

func cmdWatch(ctx context.Context, g *global, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(g.stderr)
	interval := fs.Duration("interval", 2*time.Second, "time between polls")
	count := fs.Int("count", 0, "stop after this many intervals (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprintln(g.stderr, "usage: redlimit -admin URL[,URL...] watch [-interval 2s] [-count N]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(g.admin) == 0 {
		return usagef("watch polls admin endpoints: give -admin URL[,URL...]")
	}
	if *interval <= 0 || *count < 0 || fs.NArg() != 0 {
		return usagef("watch takes no arguments; -interval must be > 0 and -count >= 0")
	}
	prev, at, err := g.poll(ctx, true)
	if err != nil {
		return err
	}
	for round := 0; *count == 0 || round < *count; round++ {
		if err := sleep(ctx, *interval); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		cur, now, err := g.poll(ctx, false)
		if err != nil {
			return err
		}
		r := watchRound{Time: now, Seconds: now.Sub(at).Seconds(), Rules: []watchRow{}}
		for _, name := range slices.Sorted(maps.Keys(cur)) {
			c, p := cur[name], prev[name]
			d := func(k string) uint64 {
				if c[k] < p[k] { // the instance restarted
					return c[k]
				}
				return c[k] - p[k]
			}
			row := watchRow{Rule: name, Allowed: d("allowed"), Denied: d("denied") + d("denied_local"), Local: d("denied_local"),
				Shadow: d("shadow_denied"), Errors: d("errors"), Fallback: d("fallback")}
			if r.Seconds > 0 {
				row.PerSecond = round1(float64(row.Allowed+row.Denied+row.Shadow+row.Errors) / r.Seconds)
				row.DeniedPS = round1(float64(row.Denied) / r.Seconds)
			}
			r.Rules = append(r.Rules, row)
		}
		if g.json {
			if err := g.emit(r); err != nil {
				return err
			}
		} else if err := g.watchTable(r); err != nil {
			return err
		}
		prev, at = cur, now
	}
	return nil
}

func round1(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 1, 64), 64)
	return v
}

// poll reads every endpoint and sums each rule's totals. An endpoint that
// fails is reported on stderr and left out, unless all fail on the first
// poll.
func (g *global) poll(ctx context.Context, first bool) (map[string]map[string]uint64, time.Time, error) {
	sum := map[string]map[string]uint64{}
	ok := 0
	var last error
	for _, url := range g.admin {
		p, err := g.fetchAdmin(ctx, url)
		if err != nil {
			fmt.Fprintln(g.stderr, "redlimit watch:", show(err.Error()))
			last = err
			continue
		}
		ok++
		for _, s := range p.Sources {
			for _, r := range s.Rules {
				name := s.Name + "/" + r.Name
				if sum[name] == nil {
					sum[name] = map[string]uint64{}
				}
				for k, v := range r.Totals {
					sum[name][k] += v
				}
			}
		}
	}
	if ok == 0 && first {
		return nil, time.Time{}, last
	}
	return sum, wallClock(), nil
}

func (g *global) watchTable(r watchRound) error {
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tDECISIONS/S\tDENIED/S\tALLOWED\tDENIED\tLOCAL\tSHADOW\tERRORS\tFALLBACK\n", r.Time.UTC().Format("15:04:05"))
	for _, row := range r.Rules {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\n", show(row.Rule), row.PerSecond, row.DeniedPS, row.Allowed, row.Denied, row.Local, row.Shadow, row.Errors, row.Fallback)
	}
	return tw.Flush()
}
