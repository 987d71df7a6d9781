package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
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
// supports, fixed seeds covering every fault kind, 0 violations. The runs
// go side by side (each starts its own world): most of their time is
// spent waiting for failovers and restarts, not computing. With
// REDLIMIT_CHAOS_HISTORY=prefix set, each run's history is written to
// prefix-<run>-<seed>.jsonl.
func TestShort(t *testing.T) {
	requireRedis(t)
	// The runs share this process: its goroutines are counted once they
	// have all ended.
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() {
		n := runtime.NumGoroutine()
		for i := 0; i < 100 && n > baseline+10; i++ {
			time.Sleep(100 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > baseline+10 {
			t.Errorf("%d goroutines after the short mode, %d before (slack 10)", n, baseline)
		}
	})
	for _, o := range ShortPlan("") {
		o.Shared = true
		if raceEnabled && o.Topology == world.Cluster {
			// Slot migrations (ASK redirections) under redisstore's
			// pipelining make go-redis v9.23's ClusterClient write one
			// command's error from two goroutines (pipelineReadCmds): the
			// race detector fails the test on the library's race. The
			// short mode without -race (cmd/chaos -short) and the long
			// mode keep migrations.
			o.Kinds = slices.DeleteFunc(kindsWithCrash(clusterKinds), func(k string) bool { return k == world.Migrate })
		}
		name := o.Topology
		if o.Processes {
			name += "-processes"
		}
		if p := os.Getenv("REDLIMIT_CHAOS_HISTORY"); p != "" {
			// keep each run's history (chaos -check reads it again)
			o.HistoryFile = fmt.Sprintf("%s-%s-%d.jsonl", p, name, o.Seed)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			start := time.Now()
			tot := Execute(context.Background(), []Options{o}, &out, testing.Verbose())
			t.Logf("%s%s (%v)", out.String(), tot.Line(), time.Since(start).Round(time.Millisecond))
			if tot.Violations != 0 || tot.Runs != 1 {
				t.Fatalf("%d runs, %d violations, want 1 run and none", tot.Runs, tot.Violations)
			}
			if u := tot.Uncovered(); len(u) != 0 && !o.Processes {
				t.Fatalf("fault kinds never injected: %v", u)
			}
		})
	}
}

// The mutation modes break a promise: the checker must see it.
func TestMutationOveradmitCaught(t *testing.T) {
	testMutation(t, Options{Topology: world.Single, Mutate: MutateOveradmit}, VOverAdmission)
}
func TestMutationLockoutCaught(t *testing.T) {
	testMutation(t, Options{Topology: world.Single, Mutate: MutateLockout}, VLockout)
}

// TestMutationNoRefundCaught: refunds (Settle) that report success and
// give nothing back are refund-lost violations.
func TestMutationNoRefundCaught(t *testing.T) {
	testMutation(t, Options{Topology: world.Single, Mutate: MutateNoRefund, Timeout: mutationTimeout}, VRefundLost)
}

// TestMutationNoCompensateCaught: on a cluster, compensations of calls
// spanning slots that run, reply without error and give nothing back
// (dispatch.lua's refund mode pointed at a commit marker that does not
// exist) are refund-lost violations.
func TestMutationNoCompensateCaught(t *testing.T) {
	testMutation(t, Options{Topology: world.Cluster, Mutate: MutateNoCompensate, Timeout: mutationTimeout}, VRefundLost)
}

// mutationTimeout is the engines' Timeout in the mutation runs that look
// for refund-lost: a loaded machine (make test beside other packages)
// would otherwise send most calls past a 50 ms Timeout to the fallback,
// and leave no compensation for the checker to read.
const mutationTimeout = 500 * time.Millisecond

// testMutation runs o (its topology and mutation; seed 3, 5 s) and fails
// unless the checker reports a violation of kind want.
func testMutation(t *testing.T, o Options, want string) {
	t.Parallel() // with each other, after TestShort
	requireRedis(t)
	// Light faults only: the broken backend must be the primary that
	// decides, most of the time.
	o.Seed, o.Duration, o.Short = 3, 5*time.Second, true
	o.Kinds = []string{world.ScriptFlush, world.ClientKill, world.InstanceCrash}
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

// clusterKinds are the kinds a cluster world offers, as of this writing.
var clusterKinds = []string{world.Kill, world.KillAOF, world.Pause, world.ScriptFlush, world.ClientKill, world.MaxMemory,
	world.Latency, world.Slow, world.Stall, world.Drop, world.Reset, world.Failover, world.KillMaster, world.Migrate, world.ClockBehind, world.ClockAhead}
