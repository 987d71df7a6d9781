package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestSameAlgorithm: -same keeps the pairs (redlimit on go-redis and on
// rueidis) and the baseline, the reference row first.
func TestSameAlgorithm(t *testing.T) {
	t.Parallel()
	var ids []string
	for _, lm := range sameAlgorithm(limiters()) {
		ids = append(ids, lm.id)
	}
	if got, want := strings.Join(ids, " "), "gcra redis_rate ulule baseline fw fw-rueidis gcra-rueidis"; got != want {
		t.Errorf("sameAlgorithm(limiters()) = %s, want %s", got, want)
	}
}

// TestControlRow: the control pairs with ulule/limiter, as the fixed
// window does, and -same keeps it.
func TestControlRow(t *testing.T) {
	t.Parallel()
	lms := sameAlgorithm(append(limiters(), controlRow()))
	_, pairs := samePairs(lms)
	var got []string
	for _, p := range pairs {
		got = append(got, shortName(p.ours)+" ÷ "+shortName(p.peer))
	}
	if want := "redlimit gcra ÷ go-redis/redis_rate, redlimit fixed_window ÷ ulule/limiter, redlimit fixed_window on rueidis ÷ ulule/limiter, redlimit gcra on rueidis ÷ go-redis/redis_rate, control ÷ ulule/limiter"; strings.Join(got, ", ") != want {
		t.Errorf("pairs = %s, want %s", strings.Join(got, ", "), want)
	}
}

// TestReportSame: cells are ratios to the baseline of the same round, a
// pair's ratios are round by round with the lowest in bold.
func TestReportSame(t *testing.T) {
	t.Parallel()
	rr := func(checks ...int64) []runResult {
		out := make([]runResult, len(checks))
		for i, c := range checks {
			out[i] = runResult{calls: c, elapsed: time.Second, clientCPU: float64(c) * 40e-6, cpu: float64(c) * 30e-6, srvUsec: float64(c) * 3}
		}
		return out
	}
	res := map[string]map[string][]runResult{
		"baseline": {scHot1: rr(100, 200, 100)},
		"fw":       {scHot1: rr(90, 220, 120)},
		"ulule":    {scHot1: rr(100, 200, 100)},
		"gcra":     {scHot1: rr(50, 100, 50)},
	}
	once := map[string]single{
		"fw":    {allocs: 8, mem: memory{sampleSize: 80}},
		"ulule": {allocs: 16, mem: memory{sampleSize: 120}},
	}
	var b bytes.Buffer
	reportSame(&b, sameAlgorithm(limiters()), res, once)
	out := b.String()
	for _, want := range []string{
		"| redlimit fixed_window | 120 (1.10) |",
		"| **redlimit fixed_window ÷ ulule/limiter** (fixed window) | **0.90** / 1.10 / 1.20 |",
		"| 0.67 |", // MEMORY USAGE 80 / 120
		"| redlimit gcra | 50 (0.50) |",
		// one caller: µs per check, the median of the rounds
		"| redlimit fixed_window | 8333.33 | 40.00 | 30.00 | 3.00 | — | — | — | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("reportSame: no %q in\n%s", want, out)
		}
	}
}
