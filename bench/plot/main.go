// Plot draws docs/algorithms.svg: the five redlimit algorithms enforcing the
// same limit, 10 requests per second, on the same traffic, one lane each.
//
// The traffic is a steady client at 8 requests per second, under the limit,
// plus a burst that straddles a window boundary: 10 requests in the 50 ms
// before t = 2 s and 10 in the 50 ms after. The picture shows what each
// algorithm makes of it:
//
//   - fixed_window counts per window aligned to the epoch, so it lets a full
//     window's worth through on each side of the boundary: 2× the limit
//     within a second.
//   - sliding_log is exact: never more than 10 in any 1 s interval.
//   - sliding_window (the sliding window counter) weights the previous
//     window's count and so damps the boundary burst, approximately.
//   - token_bucket and gcra let a full bucket (10) through at once, then the
//     refill rate. Their lanes are identical: GCRA is a token bucket that
//     stores one value instead of two.
//
// Each request is a mark, a filled circle when allowed and a cross when
// denied; requests within the same 50 ms are stacked, earliest at the bottom.
// Every lane is labelled with its counts and the most requests it allowed in
// any 1 s interval.
//
// The algorithms run on the in-memory backend, which computes exactly what
// the Redis backend computes, with an injected clock: the program is
// deterministic, never sleeps and needs no server. It also prints a summary
// table on standard error.
//
// Usage, from the repository root:
//
//	go run ./bench/plot            # writes docs/algorithms.svg
//	go run ./bench/plot -o -       # writes the SVG to standard output
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// limit is what every lane enforces. Burst is left at zero, which for
// token_bucket and gcra means a bucket of Rate.
var limit = algorithms.PerSecond(10)

func main() {
	out := flag.String("o", "docs/algorithms.svg", "write the SVG to this file (- for standard output)")
	flag.Parse()
	if err := run(*out, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

// run simulates every algorithm, writes the SVG to the file out (or to
// stdout when out is "-") and the summary to stderr.
func run(out string, stdout, stderr io.Writer) error {
	reqs := traffic()
	lanes, err := simulateAll(limit, reqs)
	if err != nil {
		return err
	}
	svg := render(limit, reqs, lanes)
	if out == "-" {
		_, err = stdout.Write(svg)
	} else {
		err = os.WriteFile(out, svg, 0o644)
	}
	if err != nil {
		return err
	}
	return summarize(stderr, limit, reqs, lanes)
}

// summarize prints one line per lane: allowed, denied, and the most allowed
// in any interval of one Period.
func summarize(w io.Writer, l algorithms.Limit, reqs []time.Duration, lanes []lane) error {
	fmt.Fprintf(w, "%d requests over %s, limit %d per %s\n", len(reqs), human(span), l.Rate, human(l.Period))
	fmt.Fprintf(w, "%-15s %7s %6s  %s\n", "algorithm", "allowed", "denied", "max allowed in any "+human(l.Period))
	for _, ln := range lanes {
		s := ln.stats(l.Period)
		if _, err := fmt.Fprintf(w, "%-15s %7d %6d  %d\n", ln.alg, s.allowed, s.denied, s.maxPerPeriod); err != nil {
			return err
		}
	}
	return nil
}
