package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/redistest"
)

// queued is one call for allowQueued: its checks, its context (nil:
// Background) and the time of an injected clock (zero: leave it).
type queued struct {
	ctx    context.Context
	at     time.Time
	checks []algorithms.Check
	m      *markers // set: decided with these marker keys, as a sharded client would
}

// allow decides q on b: Allow, or with q.m a decide call with its markers
// at q.at.
func (q queued) allow(ctx context.Context, b *Store, res []algorithms.Result) error {
	if q.m == nil {
		return b.Allow(ctx, q.checks, res)
	}
	ps := make([]calc.Params, len(q.checks))
	for j, c := range q.checks {
		ps[j] = calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost)
	}
	_, err := b.decide(ctx, nil, q.checks, ps, res, q.at.UnixMicro(), *q.m)
	return err
}

// allowQueued makes the calls, in order, queue behind b's pipeline with
// every round trip in flight, then lets the first round trip end, which
// sends the whole queue as one pipeline. It returns each call's Results
// and error.
func allowQueued(t *testing.T, b *Store, clock *backendtest.Clock, calls []queued) ([][]algorithms.Result, []error) {
	t.Helper()
	p := b.pipe
	p.mu.Lock()
	p.inflight = p.max
	p.mu.Unlock()
	results := make([][]algorithms.Result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	inQueue := 0 // calls queued that wait
	for i, c := range calls {
		if clock != nil && !c.at.IsZero() {
			clock.T = c.at // read by Allow before it queues
		}
		ctx := c.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		results[i] = make([]algorithms.Result, len(c.checks))
		returned := make(chan struct{})
		wg.Go(func() {
			defer close(returned)
			errs[i] = c.allow(ctx, b, results[i])
		})
		if ctx.Err() != nil {
			// A call with an ended context queues, then leaves the
			// queue and returns, unsent.
			<-returned
			continue
		}
		inQueue++
		queued := func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.queue) == inQueue
		}
		for !queued() {
			select {
			case <-returned:
				// One that returned without queueing (an invalid limit)
				// would be waited for forever: answer the others, then
				// fail.
				if !queued() {
					p.handOff()
					wg.Wait()
					t.Fatalf("call %d returned without queueing: %v", i, errs[i])
				}
			case <-time.After(50 * time.Microsecond):
			}
		}
	}
	p.handOff()
	wg.Wait()
	for { // the goroutine that sent the queue frees its place
		p.mu.Lock()
		done := p.inflight == p.max-1
		if done {
			p.inflight = 0
		}
		p.mu.Unlock()
		if done {
			return results, errs
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// executionOrder returns the order in which one pipeline decides calls: the
// order of the units it sends.
func executionOrder(calls []queued) []int {
	order, _ := batchedCalls(calls)
	return order
}

// batchedCalls returns executionOrder, and how many calls a batch script
// decides: in all, of several checks, and with marker keys.
func batchedCalls(calls []queued) (order []int, tally struct{ batched, multi, marked int }) {
	us, index := queuedUnits(calls)
	for _, u := range us {
		for _, c := range u.calls {
			order = append(order, index[c])
			if len(u.calls) > 1 {
				tally.batched++
			}
			if len(u.calls) > 1 && c.n > 1 {
				tally.multi++
			}
			if len(u.calls) > 1 && len(c.keys) > c.n {
				tally.marked++
			}
		}
	}
	return order, tally
}

// queuedUnits returns the units one pipeline sends for calls, and the
// index in calls of each of their calls.
func queuedUnits(calls []queued) ([]unit, map[*call]int) {
	cs := make([]*call, len(calls))
	index := map[*call]int{}
	for i, q := range calls {
		ps := make([]calc.Params, len(q.checks))
		for j, c := range q.checks {
			ps[j] = calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost)
		}
		var m markers
		if q.m != nil {
			m = *q.m
		}
		s, keys, args := decideRequest(q.checks, ps, 0, m)
		cs[i] = &call{script: s, keys: keys, args: args}
		cs[i].batch, cs[i].n = batchKind(s, keys, args)
		index[cs[i]] = i
	}
	return units(cs), index
}

// miniStore returns a Store on a fresh miniredis, on a clock of its own.
func miniStore(t *testing.T, pipelines int) (*Store, *backendtest.Clock, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	// Scripts loaded: a NOSCRIPT answer would send some scripts again in
	// a second pipeline, after the others, out of queue order.
	for _, src := range allScripts() {
		if err := client.ScriptLoad(context.Background(), src).Err(); err != nil {
			t.Fatal(err)
		}
	}
	clock := &backendtest.Clock{}
	b, err := New(client, Config{Now: clock.Now, Pipelines: pipelines})
	if err != nil {
		t.Fatal(err)
	}
	return b, clock, mr
}

// dumpState renders every key of mr, its value and its TTL.
func dumpState(mr *miniredis.Miniredis) string {
	var b strings.Builder
	for _, k := range mr.Keys() {
		fmt.Fprintf(&b, "%s %s ttl=%v:", k, mr.Type(k), mr.TTL(k))
		switch mr.Type(k) {
		case "string":
			v, _ := mr.Get(k)
			b.WriteString(" " + v)
		case "hash":
			fields, _ := mr.HKeys(k)
			slices.Sort(fields)
			for _, f := range fields {
				fmt.Fprintf(&b, " %s=%s", f, mr.HGet(k, f))
			}
		case "zset":
			members, _ := mr.ZMembers(k)
			for _, m := range members {
				s, _ := mr.ZScore(k, m)
				fmt.Fprintf(&b, " %s@%.0f", m, s)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestBatchDifferential: random workloads (one to three rules, every
// algorithm, costs up to capacity+1, time going forward and back) sent as
// queues of 1 to 12 calls, so that they are decided by batch scripts (of
// one algorithm, or mixed; one check or several; for a third of the seeds
// with the marker keys of a sharded client, pending markers and commit
// markers; for four seeds with GCRA rules only, one of them with markers;
// for two seeds each of fixed_window, token_bucket and sliding_window, one
// check per call, whose batches start with lua/batch_fast.lua's flat loop,
// the second with markers, mostly pending ones: modes 0 and 2), give the
// Results, the stored state and the TTLs that the same calls give one by
// one, each its own script, in the order the pipeline decided them.
func TestBatchDifferential(t *testing.T) {
	t.Parallel()
	// seeds 16 to 21: one-check calls of one algorithm with a fast function
	flat := []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket, algorithms.SlidingWindow}
	for seed := range uint64(16 + 2*len(flat)) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			batched, bclock, bmr := miniStore(t, 1)
			alone, aclock, amr := miniStore(t, -1)
			rng := rand.New(rand.NewPCG(seed, 7))
			work := backendtest.RandomWorkload(seed, 300)
			sharded := seed%3 == 2 || seed == 13
			if seed >= 16 {
				sharded = seed%2 == 1
			}
			if seed%2 == 0 || seed >= 16 {
				// one rule, one check per call
				for i := range work {
					work[i].Checks = work[i].Checks[:1]
				}
			}
			if seed >= 12 {
				// every rule GCRA (seeds 12 to 15) or one algorithm with
				// a fast function (from 16), whose calls batches decide
				// flat
				alg := algorithms.GCRA
				if seed >= 16 {
					alg = flat[(seed-16)/2]
				}
				for i := range work {
					for j := range work[i].Checks {
						c := &work[i].Checks[j]
						c.Algorithm = alg
						if alg != algorithms.GCRA && alg != algorithms.TokenBucket {
							c.Limit.Burst = 0 // the others have none
						}
					}
				}
			}
			parts := 2 // one sharded call in parts is the part of a call spanning slots
			if seed >= 16 {
				parts = 4 // the flat loop decides modes 0 and 2, a part goes to batch.lua
			}
			var inBatch, multi, marked int // calls decided in batches
			several := slices.ContainsFunc(work, func(c backendtest.Call) bool { return len(c.Checks) > 1 })
			for len(work) > 0 {
				n := min(len(work), 1+rng.IntN(12))
				chunk := make([]queued, n)
				for i, c := range work[:n] {
					chunk[i] = queued{at: c.At, checks: c.Checks}
					if sharded {
						// as a sharded client sends them: pending
						// markers, or the part of a call spanning slots
						m := &markers{sharded: true}
						if rng.IntN(parts) == 0 {
							m.commit, m.window = commitKey(c.Checks[0].Key, fmt.Sprint(len(work), "-", i)), 60_000
						}
						chunk[i].m = m
					}
				}
				work = work[n:]
				got, errs := allowQueued(t, batched, bclock, chunk)
				_, tally := batchedCalls(chunk)
				inBatch += tally.batched
				multi += tally.multi
				marked += tally.marked
				for _, i := range executionOrder(chunk) {
					if errs[i] != nil {
						t.Fatalf("batched call %d: %v", i, errs[i])
					}
					aclock.T = chunk[i].at
					want := make([]algorithms.Result, len(chunk[i].checks))
					if err := chunk[i].allow(context.Background(), alone, want); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got[i], want) {
						for j, q := range chunk {
							t.Logf("chunk %d: %v at %v -> %+v", j, q.checks, q.at, got[j])
						}
						t.Logf("order %v", executionOrder(chunk))
						t.Logf("state batched:\n%s\nalone:\n%s", dumpState(bmr), dumpState(amr))
						t.Fatalf("call %v at %v: batched %+v, alone %+v", chunk[i].checks, chunk[i].at, got[i], want)
					}
				}
				if g, w := dumpState(bmr), dumpState(amr); g != w {
					t.Fatalf("state batched:\n%s\nalone:\n%s", g, w)
				}
			}
			if inBatch == 0 || several && multi == 0 || sharded && marked == 0 {
				t.Errorf("batched: %d calls, %d of several checks, %d with markers; want some of each kind the seed makes", inBatch, multi, marked)
			}
		})
	}
}

// TestBatchDeniedCallChargesNothing: in one batch, a call that is denied
// writes nothing, and the calls before and after it, on its key and on
// others, are decided as if it had not been sent.
func TestBatchDeniedCallChargesNothing(t *testing.T) {
	t.Parallel()
	b, clock, mr := miniStore(t, 1)
	clock.T = backendtest.T0
	limit := algorithms.PerHour(10)
	check := func(key string, cost int64) []algorithms.Check {
		return []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: limit, Cost: cost}}
	}
	res, errs := allowQueued(t, b, clock, []queued{
		{checks: check("{a}", 4)},
		{checks: check("{b}", 3)},
		{checks: check("{a}", 7)}, // 4 + 7 > 10: denied
		{checks: check("{a}", 6)}, // 4 + 6 = 10: allowed
		{checks: check("{b}", 7)}, // 3 + 7 = 10: allowed
	})
	want := []struct {
		allowed   bool
		remaining int64
	}{{true, 6}, {true, 7}, {false, 6}, {true, 0}, {true, 0}}
	for i, w := range want {
		if errs[i] != nil || res[i][0].Allowed != w.allowed || res[i][0].Remaining != w.remaining {
			t.Errorf("call %d: %+v, %v; want allowed %v, remaining %d", i, res[i][0], errs[i], w.allowed, w.remaining)
		}
	}
	// 10 units of each key, one per 6 minutes: each is 60 minutes in debt.
	for _, k := range []string{"{a}", "{b}"} {
		if v, _ := mr.Get(k); v != fmt.Sprint(backendtest.T0.Add(time.Hour).UnixMicro())+"/3600000000" {
			t.Errorf("%s: TAT %s, want T0+1h", k, v)
		}
	}
}

