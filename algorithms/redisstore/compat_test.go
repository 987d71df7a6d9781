package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/hashslot"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestStateAcrossReleases holds the promise of docs/compatibility.md,
// "State across versions": keys written by the previous release's scripts
// are decided exactly by this release's, and the other way round,
// interleaved on one key, for every algorithm, calendar quotas and
// concurrency limits (one subtest each).
//
// The previous release is its scripts, the fixture
// testdata/compat/<version>/scripts, driven by oldStore
// (compat_old_test.go), a client written against that fixture's KEYS and
// ARGV alone. This release is redisstore.Store, through its API, taking
// whichever path it takes (lean, one-check, multi, batch, refund, block,
// release, renew). Each subtest drives keys through sequences of calls
// made alternately by the two, and every Result (allowed, remaining,
// retry-after, reset-after, provisional), every refund's outcome and every
// renewal must equal what the reference model, memstore (the Go twin of
// the Lua arithmetic that the conformance vectors hold to every backend),
// answers for the same sequence on one key of its own.
//
// Each subtest runs, for each of its limits, six sequences on a
// redis-server whose wall clock is the test's (libfaketime): on the
// server's clock (TIME, as production runs: the fixed window's string
// layout, the lean and flat paths; steps of whole ms, so that replies in
// ms are exact) and on an injected clock (ARGV now, the hash layouts;
// steps of µs, and back now and then), each as a rolling deploy (old
// instances write, then both, then new ones), a rollback (new, both, old)
// and a random interleaving. The first two use fixed seeds; the random
// one the run's seed, logged, which REDLIMIT_COMPAT_SEED replays. Then one
// random sequence on a Redis Cluster: calls of one slot with their pending
// markers, calls spanning slots as parts compensated when one denies.
func TestStateAcrossReleases(t *testing.T) {
	redistest.Require(t)
	fx := loadFixture(t)
	preload := faketimePreload(t)
	seed := compatSeed()
	t.Logf("previous release %s (%s); random sequences: seed %d (REDLIMIT_COMPAT_SEED=%d replays them)", fx.version, filepath.Join(compatDir, fx.version), seed, seed)
	cl := startCompatCluster(t)
	for _, f := range compatFeatures() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := startFrozen(t, preload, f.start)
			c := srv.Client(t)
			for i, leg := range compatLegs(f, seed) {
				w := newWorld(t, fx, f, leg, i)
				w.onServer(srv, c)
				w.run()
			}
			if client := cl.wait(t); client != nil {
				w := newWorld(t, fx, f, compatLeg{name: "cluster, random", sched: "random", steps: 100, seed: seed, limit: f.clusterLimit, comp: f.clusterComp}, -1)
				w.onCluster(client)
				w.run()
			}
		})
	}
}

// TestStateAcrossReleasesClockBack is the case of a random sequence
// (gcra, REDLIMIT_COMPAT_SEED=1796678849647752337), played on purpose for
// both buckets: on an injected clock, a key the old side charged, the
// clock past the instant its state is full, then back before it. The old
// side's scripts may give such a key a shorter TTL than this release's
// (the previous release's predate the expiry margin: see ttlLift); read
// after the step back, it must decide as the model's does.
func TestStateAcrossReleasesClockBack(t *testing.T) {
	redistest.Require(t)
	fx := loadFixture(t)
	preload := faketimePreload(t)
	for _, f := range compatFeatures() {
		if f.alg != algorithms.TokenBucket && f.alg != algorithms.GCRA {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			srv := startFrozen(t, preload, f.start)
			c := srv.Client(t)
			for i, reader := range []side{oldSide, newSide} {
				leg := compatLeg{name: "injected clock, clock back, read by the " + reader.String() + " side", limit: f.limits[0], comp: f.comp}
				w := newWorld(t, fx, f, leg, i)
				w.onServer(srv, c)
				k := algorithms.Check{Key: w.k, Algorithm: f.alg, Limit: leg.limit, Cost: 1}
				w.allow(oldSide, "one", k)
				// the model's time to full, read by a check that can never
				// pass (it changes nothing)
				peek, r := k, make([]algorithms.Result, 1)
				peek.Cost = leg.limit.Capacity(f.alg) + 1
				if err := w.model.Allow(w.ctx, []algorithms.Check{peek}, r); err != nil || r[0].ResetAfter == 0 {
					t.Fatalf("the model's peek: %v %v", backendtest.FormatResult(r[0]), err)
				}
				full := r[0].ResetAfter
				// the store's time past the instant the state is full,
				// within the margin; then the clock back before it
				w.set(w.now.Add(full + 100*time.Millisecond))
				w.set(w.now.Add(-600 * time.Millisecond))
				w.step++
				w.allow(reader, "one", k)
				if !w.failed {
					w.step++
					w.allow(reader, "layered", k, algorithms.Check{Key: w.c, Algorithm: f.alg, Limit: leg.comp, Cost: 1})
				}
			}
		})
	}
}

// compatFeature is one subtest: an algorithm (or a calendar quota), the
// limits of its key under test, and the limit of a companion key that
// layered calls check with it.
type compatFeature struct {
	name   string
	alg    algorithms.Algorithm
	limits []algorithms.Limit
	comp   algorithms.Limit
	scale  time.Duration // the clock's steps are fractions of it, and up to 2 of it
	start  time.Time     // the first sequence's start: a whole second
	// calendar: the next window's start, which the clock jumps to the eve of
	boundary func(time.Time) time.Time

	// on the cluster: limits of minutes (and steps scaled alike), whose
	// refund records (a full bucket's time, 2 min at least here) outlive
	// the seconds the sequence takes, since their TTLs run on the nodes'
	// own clocks (see onCluster)
	clusterLimit, clusterComp algorithms.Limit
}

