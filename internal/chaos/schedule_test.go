package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

var allKinds = []string{world.Kill, world.KillAOF, world.Pause, world.Failover, world.KillMaster, world.Migrate,
	world.ScriptFlush, world.ClientKill, world.MaxMemory, world.Latency, world.Stall, world.Drop, world.Reset,
	world.ClockBehind, world.ClockAhead, world.InstanceCrash}

func TestScheduleSameSeedSameSchedule(t *testing.T) {
	t.Parallel()
	a := NewSchedule(42, allKinds, 60*time.Second)
	// The order the world lists its kinds in does not matter.
	rev := slices.Clone(allKinds)
	slices.Reverse(rev)
	b := NewSchedule(42, rev, 60*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 drew two schedules:\n%s\n%s", a, b)
	}
	if a.String() != b.String() {
		t.Fatal("same schedule, two printings")
	}
	if c := NewSchedule(43, allKinds, 60*time.Second); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatal("seeds 42 and 43 drew the same faults")
	}
}

func TestScheduleBounds(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		d := time.Duration(4+seed%60) * time.Second
		s := NewSchedule(seed, allKinds, d)
		if s.Quiet > d-2*time.Second || s.Quiet < d/2 {
			t.Fatalf("seed %d: quiet from %v in a run of %v", seed, s.Quiet, d)
		}
		for _, f := range s.Faults {
			if f.At < d/20 || f.At+f.For > s.Quiet || f.For <= 0 {
				t.Fatalf("seed %d: fault %+v outside [%v, %v]", seed, f, d/20, s.Quiet)
			}
			// At f's start, at most MaxOverlap faults are in place, f
			// included, and none of its kind.
			n := 0
			for _, g := range s.Faults {
				if g.At <= f.At && f.At < g.At+g.For {
					n++
					if g.Seq != f.Seq && conflict(g.Kind, f.Kind) {
						t.Fatalf("seed %d: %s and %s at once: %+v %+v", seed, f.Kind, g.Kind, f, g)
					}
				}
			}
			if n > MaxOverlap {
				t.Fatalf("seed %d: %d faults at once at %v\n%s", seed, n, f.At, s)
			}
		}
	}
}

func TestScheduleCoversEveryKind(t *testing.T) {
	t.Parallel()
	overlapped := false
	for seed := range uint64(40) {
		d := []time.Duration{10 * time.Second, 60 * time.Second}[seed%2]
		s := NewSchedule(seed, allKinds, d)
		if got := s.Kinds(); !reflect.DeepEqual(got, sortedKinds()) {
			t.Fatalf("seed %d: kinds %v, want every one\n%s", seed, got, s)
		}
		for i, f := range s.Faults {
			if i > 0 && f.At < s.Faults[i-1].At+s.Faults[i-1].For {
				overlapped = true
			}
		}
	}
	if !overlapped {
		t.Fatal("no two faults ever overlap")
	}
}

func sortedKinds() []string {
	k := slices.Clone(allKinds)
	slices.Sort(k)
	return k
}