// TestBatchDeniedLayeredCallChargesNothing: in one mixed batch, a call of
// two rules that one rule denies charges neither rule's key, and the
// one-check calls of other algorithms around it on those keys are decided
// as if it had not been sent; so does the part of a call spanning slots
// (commit and pending markers), which sets no marker when denied.
func TestBatchDeniedLayeredCallChargesNothing(t *testing.T) {
	t.Parallel()
	b, clock, mr := miniStore(t, 1)
	clock.T = backendtest.T0
	limit := algorithms.PerHour(10)
	a := algorithms.Check{Key: "{a}", Algorithm: algorithms.GCRA, Limit: limit}
	w := algorithms.Check{Key: "{w}", Algorithm: algorithms.FixedWindow, Limit: limit}
	cost := func(c algorithms.Check, n int64) algorithms.Check { c.Cost = n; return c }
	part := &markers{sharded: true, commit: "{a}:commit:x", window: 60_000}
	calls := []queued{
		{checks: []algorithms.Check{cost(a, 4)}},
		{checks: []algorithms.Check{cost(w, 1), cost(a, 7)}},                              // a: 4 + 7 > 10, denied: w not charged
		{checks: []algorithms.Check{cost(w, 3)}},                                          // 3 of 10
		{checks: []algorithms.Check{cost(a, 1), cost(w, 8)}, at: backendtest.T0, m: part}, // w: 3 + 8 > 10, denied: no markers
		{checks: []algorithms.Check{cost(a, 6)}},                                          // 4 + 6 = 10: allowed
		{checks: []algorithms.Check{cost(w, 7)}},                                          // 3 + 7 = 10: allowed
	}
	if _, tally := batchedCalls(calls); tally.multi != 2 || tally.marked != 1 {
		t.Fatalf("batched %+v, want both calls of two checks, one with markers, in the batch", tally)
	}
	res, errs := allowQueued(t, b, clock, calls)
	want := [][]bool{{true}, {true, false}, {true}, {true, false}, {true}, {true}}
	for i := range want {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		for j, allowed := range want[i] {
			if res[i][j].Allowed != allowed {
				t.Errorf("call %d check %d: %+v, want allowed %v", i, j, res[i][j], allowed)
			}
		}
	}
	if res[4][0].Remaining != 0 || res[5][0].Remaining != 0 {
		t.Errorf("last calls: %+v, %+v; want 0 remaining each: a denied call charged a key", res[4][0], res[5][0])
	}
	if got := mr.Keys(); !slices.Equal(got, []string{"{a}", "{w}"}) {
		t.Errorf("keys %v, want only {a} and {w}: a denied part set markers", got)
	}
}