// compatFeatures are the seven subtests.
//
// On the server's clock the steps are whole multiples of 2 ms from an
// even ms, and every marker and refund record lives an odd number of ms,
// so that no step falls on the ms at which one expires: Redis keeps a key
// through that ms, memstore not (see docs/compatibility.md). The bucket
// limits are chosen so (checkOddRecords holds them to it).
func compatFeatures() []compatFeature {
	t0 := backendtest.T0.Add(7 * time.Hour) // a Wednesday, 07:00 UTC
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	day := func(t time.Time) time.Time {
		y, m, d := t.In(berlin).Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, berlin)
	}
	minutes := func(l algorithms.Limit) algorithms.Limit { l.Period *= 60; return l }
	fw, sl := algorithms.Limit{Rate: 5, Period: 10 * time.Second}, algorithms.Limit{Rate: 4, Period: 10 * time.Second}
	sw, tb := algorithms.Limit{Rate: 6, Period: 10 * time.Second}, algorithms.Limit{Rate: 3, Period: 10 * time.Second, Burst: 6}
	gcra, conc := algorithms.Limit{Rate: 5, Period: 10 * time.Second, Burst: 3}, algorithms.InFlight(3, 10*time.Second)
	return []compatFeature{
		{
			name: "fixed_window", alg: algorithms.FixedWindow, scale: 10 * time.Second, start: t0,
			// the second: a period of no whole ms, a hash on the server's clock too
			limits:       []algorithms.Limit{fw, {Rate: 4, Period: 2500500 * time.Microsecond}},
			comp:         algorithms.Limit{Rate: 8, Period: 30 * time.Second},
			clusterLimit: minutes(fw), clusterComp: algorithms.Limit{Rate: 8, Period: 30 * time.Minute},
		},
		{
			name: "sliding_log", alg: algorithms.SlidingLog, scale: 10 * time.Second, start: t0,
			limits: []algorithms.Limit{sl}, comp: algorithms.Limit{Rate: 6, Period: 30 * time.Second},
			clusterLimit: minutes(sl), clusterComp: algorithms.Limit{Rate: 6, Period: 30 * time.Minute},
		},
		{
			name: "sliding_window", alg: algorithms.SlidingWindow, scale: 10 * time.Second, start: t0,
			limits: []algorithms.Limit{sw}, comp: algorithms.Limit{Rate: 10, Period: 20 * time.Second},
			clusterLimit: minutes(sw), clusterComp: algorithms.Limit{Rate: 10, Period: 20 * time.Minute},
		},
		{
			name: "token_bucket", alg: algorithms.TokenBucket, scale: 10 * time.Second, start: t0,
			// refills of 3 units per 10 s (r = 3: fractions of a µs), and of
			// a whole number of µs per unit
			limits:       []algorithms.Limit{tb, {Rate: 4, Period: 2 * time.Second}},
			comp:         algorithms.Limit{Rate: 10, Period: 10 * time.Second},
			clusterLimit: minutes(tb), clusterComp: algorithms.Limit{Rate: 10, Period: 10 * time.Minute},
		},
		{
			name: "gcra", alg: algorithms.GCRA, scale: 10 * time.Second, start: t0,
			// a whole µs emission interval (the lean and flat paths), and
			// one of 10/7 s (TATs with a fraction, "<a>:<b>:<r>/<tau>")
			limits:       []algorithms.Limit{gcra, {Rate: 7, Period: 10 * time.Second, Burst: 3}},
			comp:         algorithms.Limit{Rate: 10, Period: 10 * time.Second, Burst: 2},
			clusterLimit: minutes(gcra), clusterComp: algorithms.Limit{Rate: 10, Period: 10 * time.Minute, Burst: 2},
		},
		{
			name: "calendar", alg: algorithms.FixedWindow, scale: time.Minute,
			// a minute before midnight in Berlin on the last day of a month
			start:    time.Date(2023, time.November, 30, 23, 59, 0, 0, berlin),
			boundary: day,
			limits:   []algorithms.Limit{algorithms.PerDayIn(5, berlin)},
			comp:     algorithms.PerMonthIn(12, berlin),
			// 8 minutes before midnight: the sequence crosses it
			clusterLimit: algorithms.PerDayIn(5, berlin), clusterComp: algorithms.PerWeekIn(12, time.UTC),
		},
		{
			name: "concurrency", alg: algorithms.Concurrency, scale: 10 * time.Second, start: t0,
			limits: []algorithms.Limit{conc}, comp: algorithms.InFlight(2, 6*time.Second),
			clusterLimit: minutes(conc), clusterComp: algorithms.InFlight(2, 6*time.Minute),
		},
	}
}

// compatLeg is one sequence of calls on keys of its own.
type compatLeg struct {
	name   string
	sched  string // "rolling deploy", "rollback" or "random": who calls when
	steps  int
	seed   uint64
	server bool // the server's clock decides; else an injected one
	limit  algorithms.Limit
	comp   algorithms.Limit
}

// compatLegs returns the sequences a subtest runs on its frozen server.
func compatLegs(f compatFeature, seed uint64) []compatLeg {
	var legs []compatLeg
	for v, l := range f.limits {
		for _, server := range []bool{true, false} {
			clock := "injected clock"
			if server {
				clock = "server clock"
			}
			for i, sched := range []string{"rolling deploy", "rollback", "random"} {
				leg := compatLeg{sched: sched, steps: 90, seed: uint64(1 + i + 3*v), server: server, limit: l, comp: f.comp}
				if sched == "random" {
					leg.steps, leg.seed = 120, seed
				}
				leg.name = fmt.Sprintf("%s, %s, limit %v", clock, sched, l)
				legs = append(legs, leg)
			}
		}
	}
	return legs
}

