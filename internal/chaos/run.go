package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// Options configure one run.
type Options struct {
	Topology string
	Duration time.Duration // the workload's time, faults then quiet; default 8s
	Seed     uint64
	Mutate   string // "", MutateOveradmit or MutateLockout
	// Short is the mode `make test` runs: liveness gets a forgiving slack
	// (see ShortSlack) since a loaded CI machine may delay any call.
	Short bool
	// Processes runs each application instance as a worker process (the
	// binary Exe re-executed, see Worker); otherwise instances are
	// goroutines of this process.
	Processes bool
	Exe       []string // the command that starts a worker; default os.Args[0] -worker

	// Kinds, when set, restricts the faults to these kinds (those the
	// world offers, and world.InstanceCrash).
	Kinds []string

	// Replicas runs the instances' stores in the exact mode
	// (redisstore.Config.Replicas, with a ReplicaTimeout of half the
	// Timeout): a decision counts once that many replicas acknowledged it.
	// 0, the default mode, replicates asynchronously.
	Replicas int

	Instances int           // default 3
	Workers   int           // goroutines per instance; default 3
	Timeout   time.Duration // the engines' Timeout; default 50ms

	// StoreClient, when set, gives the store of each instance run in this
	// process its client: what it returns for the world's go-redis client
	// (another library's client on the same node, through the same
	// dialer, so that the faults reach it; rueidisclient's tests), with a
	// func that closes it. Worker processes stay on go-redis.
	StoreClient func(c redis.UniversalClient) (redis.Scripter, func(), error)

	// StartWorld starts the topology; default world.Start.
	StartWorld func(ctx context.Context, topology string, opts world.Options) (world.World, error)
	// Log receives the schedule and progress; nil discards.
	Log io.Writer
	// HistoryFile, when set, receives the run's history (JSON lines).
	HistoryFile string
	// Shared says other runs share this process: its goroutines are
	// counted by the caller, after them all, not by the run.
	Shared bool
}

// ShortSlack is the liveness slack of the short mode: a call may take
// Timeout + ShortSlack. The long mode uses LongSlack. The short mode runs
// in `make test` beside other packages' tests on a loaded machine, where a
// goroutine may wait that long for a CPU; tests must never fail because
// the machine is slow.
const (
	ShortSlack = 250 * time.Millisecond
	LongSlack  = 20 * time.Millisecond
)

