package main

import (
	"fmt"
	"io"
	"strings"
)

// sameAlgorithm keeps the rows of the same-algorithm comparison: each
// redlimit algorithm that a peer also runs, that peer, and the baseline
// that every cell is divided by. The first row, the reference of the
// other tables, is a pair's redlimit row.
func sameAlgorithm(lms []limiter) []limiter {
	var out []limiter
	for _, lm := range lms {
		if lm.same != "" || lm.stateless {
			out = append(out, lm)
		}
	}
	return out
}

// roundRatios returns, round by round, a's checks/s in scenario sc divided
// by b's in the same round; nil when either was not measured.
func roundRatios(res map[string]map[string][]runResult, a, b, sc string) []float64 {
	ra, rb := res[a][sc], res[b][sc]
	n := min(len(ra), len(rb))
	if n == 0 {
		return nil
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = ra[i].rate() / max(rb[i].rate(), 1)
	}
	return out
}

// pair is a redlimit algorithm and the peer that runs the same algorithm.
type pair struct{ ours, peer limiter }

// samePairs returns the baseline of lms and its same-algorithm pairs.
func samePairs(lms []limiter) (*limiter, []pair) {
	var base *limiter
	for i := range lms {
		if lms[i].stateless {
			base = &lms[i]
		}
	}
	var pairs []pair
	for _, o := range lms {
		if o.same == "" || o.peer {
			continue
		}
		for _, p := range lms {
			if p.peer && p.same == o.same {
				pairs = append(pairs, pair{o, p})
			}
		}
	}
	return base, pairs
}

// rows returns the rows of the same-algorithm tables in order: the
// baseline, then each pair's redlimit row and its peer.
func rows(base *limiter, pairs []pair) []limiter {
	out := []limiter{*base}
	for _, p := range pairs {
		out = append(out, p.ours, p.peer)
	}
	return out
}

// label is the first cell of a pair's ratio row.
func (p pair) label() string {
	return fmt.Sprintf("| **%s ÷ %s** (%s) |", shortName(p.ours), shortName(p.peer), p.ours.same)
}

// reportSame prints the table "Same algorithm, side by side": every row of
// a same-algorithm pair and the baseline, each cell its median checks/s and
// the median of its round-by-round ratios to the baseline of the same
// round, then per pair the ratio redlimit ÷ peer of each round and the
// lowest, and the pairs' Redis memory per key and allocations per check.
// It prints nothing unless the baseline and a whole pair ran.
func reportSame(w io.Writer, lms []limiter, res map[string]map[string][]runResult, once map[string]single) {
	base, pairs := samePairs(lms)
	if base == nil || len(pairs) == 0 {
		return
	}
	fmt.Fprintf(w, "**Same algorithm, side by side (checks/s; × = ratio to the bare EVALSHA of the same round, median of the rounds).** Each pair below: redlimit ÷ the peer running the same algorithm, round by round (the lowest in bold).\n\n")
	fmt.Fprint(w, "| contender |")
	for _, sc := range scenarios {
		if sc.name != scAbuse {
			fmt.Fprintf(w, " %s |", sc.name)
		}
	}
	fmt.Fprint(w, " MEMORY USAGE, B/key | used_memory, B/key | allocs/check | B/check |\n|---|")
	for _, sc := range scenarios {
		if sc.name != scAbuse {
			fmt.Fprint(w, "---:|")
		}
	}
	fmt.Fprintln(w, "---:|---:|---:|---:|")
	row := func(lm limiter) {
		fmt.Fprintf(w, "| %s |", lm.name)
		for _, sc := range scenarios {
			if sc.name == scAbuse {
				continue
			}
			rs := res[lm.id][sc.name]
			if len(rs) == 0 {
				fmt.Fprint(w, " — |")
				continue
			}
			rates := make([]float64, len(rs))
			for i, r := range rs {
				rates[i] = r.rate()
			}
			fmt.Fprintf(w, " %s (%.2f) |", number(median(rates), 0), median(roundRatios(res, lm.id, base.id, sc.name)))
		}
		s := once[lm.id]
		if lm.stateless {
			fmt.Fprint(w, " — | — |")
		} else {
			fmt.Fprintf(w, " %d | %s |", s.mem.sampleSize, number(s.mem.perKey, 0))
		}
		fmt.Fprintf(w, " %.1f | %s |\n", s.allocs, number(s.bytes, 0))
	}
	for _, lm := range rows(base, pairs) {
		row(lm)
	}
	for _, p := range pairs {
		fmt.Fprint(w, p.label())
		for _, sc := range scenarios {
			if sc.name == scAbuse {
				continue
			}
			fmt.Fprintf(w, " %s |", ratioCell(roundRatios(res, p.ours.id, p.peer.id, sc.name)))
		}
		o, q := once[p.ours.id], once[p.peer.id]
		fmt.Fprintf(w, " %.2f | %.2f | %.2f | %.2f |\n",
			float64(o.mem.sampleSize)/float64(max(q.mem.sampleSize, 1)), o.mem.perKey/max(q.mem.perKey, 1),
			o.allocs/max(q.allocs, 1), o.bytes/max(q.bytes, 1))
	}
	fmt.Fprintln(w)
	reportOneCaller(w, base, pairs, res)
}