// compatSeed is the seed of the random sequences: REDLIMIT_COMPAT_SEED, or
// the time.
func compatSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("REDLIMIT_COMPAT_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}

// side is who makes a call: an instance of the previous release or of
// this one.
type side int

const (
	oldSide side = iota
	newSide
)

func (s side) String() string { return [...]string{"old", "new"}[s] }

// compatStore is what each side offers: the Backend and its Refunder,
// Leaser and Blocker.
type compatStore interface {
	algorithms.Refunder
	algorithms.Leaser
	algorithms.Blocker
}

// pendingRefund is an allowed refundable call whose refund is still to come,
// from the side that made it.
type pendingRefund struct {
	checks []algorithms.Check
	got    []algorithms.Result // the side's, with its Receipts
	want   []algorithms.Result // the model's, with its own
	slots  int                 // on a cluster: the hash slots it spans
}

// world is one sequence: two sides and the model on keys of their own, and
// a clock.
type world struct {
	t       *testing.T
	ctx     context.Context
	f       compatFeature
	leg     compatLeg
	cluster bool
	srv     *frozenServer // nil on the cluster
	now, hw time.Time     // hw: the latest now, the stores' time for expiry
	start   time.Time     // the sequence's first now
	window  time.Duration // the refund window of refundable calls
	scale   time.Duration // the clock's steps are fractions of it, and up to 2 of it
	old     *oldStore
	cur     *redisstore.Store
	model   *memstore.Store
	k, c, x string // the key under test, its companion (same slot), one in another slot (cluster)
	rng     *rand.Rand
	pending [2][]pendingRefund
	leases  []algorithms.Lease
	log     []string
	failed  bool
	step    int
	tally   map[string]int // what the sequence did, logged at its end
}

func newWorld(t *testing.T, fx *fixture, f compatFeature, leg compatLeg, i int) *world {
	h := fnv.New64a()
	fmt.Fprint(h, f.name, leg.name)
	w := &world{t: t, ctx: context.Background(), f: f, leg: leg, rng: rand.New(rand.NewPCG(leg.seed, h.Sum64())), tally: map[string]int{}}
	// each sequence starts 10 days after the last: the frozen server's
	// clock only moves forward
	w.now = f.start.Add(time.Duration(max(i, 0)) * 240 * time.Hour)
	if !leg.server {
		w.now = w.now.Add(time.Duration(1+w.rng.IntN(999_999)) * time.Microsecond)
	}
	tag := fmt.Sprintf("%s-%d", f.name, i)
	if i < 0 {
		tag = f.name + "-cluster"
	}
	w.k, w.c = "compat:"+tag+":k:{"+tag+"}", "compat:"+tag+":c:{"+tag+"}"
	for x := "x"; ; x += "x" {
		w.x = "compat:" + tag + ":x:{" + tag + x + "}"
		if hashslot.Of(w.x) != hashslot.Of(w.k) {
			break
		}
	}
	model, err := memstore.New(memstore.Config{Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.model = model
	w.old = &oldStore{fx: fx, rng: w.rng, calendar: w.clock}
	w.start = w.now
	w.scale = f.scale
	return w
}

func (w *world) clock() time.Time { return w.now }

// onServer sets w up on the frozen server: the server's clock or an
// injected one, which the server's follows.
func (w *world) onServer(srv *frozenServer, c *redis.Client) {
	w.srv = srv
	w.hw = w.now
	srv.set(w.now)
	var cfg redisstore.Config
	w.old.c = c
	if w.leg.server {
		// an odd number of ms, which no step (whole multiples of 2 ms)
		// falls on: refunds both before and after it
		w.window = (3 * w.f.scale).Truncate(2*time.Millisecond) + time.Millisecond
		checkOddRecords(w.t, w.f.alg, w.leg.limit, w.leg.comp)
	} else {
		cfg.Now = w.clock
		w.old.now = w.clock
		// longer than the sequence: a window closing between two µs
		// steps would meet Redis's ms and memstore's µs apart
		w.window = 1000 * time.Hour
	}
	cur, err := redisstore.New(c, cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	if w.leg.server {
		redisstore.SetCalendarClock(cur, w.clock)
	}
	w.cur = cur
	if !w.leg.server && (w.f.alg == algorithms.TokenBucket || w.f.alg == algorithms.GCRA) {
		w.old.lift = w.measureLift(c)
	}
}

// ttlLift raises the TTLs that the previous release's scripts give the
// bucket keys of a sequence on an injected clock to those this release's
// give them, ms longer, after each script of the old side that wrote one.
//
// On a clock that is not the server's, this release's token bucket and
// GCRA keys live a second past the instant their state is full
// (expiry_margin in lua/prelude.lua, calc.ExpiryMargin; docs/reliability.md,
// "Clocks and expiry"), and so do memstore's, the model: a clock that
// steps back by up to that much finds the state, not an expired key. The
// previous release's scripts may predate the margin (the fixture of
// v0.1.0 does: its TTLs are the time to full, rounded up to the ms).
// Nothing in how either release reads a key depends on its TTL: a state
// past its full instant decides as no state, so the longer life changes
// nothing on a clock that does not step back. On one that does, a key the
// old side wrote expires before the model's, and the next call finds a
// full bucket where the model finds the state: the old release's own
// lifetime for the keys it writes, which this release cannot change, not
// a reading of the other's state. The test compares the state, so it
// gives the old side's keys this release's lifetime, and
// TestStateAcrossReleasesClockBack plays the case.
type ttlLift struct {
	c    *redis.Client
	keys map[string]bool // the sequence's bucket keys
	ms   int64           // how much longer, in ms
}

// measureLift returns the ttlLift of w's bucket keys on the frozen server
// (c), or nil when the old side's scripts give a key the TTL this
// release's give it: each side charges a key of its own with one unit,
// and a TTL less the time to full in ms it replied is that side's margin.
// The server's clock stands still: a TTL read after the script is the
// one it set.
func (w *world) measureLift(c *redis.Client) *ttlLift {
	margin := func(st compatStore, key string) int64 {
		r := make([]algorithms.Result, 1)
		err := st.Allow(w.ctx, []algorithms.Check{{Key: key, Algorithm: w.f.alg, Limit: w.leg.limit, Cost: 1}}, r)
		if err != nil || !r[0].Allowed {
			w.t.Fatalf("measuring the TTL of %s: %s, %v", key, backendtest.FormatResult(r[0]), err)
		}
		ttl, err := c.Do(w.ctx, "PTTL", key).Int64()
		if err != nil {
			w.t.Fatal(err)
		}
		if err := c.Del(w.ctx, key).Err(); err != nil {
			w.t.Fatal(err)
		}
		return ttl - int64((r[0].ResetAfter+time.Millisecond-1)/time.Millisecond)
	}
	probe := strings.Replace(w.k, ":k:", ":ttl:", 1)
	// an old store of its own: the sequence's draws stay as they were
	old := *w.old
	old.rng = rand.New(rand.NewPCG(0, 0))
	lift := margin(w.cur, probe+"new") - margin(&old, probe+"old")
	if lift == 0 {
		return nil
	}
	w.t.Logf("%s: the old side's bucket keys live %d ms less than this release's: raised after each of its scripts (ttlLift)", w.leg.name, lift)
	return &ttlLift{c: c, ms: lift, keys: map[string]bool{w.k: true, w.c: true}}
}

// hold makes the sequence's keys among keys persistent before a script
// runs, and returns their TTLs in ms (-2: no key): a key that has a TTL
// after the script was written by it (every write of a bucket sets one;
// no bucket script reads it).
func (l *ttlLift) hold(ctx context.Context, keys []string) (map[string]int64, error) {
	held := map[string]int64{}
	for _, k := range keys {
		if _, seen := held[k]; seen || !l.keys[k] {
			continue
		}
		ttl, err := l.c.Do(ctx, "PTTL", k).Int64()
		if err != nil {
			return nil, err
		}
		if ttl >= 0 {
			if err := l.c.Persist(ctx, k).Err(); err != nil {
				return nil, err
			}
		}
		held[k] = ttl
	}
	return held, nil
}

// raise gives each key held that the script wrote its TTL and l.ms more,
// and those it did not write their TTL back.
func (l *ttlLift) raise(ctx context.Context, held map[string]int64) error {
	for k, before := range held {
		ttl, err := l.c.Do(ctx, "PTTL", k).Int64()
		if err != nil {
			return err
		}
		switch {
		case ttl >= 0:
			ttl += l.ms
		case ttl == -1 && before >= 0:
			ttl = before
		default:
			continue // gone, or had no TTL before either
		}
		if err := l.c.PExpire(ctx, k, time.Duration(ttl)*time.Millisecond).Err(); err != nil {
			return err
		}
	}
	return nil
}

// onCluster sets w up on the cluster, on an injected clock. The nodes'
// clocks are their own: every key a script names is made persistent after
// it (backendtest.PersistingCluster), the markers live longer than the
// sequence (the refund window), and so do the refund records of its
// buckets (compatFeature.clusterLimit), whose TTLs run there.
func (w *world) onCluster(client *redis.ClusterClient) {
	w.cluster = true
	w.hw = w.now
	w.scale = 60 * w.f.scale
	if w.f.boundary != nil {
		w.now = w.f.boundary(w.now).Add(-8 * time.Minute)
		w.start = w.now
	}
	p := backendtest.PersistingCluster{ClusterClient: client}
	w.old.c, w.old.now, w.old.sharded = p, w.clock, true
	w.window = 1000 * time.Hour
	cur, err := redisstore.New(p, redisstore.Config{Now: w.clock})
	if err != nil {
		w.t.Fatal(err)
	}
	w.cur = cur
}

// checkOddRecords fails t unless every refund record of a bucket limit
// lives an odd number of ms (a full bucket's time, rounded up, and 1 ms):
// on the server's clock no step falls on its expiry then.
func checkOddRecords(t *testing.T, alg algorithms.Algorithm, limits ...algorithms.Limit) {
	t.Helper()
	if alg != algorithms.TokenBucket && alg != algorithms.GCRA {
		return
	}
	for _, l := range limits {
		full := l.Capacity(alg) * int64(l.Period/time.Microsecond) // µs to refill, times rate
		tau := (full + l.Rate - 1) / l.Rate
		if ms := (tau+999)/1000 + 1; ms%2 == 0 {
			t.Fatalf("limit %v: its refund record lives %d ms, an even number: choose another (see compatFeatures)", l, ms)
		}
	}
}

// set moves the clock to at. The stores' time for expiry (the frozen
// server's clock, memstore's) is the latest now: it never goes back.
func (w *world) set(at time.Time) {
	w.now = at
	if at.After(w.hw) {
		w.hw = at
		if w.srv != nil {
			w.srv.set(at)
		}
	}
}

// between returns a duration from lo to hi, in whole µs.
func (w *world) between(lo, hi time.Duration) time.Duration {
	lo, hi = lo/time.Microsecond, hi/time.Microsecond
	return time.Duration(int64(lo)+w.rng.Int64N(int64(hi-lo)+1)) * time.Microsecond
}

// tick moves the clock before a step: often not at all, mostly by up to a
// quarter of the scale, sometimes by up to two scales (keys expire), now
// and then back (injected clocks on one server only: on a cluster, the
// compensation of a call spanning slots is exact only forward), or, for a
// calendar quota, to the eve of the next window. On the server's clock
// steps are whole multiples of 2 ms.
func (w *world) tick() {
	s := w.scale
	var d time.Duration
	switch r := w.rng.IntN(100); {
	case r < 30:
	case r < 85:
		d = w.between(time.Microsecond, s/4)
	case r < 96:
		d = w.between(s/4, 2*s)
	case w.f.boundary != nil:
		d = w.f.boundary(w.now).Sub(w.now) - w.between(0, 2*s)
	case !w.leg.server && !w.cluster:
		d = -w.between(time.Microsecond, s/2)
	default:
		d = w.between(time.Microsecond, s/4)
	}
	if w.leg.server {
		d = max(d.Truncate(2*time.Millisecond), 0)
	}
	w.set(w.now.Add(d))
}

// run plays the sequence: before each step the clock moves, then the side
// the schedule names makes a call, and the model the same.
func (w *world) run() {
	for w.step = 0; w.step < w.leg.steps && !w.failed; w.step++ {
		w.tick()
		n := w.leg.steps
		var s side
		switch i := w.step; {
		case w.leg.sched == "rolling deploy" && i < n/3, w.leg.sched == "rollback" && i >= 2*n/3:
			s = oldSide
		case w.leg.sched == "rolling deploy" && i >= 2*n/3, w.leg.sched == "rollback" && i < n/3:
			s = newSide
		default:
			s = side(w.rng.IntN(2))
		}
		w.op(s)
	}
	if !w.failed {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(w.tally)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, w.tally[k]))
		}
		w.t.Logf("%s: %d steps over %v: %s", w.leg.name, w.leg.steps, w.now.Sub(w.start), strings.Join(parts, ", "))
	}
}

// op makes one call of a kind drawn for the feature, from side s.
func (w *world) op(s side) {
	bucket := w.f.alg == algorithms.TokenBucket || w.f.alg == algorithms.GCRA
	conc := w.f.alg == algorithms.Concurrency
	calendar := w.f.boundary != nil
	r := w.rng.IntN(100)
	switch {
	case r < 30:
	case r < 40:
		w.allow(s, "layered", w.check(w.k, w.leg.limit), w.check(w.c, w.leg.comp))
		return
	case r < 50 && w.cluster:
		w.allow(s, "spanning slots", w.fresh(w.check(w.k, w.leg.limit)), w.fresh(w.check(w.x, w.leg.comp)))
		return
	case r < 62 && !conc:
		w.refundable(s)
		return
	case r < 72 && len(w.pending[s]) > 0:
		w.refund(s)
		return
	case r < 76 && s == oldSide && !conc:
		if w.cancel() {
			return
		}
	case r < 84 && !calendar && !w.cluster:
		w.batch(s)
		return
	case r < 92 && bucket:
		w.block(s)
		return
	case r < 92 && conc && len(w.leases) > 0:
		w.release(s)
		return
	case r < 97 && conc && len(w.leases) > 0:
		w.renew(s)
		return
	}
	w.allow(s, "one", w.check(w.k, w.leg.limit))
}

// check returns a check of key under l of a drawn cost: mostly 1, at times
// 0 (meaning 1), else up to one above the capacity (never allowed). A
// concurrency check takes a new lease, or, at times, one the key holds
// (a call sent again after its reply was lost).
func (w *world) check(key string, l algorithms.Limit) algorithms.Check {
	c := algorithms.Check{Key: key, Algorithm: w.f.alg, Limit: l, Cost: 1}
	switch r := w.rng.IntN(10); {
	case r < 5:
	case r < 7:
		c.Cost = 0
	default:
		c.Cost = w.rng.Int64N(l.Capacity(w.f.alg) + 2)
	}
	if w.f.alg == algorithms.Concurrency {
		c.Lease = 1 + w.rng.Uint64N(contract.MaxLease)
		if w.rng.IntN(8) == 0 {
			for _, l := range w.leases {
				if l.Key == key {
					c.Lease, c.Cost = l.ID, l.Cost
					break
				}
			}
		}
	}
	return c
}

// count tallies a call of side s and whether it was allowed.
func (w *world) count(s side, what string, ok bool) {
	v := " denied"
	if ok {
		v = " allowed"
	}
	w.tally[s.String()+" "+what+v]++
}

// fresh gives a concurrency check a lease of its own. A call spanning
// slots takes no lease the key holds: when another slot denies it, the
// compensation of its slot removes the lease's slots, those the earlier
// acquisition took too, where memstore, which never committed the call,
// keeps them (the same in both releases: not a matter of state).
func (w *world) fresh(c algorithms.Check) algorithms.Check {
	if c.Algorithm == algorithms.Concurrency {
		for _, l := range w.leases {
			if l.Key == c.Key && l.ID == c.Lease {
				c.Lease, c.Cost = 1+w.rng.Uint64N(contract.MaxLease), max(c.Cost, 1)
			}
		}
	}
	return c
}

// store returns side s.
func (w *world) store(s side) compatStore {
	if s == oldSide {
		return w.old
	}
	return w.cur
}

// note records a step for the failure message.
func (w *world) note(s side, format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("#%d t0+%v %s %s", w.step, w.now.Sub(w.f.start), s, fmt.Sprintf(format, args...)))
}