func (o *Options) defaults() {
	if o.Duration == 0 {
		o.Duration = 8 * time.Second
	}
	if o.Instances == 0 {
		o.Instances = 3
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Timeout == 0 {
		o.Timeout = 50 * time.Millisecond
	}
	if o.StartWorld == nil {
		o.StartWorld = world.Start
	}
	switch o.Log.(type) {
	case nil:
		o.Log = io.Discard
	case *lockedWriter:
	default:
		o.Log = &lockedWriter{w: o.Log} // the nemesis's goroutines write at once
	}
}

// lockedWriter serialises the writes of several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// CheckOptions returns the checker's options for a run made with o.
func (o Options) CheckOptions() CheckOptions {
	o.defaults()
	slack := LongSlack
	if o.Short {
		slack = ShortSlack
	}
	return CheckOptions{Timeout: o.Timeout, Slack: slack, Instances: o.Instances}
}

// Replay is the command that replays the run.
func (o Options) Replay() string {
	s := "go run ./cmd/chaos -topology " + o.Topology + " -seed " + strconv.FormatUint(o.Seed, 10) + " -duration " + o.Duration.String()
	if o.Mutate != "" {
		s += " -mutate " + o.Mutate
	}
	if o.Short {
		s += " -short"
	}
	if o.Processes {
		s += " -processes"
	}
	if len(o.Kinds) > 0 {
		s += " -kinds " + strings.Join(o.Kinds, ",")
	}
	if o.Replicas > 0 {
		s += " -replicas " + strconv.Itoa(o.Replicas)
	}
	return s
}

// RunResult is one run: its schedule, history and what the checker found.
type RunResult struct {
	Options  Options
	Schedule Schedule
	Kinds    []string // the fault kinds the world offered, and world.InstanceCrash
	History  *History
	Summary  Summary
}

// Run starts the world, runs the workload under the schedule drawn from
// the seed, probes every key once the faults have stopped, stops
// everything it started, and checks the history.
func Run(ctx context.Context, o Options) (*RunResult, error) {
	o.defaults()
	prefix := "chaos" + strconv.FormatUint(o.Seed, 36)
	w, err := o.StartWorld(ctx, o.Topology, world.Options{PauseFor: 6 * o.Timeout, MigrateKeys: workloadKeys(prefix)})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Healthy(ctx); err != nil {
		return nil, err
	}

	kinds := kindsWithCrash(w.Kinds())
	if len(o.Kinds) > 0 {
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(o.Kinds, k) })
	}
	sched := NewSchedule(o.Seed, kinds, o.Duration)
	fmt.Fprintf(o.Log, "chaos: topology=%s %s", w.Topology(), sched)

	start := time.Now()
	h := NewHistory(start)
	clock := func() int64 { return time.Since(start).Microseconds() }
	sctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watchStalls(sctx, -1, clock, h.Add)
	go watchMasters(sctx, w.Addrs(), clock, h.Add)
	baseline := runtime.NumGoroutine()
	conns := countClients(ctx, w.Addrs())

	fleet := &fleet{ctx: ctx, o: o, w: w, h: h, clock: clock, base: h.Base, prefix: prefix}
	for range o.Instances {
		if err := fleet.spawn(ctx); err != nil {
			fleet.stopAll()
			return nil, err
		}
	}

	runNemesis(ctx, o, w, sched, h, clock, fleet)
	h.Add(Record{Kind: KindPhase, Phase: "quiet", Start: clock(), End: clock()})
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = w.Healthy(hctx)
	cancel()

	// The fault-free tail; then the workload stops, every instance still
	// up, and each probes every key once the keys' deadlines have passed.
	sleepUntil(ctx, start.Add(o.Duration))
	fleet.quiesceAll()
	copts := o.CheckOptions()
	var latest int64
	for _, d := range Deadlines(h.Records(), copts) {
		latest = max(latest, d)
	}
	wait := min(time.Duration(latest-clock())*time.Microsecond, 15*time.Second)
	sleepUntil(ctx, time.Now().Add(wait))
	h.Add(Record{Kind: KindPhase, Phase: "probe", Start: clock(), End: clock()})
	fleet.probeAll(ctx)
	fleet.stopAll()
	stopWatch()

	// Goroutines back to the baseline.
	after := runtime.NumGoroutine()
	for i := 0; i < 50 && after > baseline+2; i++ {
		time.Sleep(100 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if !o.Processes && !o.Shared {
		h.Add(Record{Kind: KindGoroutines, Start: clock(), End: clock(), Before: baseline, After: after})
	}
	connsAfter := countClients(ctx, w.Addrs())
	for i := 0; i < 20 && connsAfter > conns; i++ {
		time.Sleep(100 * time.Millisecond)
		connsAfter = countClients(ctx, w.Addrs())
	}
	h.Add(Record{Kind: KindConns, Start: clock(), End: clock(), Before: conns, After: connsAfter})

	if o.HistoryFile != "" {
		if err := writeHistory(o.HistoryFile, h); err != nil {
			fmt.Fprintf(o.Log, "chaos: %v\n", err)
		}
	}
	res := &RunResult{Options: o, Schedule: sched, History: h, Kinds: kinds}
	res.Summary = Check(h, copts)
	return res, ctx.Err()
}

func sleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t); d > 0 {
		pause(ctx, d)
	}
}

// fleet is the application instances of a run, in process or not.
type fleet struct {
	ctx    context.Context // the run's: instances live as long as it (a heal's context ends with the heal)
	o      Options
	w      world.World
	h      *History
	clock  func() int64
	base   int64
	prefix string

	mu    sync.Mutex
	next  int
	alive []member
}

