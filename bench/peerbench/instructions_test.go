package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTotalIr: the count is the summary line's (callgrind's dumps name it
// summary; older ones totals), and a dump without one is an error.
func TestTotalIr(t *testing.T) {
	t.Parallel()
	dump := "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) main\n0 5\nsummary: 822072573\ntotals: 1\n"
	if n, err := totalIr(strings.NewReader(dump)); err != nil || n != 822072573 {
		t.Errorf("totalIr = %d, %v, want 822072573", n, err)
	}
	if n, err := totalIr(strings.NewReader("events: Ir\ntotals: 42\n")); err != nil || n != 42 {
		t.Errorf("totalIr of an older dump = %d, %v, want 42", n, err)
	}
	if _, err := totalIr(strings.NewReader("events: Ir\nfn=(1) main\n")); err == nil {
		t.Error("totalIr of a dump without a summary: no error")
	}
}

// TestReportInstructions: a row per contender, baseline first, and each
// pair's ratio redlimit ÷ peer per scenario, the limits off the whole-unit
// paths included.
func TestReportInstructions(t *testing.T) {
	t.Parallel()
	instr := map[string]map[string]float64{
		"baseline":   {"hot key": 13000, "warm keys": 14000, "new keys": 15000},
		"fw":         {"hot key": 32000, "warm keys": 33000, "new keys": 40000},
		"ulule":      {"hot key": 40000, "warm keys": 30000, "new keys": 32000},
		"gcra":       {"hot key": 66000, "warm keys": 70000, "new keys": 60000, "hot key, 10⁹/h": 72000},
		"redis_rate": {"hot key": 72000, "warm keys": 70000, "new keys": 80000, "hot key, 10⁹/h": 80000},
	}
	var b bytes.Buffer
	lms := sameAlgorithm(limiters())
	reportInstructions(&b, lms, instr, 3000)
	out := b.String()
	for _, want := range []string{
		"| baseline: EVALSHA `return 1` | 13,000 | 14,000 | 15,000 |",
		"| redlimit fixed_window | 32,000 | 33,000 | 40,000 |",
		"| **redlimit fixed_window ÷ ulule/limiter** (fixed window) | 0.800 | 1.100 | 1.250 |",
		"| **redlimit gcra ÷ go-redis/redis_rate** (GCRA) | 0.917 | 1.000 | 0.750 | 0.900 |",
		"| redlimit gcra | 66,000 | 70,000 | 60,000 | 72,000 | error | error | error |",
		"| contender | hot key | warm keys | new keys | hot key, 10⁹/h | hot key, 3/s | warm keys, 7/min | hot key, 10⁶/1.0005s |",
		"3000 checks per cell",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "baseline") > strings.Index(out, "redlimit gcra |") {
		t.Errorf("the baseline is not the first row:\n%s", out)
	}
}
