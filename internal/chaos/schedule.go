package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// MaxOverlap is how many faults a schedule holds in place at once.
const MaxOverlap = 2

// Fault is one planned fault: Kind injected At (since the run's start),
// healed For later.
type Fault struct {
	Seq  int
	Kind string
	At   time.Duration
	For  time.Duration
}

// Schedule is the nemesis's plan for one run, a pure function of its seed,
// the kinds it draws from and the run's duration (see NewSchedule).
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	// Quiet is when the last fault has healed: the rest of the run is
	// fault-free, for the lockout and liveness checks.
	Quiet  time.Duration
	Faults []Fault
}

// NewSchedule draws a schedule from seed: faults of kinds (the world's and
// world.InstanceCrash), the first len(kinds) of them a seeded permutation of
// every kind so that a run long enough exercises each; at random instants
// (exponential gaps), each healed after a drawn duration, never more than
// MaxOverlap at once nor two of one kind; none in the first 5% of the run
// nor in its last quarter (at least 2 s).
func NewSchedule(seed uint64, kinds []string, duration time.Duration) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	tail := max(duration/4, 2*time.Second)
	s := Schedule{Seed: seed, Duration: duration, Quiet: max(duration-tail, 0)}
	kinds = slices.Clone(kinds)
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	if len(kinds) == 0 || s.Quiet == 0 {
		return s
	}
	order := slices.Clone(kinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	start := duration / 20
	phase := s.Quiet - start
	meanGap := min(1500*time.Millisecond, phase/time.Duration(len(kinds)+1))
	minFor, maxFor := 150*time.Millisecond, min(1500*time.Millisecond, max(phase/4, 300*time.Millisecond))
	t := start
	for i := 0; ; i++ {
		t += time.Duration(rng.ExpFloat64() * float64(meanGap))
		// At most MaxOverlap at once: wait for the earliest to heal.
		var active []Fault
		for _, f := range s.Faults {
			if f.At+f.For > t {
				active = append(active, f)
			}
		}
		if len(active) >= MaxOverlap {
			slices.SortFunc(active, func(a, b Fault) int { return int(a.At + a.For - b.At - b.For) })
			t = active[len(active)-MaxOverlap].At + active[len(active)-MaxOverlap].For
			active = active[len(active)-MaxOverlap+1:]
		}
		if t+minFor > s.Quiet {
			break
		}
		kind := ""
		if i < len(order) {
			kind = order[i]
		} else {
			kind = kinds[rng.IntN(len(kinds))]
		}
		for tries := 0; tries < 8 && slices.ContainsFunc(active, func(f Fault) bool { return f.Kind == kind }); tries++ {
			kind = kinds[rng.IntN(len(kinds))]
		}
		if slices.ContainsFunc(active, func(f Fault) bool { return f.Kind == kind }) {
			continue
		}
		d := minFor + time.Duration(rng.Int64N(int64(maxFor-minFor)+1))
		d = min(d, s.Quiet-t)
		s.Faults = append(s.Faults, Fault{Seq: len(s.Faults), Kind: kind, At: t, For: d})
	}
	return s
}

// Kinds lists the schedule's fault kinds, each once, sorted.
func (s Schedule) Kinds() []string {
	var ks []string
	for _, f := range s.Faults {
		ks = append(ks, f.Kind)
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// String prints the schedule, one fault a line.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule seed=%d duration=%v faults=%d quiet-from=%v\n", s.Seed, s.Duration, len(s.Faults), s.Quiet)
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "  #%-3d +%-8v %-15s for %v\n", f.Seq, f.At.Round(time.Millisecond), f.Kind, f.For.Round(time.Millisecond))
	}
	return b.String()
}

// kindsWithCrash is kinds plus the harness's own fault.
func kindsWithCrash(kinds []string) []string {
	return append(slices.Clone(kinds), world.InstanceCrash)
}