// member is one live instance: a goroutine-run instance or a worker.
type member interface {
	quiesce()                  // its workload stops, the operations in flight complete
	probe(ctx context.Context) // it decides every key once
	stop()                     // it closes (after quiesce)
	crash()                    // abrupt: slots held, refunds pending
}

func (f *fleet) spawn(ctx context.Context) error {
	f.mu.Lock()
	id := f.next
	f.next++
	f.mu.Unlock()
	cfg := instanceConfig{ID: id, Seed: f.o.Seed, Prefix: f.prefix, Timeout: f.o.Timeout, Workers: f.o.Workers, Mutate: f.o.Mutate, Replicas: f.o.Replicas, Base: f.base, Instances: f.o.Instances}
	var m member
	if f.o.Processes {
		p, err := startWorker(ctx, f.o, f.w, cfg, f.h)
		if errors.Is(err, errNoSpec) {
			// A Sentinel failover client cannot be rebuilt in another
			// process: this instance runs here.
			fmt.Fprintf(f.o.Log, "chaos: instance %d runs in process: %v\n", id, err)
		} else if err != nil {
			return err
		}
		if p != nil {
			m = p
		}
	}
	if m == nil {
		in, err := newInstance(cfg, f.w.NewClient(clientOptions(f.o)), f.o.StoreClient, f.clock, f.h.Add)
		if err != nil {
			return err
		}
		in.start(f.ctx)
		m = in
	}
	f.mu.Lock()
	f.alive = append(f.alive, m)
	f.mu.Unlock()
	return nil
}

func clientOptions(o Options) world.ClientOptions {
	return world.ClientOptions{PoolSize: 2 * o.Workers, ReadTimeout: 2 * o.Timeout, WriteTimeout: 2 * o.Timeout, MaxRetries: -1}
}

// crashOne crashes a live instance drawn with rng, and returns its id and
// whether it was a process killed.
func (f *fleet) crashOne(rng *rand.Rand) (int, bool, error) {
	f.mu.Lock()
	if len(f.alive) == 0 {
		f.mu.Unlock()
		return -1, false, errors.New("no live instance")
	}
	i := rng.IntN(len(f.alive))
	m := f.alive[i]
	f.alive = slices.Delete(f.alive, i, i+1)
	f.mu.Unlock()
	m.crash()
	_, killed := m.(*worker)
	return memberID(m), killed, nil
}

func memberID(m member) int {
	switch x := m.(type) {
	case *instance:
		return x.cfg.ID
	case *worker:
		return x.cfg.ID
	}
	return -1
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	ms := f.alive
	f.alive = nil
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop() }()
	}
	wg.Wait()
}

func (f *fleet) members() []member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alive)
}

func (f *fleet) quiesceAll() {
	var wg sync.WaitGroup
	for _, m := range f.members() {
		wg.Add(1)
		go func() { defer wg.Done(); m.quiesce() }()
	}
	wg.Wait()
}

// probeAll has every instance decide every key once, one after the other.
func (f *fleet) probeAll(ctx context.Context) {
	for _, m := range f.members() {
		m.probe(ctx)
	}
}

