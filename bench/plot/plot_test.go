package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// simulated runs the demo traffic and returns each algorithm's lane.
func simulated(t *testing.T) map[algorithms.Algorithm]lane {
	t.Helper()
	lanes, err := simulateAll(limit, traffic())
	if err != nil {
		t.Fatalf("simulateAll(%v, traffic()) error: %v", limit, err)
	}
	byAlg := make(map[algorithms.Algorithm]lane)
	for _, ln := range lanes {
		byAlg[ln.alg] = ln
	}
	if len(byAlg) != len(algorithms.Algorithms) {
		t.Fatalf("simulateAll returned lanes for %d algorithms, want %d", len(byAlg), len(algorithms.Algorithms))
	}
	return byAlg
}

// TestPictureFacts checks what the picture claims about each algorithm.
func TestPictureFacts(t *testing.T) {
	t.Parallel()
	lanes := simulated(t)
	maxOf := func(a algorithms.Algorithm) int { return lanes[a].stats(limit.Period).maxPerPeriod }

	fixed, log, sliding := maxOf(algorithms.FixedWindow), maxOf(algorithms.SlidingLog), maxOf(algorithms.SlidingWindow)
	if fixed <= int(limit.Rate) {
		t.Errorf("fixed_window: max allowed in any %v = %d, want above the limit %d (the boundary burst)", limit.Period, fixed, limit.Rate)
	}
	if log != int(limit.Rate) {
		t.Errorf("sliding_log: max allowed in any %v = %d, want exactly %d", limit.Period, log, limit.Rate)
	}
	if sliding >= fixed {
		t.Errorf("sliding_window: max allowed in any %v = %d, want below fixed_window's %d", limit.Period, sliding, fixed)
	}
	tb, gcra := lanes[algorithms.TokenBucket].allowed, lanes[algorithms.GCRA].allowed
	if !slices.Equal(tb, gcra) {
		t.Errorf("token_bucket and gcra allowed different requests:\ntoken_bucket %v\ngcra         %v", tb, gcra)
	}
	for _, alg := range algorithms.Algorithms {
		if s := lanes[alg].stats(limit.Period); s.allowed == 0 || s.denied == 0 {
			t.Errorf("%v: allowed %d, denied %d; want some of each", alg, s.allowed, s.denied)
		}
	}
}

func TestMaxInWindow(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name  string
		times []time.Duration
		want  int
	}{
		{"empty", nil, 0},
		{"one", ms(500), 1},
		{"a period apart is two intervals", ms(0, 1000), 1},
		{"just under a period apart", ms(0, 999), 2},
		{"best interval in the middle", ms(0, 900, 950, 1100, 1800, 2000), 4},
		{"same instant", ms(10, 10, 10), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxInWindow(tt.times, time.Second); got != tt.want {
				t.Errorf("maxInWindow(%v, 1s) = %d, want %d", tt.times, got, tt.want)
			}
		})
	}
}

// TestSVG checks that the document is well-formed XML and labels every lane.
func TestSVG(t *testing.T) {
	t.Parallel()
	reqs := traffic()
	lanes, err := simulateAll(limit, reqs)
	if err != nil {
		t.Fatal(err)
	}
	svg := render(limit, reqs, lanes)

	var texts []string
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("render: invalid XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			texts = append(texts, strings.TrimSpace(string(cd)))
		}
	}
	for _, alg := range algorithms.Algorithms {
		if !slices.Contains(texts, alg.String()) {
			t.Errorf("render: no lane label %q", alg)
		}
	}
}

// TestRun writes the SVG to a file and the summary to stderr, as main does.
func TestRun(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "algorithms.svg")
	var stdout, stderr bytes.Buffer
	if err := run(out, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) error: %v", out, err)
	}
	if stdout.Len() != 0 {
		t.Errorf("run(%q) wrote %d bytes to stdout, want none", out, stdout.Len())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<?xml")) {
		t.Errorf("run(%q) wrote %.20q..., want an XML document", out, svg)
	}
	for _, alg := range algorithms.Algorithms {
		if !strings.Contains(stderr.String(), alg.String()) {
			t.Errorf("run(%q) summary has no line for %v:\n%s", out, alg, stderr.String())
		}
	}

	stdout.Reset()
	if err := run("-", &stdout, io.Discard); err != nil {
		t.Fatalf(`run("-") error: %v`, err)
	}
	if !bytes.Equal(stdout.Bytes(), svg) {
		t.Errorf(`run("-") wrote a different SVG to stdout than run(%q) to its file`, out)
	}
}

// TestCommittedSVG fails when docs/algorithms.svg is not what the program
// draws today, for example after a change to an algorithm.
func TestCommittedSVG(t *testing.T) {
	t.Parallel()
	committed, err := os.ReadFile("../../docs/algorithms.svg")
	if err != nil {
		t.Fatal(err)
	}
	reqs := traffic()
	lanes, err := simulateAll(limit, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(render(limit, reqs, lanes), committed) {
		t.Error("docs/algorithms.svg is out of date: run `go run ./bench/plot` from the repository root")
	}
}