// fail reports a mismatch with the sequence so far, and ends the sequence.
func (w *world) fail(format string, args ...any) {
	w.t.Helper()
	w.failed = true
	log := w.log
	if len(log) > 30 {
		log = log[len(log)-30:]
	}
	replay := fmt.Sprintf("seed %d", w.leg.seed)
	if w.leg.sched == "random" {
		replay = fmt.Sprintf("REDLIMIT_COMPAT_SEED=%d", w.leg.seed)
	}
	w.t.Errorf("%s (%s): step %d at t0+%v: %s\nthe steps so far, last first:\n  %s",
		w.leg.name, replay, w.step, w.now.Sub(w.f.start), fmt.Sprintf(format, args...), strings.Join(reversed(log), "\n  "))
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// describe names checks as a step line shows them: key*cost[@lease].
func (w *world) describe(checks []algorithms.Check) string {
	parts := make([]string, len(checks))
	for i, c := range checks {
		k := map[string]string{w.k: "k", w.c: "c", w.x: "x"}[c.Key]
		parts[i] = fmt.Sprintf("%s*%d", k, c.Cost)
		if c.Lease != 0 {
			parts[i] += "@" + strconv.FormatUint(c.Lease, 36)
		}
		if c.RefundWindow > 0 {
			parts[i] += " refundable"
		}
	}
	return strings.Join(parts, " ")
}

func formatResults(rs []algorithms.Result) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = backendtest.FormatResult(r)
	}
	return strings.Join(parts, " | ")
}