// TestBatchErrors: in a batch, a key of another type fails its own call
// with ErrKeyState and the key in the error, and no other; a call whose
// context has ended is dropped, unsent; a SCRIPT FLUSH before the batch is
// transparent. On a real redis-server.
func TestBatchErrors(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	b, err := New(c, Config{Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	limit := algorithms.PerHour(10)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			key := func(s string) string { return prefix + alg.String() + ":{" + s + "}" }
			check := func(s string) []algorithms.Check {
				return []algorithms.Check{{Key: key(s), Algorithm: alg, Limit: limit}}
			}
			if err := c.RPush(ctx, key("list"), "x").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			ended, cancel := context.WithCancel(ctx)
			cancel()
			calls := []queued{
				{checks: check("a")},
				{checks: check("list")},
				{checks: check("b"), ctx: ended},
				{checks: check("a")},
				{checks: check("c")}, // four calls sent: one batch script
			}
			live := slices.Delete(slices.Clone(calls), 2, 3)
			if us, _ := queuedUnits(live); len(us) != 1 || us[0].script != batchScripts[alg] {
				t.Fatalf("the four live calls go as %d scripts, want one batch script of %v", len(us), alg)
			}
			res, errs := allowQueued(t, b, nil, calls)
			for i, want := range map[int]int64{0: 9, 3: 8, 4: 9} {
				if errs[i] != nil || !res[i][0].Allowed || res[i][0].Remaining != want {
					t.Errorf("call %d: %+v, %v; want allowed, %d remaining", i, res[i][0], errs[i], want)
				}
			}
			var be *algorithms.BackendError
			if !errors.Is(errs[1], algorithms.ErrKeyState) || !errors.As(errs[1], &be) || !slices.Equal(be.Keys, []string{key("list")}) {
				t.Errorf("wrong-type call: %v, want ErrKeyState naming its key", errs[1])
			}
			if !errors.Is(errs[2], context.Canceled) {
				t.Errorf("call with an ended context: %v, want context.Canceled", errs[2])
			}
			// sent, it would have been allowed and written its key
			if n := c.Exists(ctx, key("b")).Val(); n != 0 {
				t.Errorf("the call with an ended context was sent")
			}
		})
	}
}

