package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/chaos/world"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if IsWorker() {
		if err := Worker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireRedis(t *testing.T) {
	t.Helper()
	if redistest.Binary() != "" {
		return
	}
	if redistest.InCI() {
		t.Fatal("CI=true but redis-server is not installed")
	}
	t.Skip("redis-server not installed")
}

func logRun(t *testing.T, r *RunResult) {
	t.Helper()
	s := r.Summary
	t.Logf("%s: %d decisions %v, %d faults %v, %d violations, L=%d, capacity lost %v, max latency %v",
		r.Options.Replay(), s.Decisions, s.Outcomes, s.Faults, s.FaultKinds, len(s.Violations), s.LostUnits, s.CapacityLost, s.MaxLatency)
	for i, v := range s.Violations {
		if i == 5 {
			t.Logf("... %d more", len(s.Violations)-5)
			break
		}
		t.Logf("%s", v)
	}
}

// TestShort is the short mode `make test` runs: every topology this build
// supports, fixed seeds covering every fault kind, 0 violations.
func TestShort(t *testing.T) {
	requireRedis(t)
	var out strings.Builder
	start := time.Now()
	tot := Execute(context.Background(), ShortPlan(""), &out, testing.Verbose())
	t.Logf("%s%s (%v)", out.String(), tot.Line(), time.Since(start).Round(time.Millisecond))
	if tot.Violations != 0 || tot.Runs != len(ShortPlan("")) {
		t.Fatalf("%d runs, %d violations, want %d runs and none", tot.Runs, tot.Violations, len(ShortPlan("")))
	}
	if u := tot.Uncovered(); len(u) != 0 {
		t.Fatalf("fault kinds never injected: %v", u)
	}
}

// The mutation modes break a promise: the checker must see it.
func TestMutationOveradmitCaught(t *testing.T) { testMutation(t, MutateOveradmit, VOverAdmission) }
func TestMutationLockoutCaught(t *testing.T)   { testMutation(t, MutateLockout, VLockout) }

func testMutation(t *testing.T, mode, want string) {
	t.Parallel() // with each other, after TestShort
	requireRedis(t)
	// Light faults only: the broken backend must be the primary that
	// decides, most of the time.
	o := Options{Topology: "single", Seed: 3, Duration: 5 * time.Second, Short: true, Mutate: mode,
		Kinds: []string{world.ScriptFlush, world.ClientKill, world.InstanceCrash}}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	logRun(t, r)
	// The instance that replaced the crashed one ran the workload.
	respawned := 0
	for _, rec := range r.History.Records() {
		if rec.Kind == KindDecision && rec.Op != "probe" && rec.Inst >= 3 {
			respawned++
		}
	}
	if r.Summary.FaultKinds[world.InstanceCrash] > 0 && respawned == 0 {
		t.Errorf("no decision by an instance started after a crash")
	}
	for _, v := range r.Summary.Violations {
		if v.Kind == want {
			return
		}
	}
	t.Fatalf("%s: no %s violation among %d", o.Replay(), want, len(r.Summary.Violations))
}

// quiet drops go-redis's log lines: dial failures while a node is down are
// the point of the exercise.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// panicky is a world whose Inject panics.
type panicky struct{ world.World }

func (panicky) Inject(context.Context, string, *rand.Rand) (world.Event, func(context.Context) error, error) {
	panic("boom")
}

func TestInjectPanicIsAnError(t *testing.T) {
	t.Parallel()
	_, heal, err := inject(context.Background(), panicky{}, world.Kill, rand.New(rand.NewPCG(1, 2)))
	if err == nil || !strings.Contains(err.Error(), "boom") || heal != nil {
		t.Fatalf("inject = %v, heal %v; want the panic as an error and no heal", err, heal != nil)
	}
}