// same reports whether got, a side's Results of checks, are the model's,
// want, and fails the sequence if not. Receipts are each store's own. On a
// cluster, Provisional is left out: a denial there is provisional while
// the pending marker of a part of a call spanning slots lives (its
// compensation may undo it), which memstore, deciding every call at once,
// knows nothing of; on one server it is compared.
func (w *world) same(what string, checks []algorithms.Check, got, want []algorithms.Result) bool {
	for i := range checks {
		g, m := got[i], want[i]
		g.Receipt, m.Receipt = algorithms.Receipt{}, algorithms.Receipt{}
		if w.cluster {
			g.Provisional, m.Provisional = false, false
		}
		if g != m {
			w.fail("%s: check %d: %s, the model %s", what, i, backendtest.FormatResult(g), backendtest.FormatResult(m))
			return false
		}
	}
	return true
}

func allowed(rs []algorithms.Result) bool {
	for _, r := range rs {
		if !r.Allowed {
			return false
		}
	}
	return true
}

// allow decides checks on side s and on the model.
func (w *world) allow(s side, what string, checks ...algorithms.Check) {
	got, want := make([]algorithms.Result, len(checks)), make([]algorithms.Result, len(checks))
	w.note(s, "%s %s", what, w.describe(checks))
	if err := w.store(s).Allow(w.ctx, checks, got); err != nil {
		w.fail("%s Allow: %v", s, err)
		return
	}
	if err := w.model.Allow(w.ctx, checks, want); err != nil {
		w.t.Fatalf("the model: %v", err)
	}
	w.log[len(w.log)-1] += " -> " + formatResults(got)
	w.count(s, what, allowed(want))
	if w.same(s.String()+" Allow", checks, got, want) {
		w.keep(s, checks, got, want)
	}
}