// reportOneCaller prints, for the c=1 scenarios, where one check's time
// goes for the baseline and each pair: its wall time, this process's CPU
// (limiter, go-redis, the Go runtime's waits for the reply), redis-server's
// CPU and the commandstats µs of what was sent, each per check and the
// median of the rounds. At one caller a check is one round trip, so the
// rows show which side a difference in throughput comes from.
func reportOneCaller(w io.Writer, base *limiter, pairs []pair, res map[string]map[string][]runResult) {
	one := []string{scHot1, scKeys1}
	fmt.Fprint(w, "**One caller: where a check's time goes (µs per check, median of the rounds).** Wall: the caller's time per check. Client CPU: this process's user+sys CPU. Redis CPU: redis-server's used_cpu_user+sys. Command: commandstats usec of the commands sent.\n\n| contender |")
	for _, sc := range one {
		fmt.Fprintf(w, " %[1]s: wall | client CPU | Redis CPU | command |", sc)
	}
	fmt.Fprint(w, "\n|---|")
	fmt.Fprint(w, strings.Repeat("---:|", 4*len(one)))
	fmt.Fprintln(w)
	row := func(lm limiter) {
		fmt.Fprintf(w, "| %s |", lm.name)
		for _, sc := range one {
			rs := res[lm.id][sc]
			if len(rs) == 0 {
				fmt.Fprint(w, strings.Repeat(" — |", 4))
				continue
			}
			per := func(f func(runResult) float64) string {
				xs := make([]float64, len(rs))
				for i, r := range rs {
					xs[i] = f(r)
				}
				return fmt.Sprintf("%.2f", median(xs))
			}
			fmt.Fprintf(w, " %s | %s | %s | %s |",
				per(func(r runResult) float64 { return r.perCheck(r.elapsed.Seconds() * 1e6) }),
				per(func(r runResult) float64 { return r.perCheck(r.clientCPU * 1e6) }),
				per(func(r runResult) float64 { return r.perCheck(r.cpu * 1e6) }),
				per(func(r runResult) float64 { return r.perCheck(r.srvUsec) }))
		}
		fmt.Fprintln(w)
	}
	for _, lm := range rows(base, pairs) {
		row(lm)
	}
	fmt.Fprintln(w)
}

// ratioCell shows ratios round by round, the lowest in bold.
func ratioCell(rs []float64) string {
	if len(rs) == 0 {
		return "—"
	}
	lo := 0
	for i, r := range rs {
		if r < rs[lo] {
			lo = i
		}
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
		if i == lo {
			parts[i] = "**" + parts[i] + "**"
		}
	}
	return strings.Join(parts, " / ")
}

// shortName is a row's name up to its first space after the library:
// "redlimit fixed_window", "ulule/limiter".
func shortName(lm limiter) string {
	f := strings.Fields(lm.name)
	if len(f) > 3 && f[0] == "redlimit" && f[2] == "on" {
		return strings.Join(f[:4], " ") // "redlimit gcra on rueidis"
	}
	if len(f) > 1 && f[0] == "redlimit" {
		return f[0] + " " + f[1]
	}
	return f[0]
}