// runNemesis injects the schedule's faults at their instants and heals
// each after its duration, recording each as a fault record; it returns
// once every fault has healed.
func runNemesis(ctx context.Context, o Options, w world.World, s Schedule, h *History, clock func() int64, f *fleet) {
	start := time.Now().Add(-time.Duration(clock()) * time.Microsecond)
	// The schedule keeps to MaxOverlap faults at once and one of a kind on
	// paper; a heal that takes longer than planned (a failover, a restart)
	// must not break that: a fault waits for its turn.
	inPlace := make(chan struct{}, MaxOverlap)
	kindLocks := map[string]*sync.Mutex{}
	role := &sync.Mutex{} // the role faults share one lock
	for _, ft := range s.Faults {
		switch {
		case roleKinds[ft.Kind]:
			kindLocks[ft.Kind] = role
		case kindLocks[ft.Kind] == nil:
			kindLocks[ft.Kind] = &sync.Mutex{}
		}
	}
	var wg sync.WaitGroup
	for _, ft := range s.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleepUntil(ctx, start.Add(ft.At))
			if ctx.Err() != nil {
				return
			}
			kindLocks[ft.Kind].Lock()
			defer kindLocks[ft.Kind].Unlock()
			inPlace <- struct{}{}
			defer func() { <-inPlace }()
			rng := rand.New(rand.NewPCG(s.Seed, uint64(1000+ft.Seq)))
			rec := FaultRec{Kind: ft.Kind, Seq: ft.Seq}
			begin := clock()
			var heal func(context.Context) error
			if ft.Kind == world.InstanceCrash {
				id, killed, err := f.crashOne(rng)
				rec.Target, rec.Inst, rec.Killed = fmt.Sprintf("instance %d", id), id, killed
				if err != nil {
					rec.Err = err.Error()
				}
				heal = func(ctx context.Context) error { return f.spawn(ctx) }
			} else {
				ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
				ev, hl, err := inject(ictx, w, ft.Kind, rng)
				cancel()
				rec.Target, rec.Detail, rec.Slots = ev.Target, ev.Detail, ev.Slots
				if err != nil {
					rec.Err = err.Error()
				} else if ev.Err != "" {
					rec.Err = ev.Err
				}
				heal = hl
			}
			fmt.Fprintf(o.Log, "chaos: +%v fault #%d %s %s %s %s\n", time.Duration(begin)*time.Microsecond, ft.Seq, ft.Kind, rec.Target, rec.Detail, rec.Err)
			sleepUntil(context.WithoutCancel(ctx), start.Add(time.Duration(begin)*time.Microsecond+ft.For))
			if heal != nil {
				hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				if err := heal(hctx); err != nil {
					rec.Err += "; heal: " + err.Error()
				}
				cancel()
			}
			h.Add(Record{Kind: KindFault, Start: begin, End: clock(), Fault: &rec})
		}()
	}
	wg.Wait()
}

func writeHistory(name string, h *History) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := h.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countClients returns the normal client connections the data nodes at
// addrs hold, less the one asking.
func countClients(ctx context.Context, addrs []string) int {
	n := 0
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		list, err := c.ClientList(ctx).Result()
		c.Close()
		if err != nil {
			continue
		}
		n += strings.Count(list, "\n") - 1
	}
	return n
}

// inject is w.Inject, with a panic of the world's turned into the fault's
// error (counted and printed, never hidden) rather than the end of the run.
func inject(ctx context.Context, w world.World, kind string, rng *rand.Rand) (ev world.Event, heal func(context.Context) error, err error) {
	defer func() {
		if p := recover(); p != nil {
			ev, heal, err = world.Event{Kind: kind}, nil, fmt.Errorf("chaos: the world panicked injecting %s: %v", kind, p)
		}
	}()
	return w.Inject(ctx, kind, rng)
}

// Promotion is the kind of an observed fault: the set of masters changed
// without the nemesis asking (sentinels or the cluster acting on a pause, a
// stall, a slow machine). Writes may be lost as in a failover.
const Promotion = "promotion"

// watchMasters polls the data nodes' roles every 100 ms until ctx ends and
// records each change of the set of masters that answered as an observed
// fault (FaultRec.Observed): the checker treats it as a failover.
func watchMasters(ctx context.Context, addrs []string, clock func() int64, emit func(Record)) {
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
		defer clients[i].Close()
	}
	var last []string
	lastAt := clock()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var masters []string
		for i, c := range clients {
			v, err := c.Do(ctx, "ROLE").Slice()
			if err == nil && len(v) > 0 && v[0] == "master" {
				masters = append(masters, addrs[i])
			}
		}
		now := clock()
		if len(masters) == 0 {
			continue
		}
		if last != nil && !slices.Equal(last, masters) {
			emit(Record{Kind: KindFault, Start: lastAt, End: now, Fault: &FaultRec{Kind: Promotion, Observed: true,
				Detail: strings.Join(last, ",") + " → " + strings.Join(masters, ",")}})
		}
		last, lastAt = masters, now
	}
}