// TestBatchMinimum: a pipeline sends fewer than minBatch batchable calls
// of one server as their own scripts (a small batch script costs the
// server more per check than one-check scripts), and minBatch or more as
// one batch script: minFlatBatchCalls of one algorithm whose batches
// start flat (GCRA, fixed window, sliding window, token bucket),
// minBatchCalls of the others, or when algorithms are mixed.
func TestBatchMinimum(t *testing.T) {
	calls := func(n int, algs ...algorithms.Algorithm) []*call {
		cs := make([]*call, n)
		for i := range cs {
			alg := algs[i%len(algs)]
			checks := []algorithms.Check{{Key: fmt.Sprintf("{k%d}", i), Algorithm: alg, Limit: algorithms.PerHour(10)}}
			ps := []calc.Params{calc.Prepare(uint8(alg), 10, time.Hour, 0, 1)}
			s, keys, args := decideRequest(checks, ps, 0, markers{})
			cs[i] = &call{script: s, keys: keys, args: args}
			cs[i].batch, cs[i].n = batchKind(s, keys, args)
		}
		return cs
	}
	for _, tc := range []struct {
		algs  []algorithms.Algorithm
		min   int
		batch *redis.Script
	}{
		{[]algorithms.Algorithm{algorithms.GCRA}, minFlatBatchCalls, batchScripts[algorithms.GCRA]},
		{[]algorithms.Algorithm{algorithms.FixedWindow}, minFlatBatchCalls, batchScripts[algorithms.FixedWindow]},
		{[]algorithms.Algorithm{algorithms.SlidingWindow}, minFlatBatchCalls, batchScripts[algorithms.SlidingWindow]},
		{[]algorithms.Algorithm{algorithms.TokenBucket}, minFlatBatchCalls, batchScripts[algorithms.TokenBucket]},
		{[]algorithms.Algorithm{algorithms.SlidingLog}, minBatchCalls, batchScripts[algorithms.SlidingLog]},
		{[]algorithms.Algorithm{algorithms.Concurrency}, minBatchCalls, batchScripts[algorithms.Concurrency]},
		{[]algorithms.Algorithm{algorithms.GCRA, algorithms.FixedWindow}, minBatchCalls, batchAllScript},
		{[]algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow}, minBatchCalls, batchAllScript},
	} {
		for n := 1; n <= tc.min+1; n++ {
			us := units(calls(n, tc.algs...))
			batched := n >= tc.min
			want := n
			if batched {
				want = 1
			}
			if len(us) != want {
				t.Errorf("%v, %d queued calls: %d scripts, want %d", tc.algs, n, len(us), want)
			}
			for _, u := range us {
				if got := u.script == tc.batch; got != batched {
					t.Errorf("%v, %d queued calls: a unit of %d calls, batch script %v", tc.algs, n, len(u.calls), got)
				}
			}
		}
	}
}

// TestOneArgs: the cached ARGV of a one-check call are its own, whatever
// other limits were cached before, and appending to them (the refund
// window of a part of a call spanning slots) leaves the cache intact.
func TestOneArgs(t *testing.T) {
	for i := range 500 {
		p := calc.Prepare(uint8(algorithms.Algorithms[i%5]), int64(1+i%37), time.Duration(1+i%11)*time.Second, 0, int64(1+i%3))
		for _, now := range []int64{0, 1_700_000_000_000_000} {
			want := fmt.Sprint([]any{now, p.Cap, p.Period, p.R, p.U, p.Cost})
			args := oneArgs(&p, now)
			if got := fmt.Sprint(args); got != want {
				t.Fatalf("oneArgs(%+v, %d) = %s, want %s", p, now, got, want)
			}
			_ = append(args, int64(5000))
			if got := fmt.Sprint(oneArgs(&p, now)); got != want {
				t.Fatalf("after an append: oneArgs(%+v, %d) = %s, want %s", p, now, got, want)
			}
		}
	}
}