// keep remembers what an allowed call leaves to do: the refund of a
// refundable call, the release of concurrency leases.
func (w *world) keep(s side, checks []algorithms.Check, got, want []algorithms.Result) {
	if !allowed(want) {
		return
	}
	if refundWindow(checks) > 0 {
		slots := map[int]bool{}
		for _, c := range checks {
			slots[hashslot.Of(c.Key)] = true
		}
		w.pending[s] = append(w.pending[s], pendingRefund{checks: checks, got: got, want: want, slots: len(slots)})
	}
	for _, c := range checks {
		if c.Algorithm != algorithms.Concurrency {
			continue
		}
		l := algorithms.Lease{Key: c.Key, ID: c.Lease, Cost: c.Cost, Period: c.Limit.Period}
		held := false
		for _, h := range w.leases {
			held = held || h == l
		}
		if !held {
			w.leases = append(w.leases, l)
		}
	}
}

// refundable decides a refundable call of the key under test, alone or
// with its companion (on the cluster, at times with the key of another
// slot).
func (w *world) refundable(s side) {
	checks := []algorithms.Check{w.check(w.k, w.leg.limit)}
	switch r := w.rng.IntN(3); {
	case r == 1:
		checks = append(checks, w.check(w.c, w.leg.comp))
	case r == 2 && w.cluster:
		checks = []algorithms.Check{w.fresh(checks[0]), w.fresh(w.check(w.x, w.leg.comp))}
	}
	for i := range checks {
		checks[i].RefundWindow = w.window
	}
	w.allow(s, "refundable", checks...)
}

// takePending removes and returns a pending refund of side s accepted by
// ok, drawn at random; a refund is left in place one time in six, to be
// sent again later, unless its call spans slots: there each slot's part
// has a commit marker of its own, and a refund sent again gives back the
// units of the parts the first one gave nothing to (the protocol of a
// cluster, not a matter of state), where the model's one marker is gone.
func (w *world) takePending(s side, ok func(*pendingRefund) bool) (pendingRefund, bool) {
	var idx []int
	for i := range w.pending[s] {
		if ok(&w.pending[s][i]) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return pendingRefund{}, false
	}
	i := idx[w.rng.IntN(len(idx))]
	p := w.pending[s][i]
	if p.slots > 1 || w.rng.IntN(6) != 0 {
		w.pending[s] = append(w.pending[s][:i], w.pending[s][i+1:]...)
	}
	return p, true
}

// refund gives back a drawn part of a pending refundable call's units,
// from the side that made it: both must give back, or both answer
// ErrNotRefunded (refunded already, or past the refund window).
func (w *world) refund(s side) {
	p, _ := w.takePending(s, func(*pendingRefund) bool { return true })
	got, want := make([]algorithms.Refund, len(p.checks)), make([]algorithms.Refund, len(p.checks))
	units := make([]string, len(p.checks))
	for i, c := range p.checks {
		n := w.rng.Int64N(max(c.Cost, 1) + 1)
		got[i] = algorithms.Refund{Check: c, Result: p.got[i], Units: n}
		want[i] = algorithms.Refund{Check: c, Result: p.want[i], Units: n}
		units[i] = strconv.FormatInt(n, 10)
	}
	w.note(s, "refund %s of %s (committed at t0+%v)", strings.Join(units, ","), w.describe(p.checks), time.UnixMicro(p.want[0].Receipt.At).Sub(w.f.start))
	errG, errW := w.store(s).Refund(w.ctx, got), w.model.Refund(w.ctx, want)
	w.log[len(w.log)-1] += " -> " + refundOutcome(errG)
	w.tally[s.String()+" refund "+refundOutcome(errW)]++
	if refundOutcome(errG) != refundOutcome(errW) {
		w.fail("%s Refund: %v; the model: %v", s, errG, errW)
	}
}

