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

// roleKinds kill, stop or promote nodes: a schedule holds one of them at a
// time (a world refuses a second with world.ErrBusy: two could leave it
// without a master to heal back to). The others (proxy faults, SCRIPT
// FLUSH, CLIENT KILL, maxmemory, an instance crash) overlap with anything.
var roleKinds = map[string]bool{
	world.Kill: true, world.KillAOF: true, world.Pause: true, world.Failover: true, world.KillMaster: true,
	world.Migrate: true, world.ClockBehind: true, world.ClockAhead: true,
}

// conflict reports whether faults of kinds a and b may not be in place at
// once.
func conflict(a, b string) bool { return a == b || roleKinds[a] && roleKinds[b] }

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
// world.InstanceCrash), never more than MaxOverlap at once nor two of one
// kind, none in the first 5% of the run nor in its last quarter (at least
// 2 s). A first pass visits every kind once, in a seeded order, at evenly
// spaced instants (jittered) with durations that let the pass end before
// the faults stop: a run of a few seconds per kind exercises each. The
// rest of the fault phase draws kinds at random instants (exponential
// gaps), alone and overlapping, each healed after 150 ms to 1.5 s.
func NewSchedule(seed uint64, kinds []string, duration time.Duration) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	tail := max(duration/4, 2*time.Second)
	s := Schedule{Seed: seed, Duration: duration, Quiet: max(duration-tail, 0)}
	kinds = slices.Clone(kinds)
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	start := duration / 20
	if len(kinds) == 0 || s.Quiet <= start {
		return s
	}
	phase := s.Quiet - start
	const minFor, maxFor = 150 * time.Millisecond, 1500 * time.Millisecond
	add := func(kind string, at, d time.Duration) bool {
		// At most MaxOverlap at once: wait for the earliest to heal; never
		// two that conflict.
		for {
			var active []Fault
			for _, f := range s.Faults {
				if f.At+f.For > at {
					active = append(active, f)
				}
			}
			if slices.ContainsFunc(active, func(f Fault) bool { return conflict(f.Kind, kind) }) || len(active) >= MaxOverlap {
				next := time.Duration(1<<62 - 1)
				for _, f := range active {
					next = min(next, f.At+f.For)
				}
				at = next
				continue
			}
			break
		}
		if at+minFor > s.Quiet {
			return false
		}
		s.Faults = append(s.Faults, Fault{Seq: len(s.Faults), Kind: kind, At: at, For: min(d, s.Quiet-at)})
		return true
	}

	// First pass: every kind once.
	order := slices.Clone(kinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	slot := min(phase/time.Duration(len(order)+1), maxFor)
	hi := max(min(maxFor, slot*9/5), minFor+1)
	t := start
	for i, kind := range order {
		at := start + time.Duration(i)*slot + time.Duration(rng.Int64N(int64(slot/5)+1))
		d := minFor + time.Duration(rng.Int64N(int64(hi-minFor)))
		if !add(kind, at, d) {
			break
		}
		t = at
	}
	// Then at random.
	meanGap := max(slot, 300*time.Millisecond)
	for {
		t += time.Duration(rng.ExpFloat64() * float64(meanGap))
		if t+minFor > s.Quiet {
			break
		}
		d := minFor + time.Duration(rng.Int64N(int64(maxFor-minFor)))
		if !add(kinds[rng.IntN(len(kinds))], t, d) {
			break
		}
		t = s.Faults[len(s.Faults)-1].At
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