func refundOutcome(err error) string {
	switch {
	case err == nil:
		return "refunded"
	case errors.Is(err, algorithms.ErrNotRefunded):
		return "none"
	}
	return err.Error()
}

// cancel settles a pending refundable call of the old side with
// cancel.lua, which gives back its whole cost if its commit marker is
// there: the model refunds its whole cost. It reports whether there was
// such a call (of one hash slot: the release cancelled one part).
func (w *world) cancel() bool {
	p, ok := w.takePending(oldSide, func(p *pendingRefund) bool { return p.slots == 1 })
	if !ok {
		return false
	}
	want := make([]algorithms.Refund, len(p.checks))
	for i, c := range p.checks {
		want[i] = algorithms.Refund{Check: c, Result: p.want[i], Units: max(c.Cost, 1)}
	}
	w.note(oldSide, "cancel %s", w.describe(p.checks))
	code, err := w.old.Cancel(w.ctx, p.checks, p.got)
	if err != nil {
		w.fail("old Cancel: %v", err)
		return true
	}
	errW := w.model.Refund(w.ctx, want)
	w.log[len(w.log)-1] += fmt.Sprintf(" -> %d", code)
	w.tally[fmt.Sprintf("old cancel %d", code)]++
	if (code == 1) != (errW == nil) || errW != nil && !errors.Is(errW, algorithms.ErrNotRefunded) {
		w.fail("old Cancel replied %d (1: given back); the model's refund of its cost: %v", code, errW)
	}
	return true
}

// batch decides 2 to 4 calls queued together: the old side sends them as
// one batch script; the new one queues them behind its pipeline, which
// sends them as one pipeline (batch scripts for what it batches). The
// model decides them in the order the side did.
func (w *world) batch(s side) {
	calls := make([][]algorithms.Check, 2+w.rng.IntN(3))
	descs := make([]string, len(calls))
	for i := range calls {
		c := []algorithms.Check{w.check(w.k, w.leg.limit)}
		switch r := w.rng.IntN(10); {
		case r < 2:
			c = append(c, w.check(w.c, w.leg.comp))
		case r < 4 && w.f.alg != algorithms.Concurrency:
			c[0].RefundWindow = w.window
		case r < 6:
			// the same check as the call before: the old batch sends no numbers for it
			if i > 0 && len(calls[i-1]) == 1 && calls[i-1][0].RefundWindow == 0 {
				c[0] = calls[i-1][0]
				if w.f.alg == algorithms.Concurrency {
					c[0].Lease = 1 + w.rng.Uint64N(contract.MaxLease)
				}
			}
		}
		calls[i] = c
		descs[i] = w.describe(c)
	}
	w.note(s, "batch [%s]", strings.Join(descs, "] ["))
	got := make([][]algorithms.Result, len(calls))
	order := make([]int, len(calls))
	if s == oldSide {
		for i := range calls {
			got[i], order[i] = make([]algorithms.Result, len(calls[i])), i
		}
		if err := w.old.AllowBatch(w.ctx, calls, got); err != nil {
			w.fail("old batch: %v", err)
			return
		}
	} else {
		var errs []error
		got, errs, order = redisstore.AllowQueued(w.t, w.cur, calls)
		for i, err := range errs {
			if err != nil {
				w.fail("new batch: call %d: %v", i, err)
				return
			}
		}
	}
	var res []string
	for _, i := range order {
		want := make([]algorithms.Result, len(calls[i]))
		if err := w.model.Allow(w.ctx, calls[i], want); err != nil {
			w.t.Fatalf("the model: %v", err)
		}
		res = append(res, formatResults(got[i]))
		w.count(s, "batched", allowed(want))
		if !w.same(fmt.Sprintf("%s batch call %d", s, i), calls[i], got[i], want) {
			return
		}
		w.keep(s, calls[i], got[i], want)
	}
	w.log[len(w.log)-1] += " -> [" + strings.Join(res, "] [") + "] in order " + fmt.Sprint(order)
}

// block takes a quota block of the key under test.
func (w *world) block(s side) {
	c := w.check(w.k, w.leg.limit)
	hold := w.between(time.Microsecond, min(contract.MaxBlockHold, w.f.scale/2))
	w.note(s, "block %s for %v", w.describe([]algorithms.Check{c}), hold)
	got, err := w.store(s).TakeBlock(w.ctx, c, hold)
	if err != nil {
		w.fail("%s TakeBlock: %v", s, err)
		return
	}
	want, err := w.model.TakeBlock(w.ctx, c, hold)
	if err != nil {
		w.t.Fatalf("the model: %v", err)
	}
	w.log[len(w.log)-1] += " -> " + backendtest.FormatResult(got)
	w.count(s, "block", want.Allowed)
	w.same(s.String()+" TakeBlock", []algorithms.Check{c}, []algorithms.Result{got}, []algorithms.Result{want})
}

// pickLeases returns one or two of the leases taken, whichever side took
// them; with forget, it forgets them, but one time in six (a release sent
// twice frees nothing the second time).
func (w *world) pickLeases(forget bool) []algorithms.Lease {
	var out []algorithms.Lease
	for range 1 + w.rng.IntN(2) {
		if len(w.leases) == 0 {
			break
		}
		i := w.rng.IntN(len(w.leases))
		out = append(out, w.leases[i])
		if forget && w.rng.IntN(6) != 0 {
			w.leases = append(w.leases[:i], w.leases[i+1:]...)
		}
	}
	if len(out) == 2 && out[0] == out[1] {
		out = out[:1]
	}
	return out
}

func (w *world) describeLeases(ls []algorithms.Lease) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = w.describe([]algorithms.Check{{Key: l.Key, Cost: l.Cost, Lease: l.ID}})
	}
	return strings.Join(parts, " ")
}

// release frees leases (acquired by either side): what follows shows
// whether the slots are free.
func (w *world) release(s side) {
	ls := w.pickLeases(true)
	w.note(s, "release %s", w.describeLeases(ls))
	if err := w.store(s).Release(w.ctx, ls); err != nil {
		w.fail("%s Release: %v", s, err)
		return
	}
	if err := w.model.Release(w.ctx, ls); err != nil {
		w.t.Fatalf("the model: %v", err)
	}
	w.tally[s.String()+" release"]++
}

// renew extends leases (acquired by either side): each must be held, or
// not, as in the model.
func (w *world) renew(s side) {
	ls := w.pickLeases(false)
	w.note(s, "renew %s", w.describeLeases(ls))
	got, want := make([]bool, len(ls)), make([]bool, len(ls))
	if err := w.store(s).Renew(w.ctx, ls, got); err != nil {
		w.fail("%s Renew: %v", s, err)
		return
	}
	if err := w.model.Renew(w.ctx, ls, want); err != nil {
		w.t.Fatalf("the model: %v", err)
	}
	w.log[len(w.log)-1] += fmt.Sprintf(" -> held %v", got)
	for _, h := range want {
		w.tally[fmt.Sprintf("%s renew held %v", s, h)]++
	}
	for i := range ls {
		if got[i] != want[i] {
			w.fail("%s Renew: lease %d held %v, the model %v", s, i, got[i], want[i])
			return
		}
	}
}

// frozenServer is a redis-server whose wall clock is the test's: it stands
// still and moves only when set moves it (libfaketime reads a timestamp
// file at every call to the clock; the monotonic clock, which Redis's
// timers use, runs as usual). TIME, the scripts' TIME and key expiry all
// follow it, so that a sequence on the server's clock is exact.
type frozenServer struct {
	*redistest.Server
	t    *testing.T
	file string
}

// faketimePreload returns the LD_PRELOAD that runs redis-server under
// libfaketime: glibc's libc_malloc_debug first, without which Debian's
// redis-server (jemalloc) hangs on "Unexpected recursive calls to
// clock_gettime()" (docs/reliability.md). Without them the test skips,
// but in CI (CI=true), where .ci/run installs faketime, it fails.
func faketimePreload(t *testing.T) string {
	t.Helper()
	var libs []string
	for _, name := range []string{"libc_malloc_debug.so.0", "faketime/libfaketime.so.1"} {
		var found string
		for _, dir := range []string{"/usr/lib/*/", "/lib/*/", "/usr/lib/", "/usr/local/lib/", "/lib64/", "/usr/lib64/"} {
			if m, _ := filepath.Glob(dir + name); len(m) > 0 {
				found = m[0]
				break
			}
		}
		if found == "" {
			if redistest.InCI() {
				t.Fatalf("CI=true but %s is not installed (apt-get install faketime)", name)
			}
			t.Skipf("%s not found: the server's clock cannot be frozen (apt-get install faketime)", name)
		}
		libs = append(libs, found)
	}
	return strings.Join(libs, " ")
}

// startFrozen starts a redis-server whose clock stands at at.
func startFrozen(t *testing.T, preload string, at time.Time) *frozenServer {
	t.Helper()
	s := &frozenServer{t: t, file: filepath.Join(t.TempDir(), "now")}
	s.set(at)
	srv, err := redistest.StartEnv([]string{
		"LD_PRELOAD=" + preload,
		"FAKETIME_TIMESTAMP_FILE=" + s.file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_FMT=%s",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s.Server = srv
	c := srv.Client(t)
	got, err := c.Time(context.Background()).Result()
	if err != nil || !got.Equal(at) {
		t.Fatalf("the frozen server's TIME is %v (%v), want %v: libfaketime is not in effect", got, err, at)
	}
	return s
}

// set moves the server's clock to at (whole µs), writing the file whole
// (renamed into place), so that the server never reads half of it.
// libfaketime reads the fraction of a second as a float and truncates it:
// written in ns with half a µs more, it cannot fall below the µs.
func (s *frozenServer) set(at time.Time) {
	tmp := s.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d.%09d\n", at.Unix(), at.Nanosecond()/1000*1000+500)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, s.file); err != nil {
		s.t.Fatal(err)
	}
}

// compatCluster is the Redis Cluster the subtests share, started in the
// background while they run on their own servers.
type compatCluster struct {
	once   sync.Once
	done   chan struct{}
	client *redis.ClusterClient
	err    error
	skip   string
}

// startCompatCluster starts a cluster of 3 masters (about 2 s), closed
// when t ends; without redis-cli the cluster sequences skip (but in CI).
func startCompatCluster(t *testing.T) *compatCluster {
	cc := &compatCluster{done: make(chan struct{})}
	if redistest.ClusterCLI() == "" {
		if redistest.InCI() {
			t.Fatal("CI=true but redis-cli is not installed")
		}
		cc.skip = "redis-cli not available: no cluster sequences"
		close(cc.done)
		return cc
	}
	var cl *redistest.Cluster
	go func() {
		defer close(cc.done)
		cl, cc.err = redistest.StartCluster(3, 0)
		if cc.err == nil {
			// no retries: a script sent again would run twice
			cc.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
		}
	}()
	t.Cleanup(func() {
		<-cc.done
		if cc.client != nil {
			cc.client.Close()
		}
		if cl != nil {
			cl.Close()
		}
	})
	return cc
}

// wait returns the cluster's client once it is up, or nil when there is
// none (logged).
func (cc *compatCluster) wait(t *testing.T) *redis.ClusterClient {
	t.Helper()
	<-cc.done
	switch {
	case cc.err != nil:
		t.Fatalf("cluster: %v", cc.err)
	case cc.skip != "":
		cc.once.Do(func() { t.Log(cc.skip) })
	}
	return cc.client
}
