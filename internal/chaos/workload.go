package chaos

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/bridge"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// The workload's key materials: few, so that limits are hit.
var (
	routes  = []string{"r0", "r1", "r2"}
	clients = []string{"c0", "c1", "c2", "c3"}
	gkeys   = []string{"g0", "g1", "g2"}
	qkeys   = []string{"q0", "q1"}
	ckeys   = []string{"k0", "k1"}
	hkeys   = []string{"h0", "h1"} // hot-fw
	jkeys   = []string{"j0", "j1"} // hot-gcra
)

// Limits of the workload's rules. Periods are short so that a run of a few
// seconds spans many windows; each emission interval is a whole number of
// microseconds so the checker's bounds are exact.
var (
	limRouteFW  = algorithms.PerSecond(8)
	limClientSW = algorithms.PerSecond(8)
	limRouteSL  = algorithms.PerSecond(15)
	limClientTB = algorithms.PerSecond(10).WithBurst(4)
	limGCRA     = algorithms.PerSecond(5).WithBurst(3)
	limQuota    = algorithms.PerSecond(12)
	limSlots    = algorithms.InFlight(3, 2*time.Second)
	limHotFW    = algorithms.PerSecond(30)
	limHotGCRA  = algorithms.PerSecond(50).WithBurst(25)
	hotBlocks   = redlimit.BlockConfig{Hold: 50 * time.Millisecond}
)

// ruleSets are the engines every instance builds, by name: the rules of
// each are decided together in one Decide.
func ruleSets() map[string][]redlimit.Rule {
	return map[string][]redlimit.Rule{
		// Layered: a per-route rule and a per-client rule, in two hash slots.
		"layered1": {
			{Name: "route-fw", Algorithm: algorithms.FixedWindow, Limit: limRouteFW},
			{Name: "client-sw", Algorithm: algorithms.SlidingWindow, Limit: limClientSW},
		},
		"layered2": {
			{Name: "route-sl", Algorithm: algorithms.SlidingLog, Limit: limRouteSL},
			{Name: "client-tb", Algorithm: algorithms.TokenBucket, Limit: limClientTB},
		},
		"gcra":  {{Name: "gcra", Algorithm: algorithms.GCRA, Limit: limGCRA}},
		"quota": {{Name: "quota", Algorithm: algorithms.FixedWindow, Limit: limQuota, Refundable: true}},
		"slots": {{Name: "slots", Algorithm: algorithms.Concurrency, Limit: limSlots}},
		// Hot keys answered from quota blocks (redlimit.Rule.Blocks), layered
		// in two hash slots: a fixed window's blocks are given back, a
		// GCRA's are charged as of their hold's end.
		"hot": {
			{Name: "hot-fw", Algorithm: algorithms.FixedWindow, Limit: limHotFW, Blocks: &hotBlocks},
			{Name: "hot-gcra", Algorithm: algorithms.GCRA, Limit: limHotGCRA, Blocks: &hotBlocks},
		},
	}
}

// blockRules names the workload's rules that take quota blocks.
var blockRules = func() map[string]bool {
	m := map[string]bool{}
	for _, rules := range ruleSets() {
		for _, r := range rules {
			if r.Blocks != nil {
				m[r.Name] = true
			}
		}
	}
	return m
}()

// instanceConfig is what one application instance needs to run, in
// process or as a worker process.
type instanceConfig struct {
	ID      int           `json:"id"`
	Seed    uint64        `json:"seed"`
	Prefix  string        `json:"prefix"`
	Timeout time.Duration `json:"timeout"`
	Workers int           `json:"workers"`
	Mutate  string        `json:"mutate"`
	// Replicas: the exact mode (see Options.Replicas).
	Replicas int   `json:"replicas,omitempty"`
	Base     int64 `json:"base"` // the history's Base, Unix µs
	// Instances is the fleet's size, the engines' Config.Instances.
	Instances int `json:"instances"`
}

// instance is one application instance: its client, store and engines.
type instance struct {
	cfg    instanceConfig
	client redis.UniversalClient
	// closeStore closes the store's own client (Options.StoreClient)
	closeStore func()
	engines    map[string]*redlimit.Limiter
	sharded    bool // the client is a Redis Cluster client: a call may span slots
	emit       func(Record)
	clock      func() int64 // µs since the history's base
	nextID     atomic.Int64
	crashed    atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// callTag travels in a call's context so that the decision hook can name
// the API that decided and hand back the decision's id.
type callTag struct {
	op string
	id atomic.Int64
}

type tagKey struct{}

func withTag(ctx context.Context, op string) (context.Context, *callTag) {
	t := &callTag{op: op}
	return context.WithValue(ctx, tagKey{}, t), t
}

// newInstance builds an instance over client, its store on what
// storeClient returns for it when storeClient is set (see
// Options.StoreClient). emit receives every record.
func newInstance(cfg instanceConfig, client redis.UniversalClient, storeClient func(redis.UniversalClient) (redis.Scripter, func(), error), clock func() int64, emit func(Record)) (*instance, error) {
	in := &instance{cfg: cfg, client: client, emit: emit, clock: clock, engines: map[string]*redlimit.Limiter{}}
	_, in.sharded = client.(*redis.ClusterClient)
	client.AddHook(lateSlot{})
	var sc redis.Scripter = client
	if storeClient != nil {
		c, closeFn, err := storeClient(client)
		if err != nil {
			_ = client.Close()
			return nil, err
		}
		sc, in.closeStore = c, closeFn
	}
	store, err := redisstore.New(sc, redisstore.Config{Replicas: cfg.Replicas, ReplicaTimeout: cfg.Timeout / 2, OnRefundError: in.onRefundError})
	if err != nil {
		in.close()
		return nil, err
	}
	backend := mutate(cfg.Mutate, client, store)
	// One fallback for the instance, as a service gives the engines that
	// share keys (late-x is a rule of late-c and late-d): an engine's
	// default fallback is its own, and two engines deciding one key on
	// two fallbacks would hold two shares of it, where the checker
	// (fallback-share) holds the instance to one.
	fallback, err := memstore.New(memstore.Config{})
	if err != nil {
		in.close()
		return nil, err
	}
	sets := ruleSets()
	late := lateSets()
	maps.Copy(sets, late)
	for name, rules := range sets {
		_, noDenyCache := late[name]
		e, err := redlimit.New(backend, redlimit.Config{
			Rules:           rules,
			NoDenyCache:     noDenyCache,
			Prefix:          cfg.Prefix,
			Timeout:         cfg.Timeout,
			OnError:         redlimit.Fallback,
			FallbackBackend: fallback,
			ProbeInterval:   100 * time.Millisecond,
			Instances:       cfg.Instances,
			RefundWindow:    10 * time.Second,
			OnDecision:      in.onDecision,
			Logger:          discardLogger,
		})
		if err != nil {
			in.close()
			return nil, err
		}
		in.engines[name] = e
	}
	return in, nil
}

// onDecision records every decision the engines make, Wait's and
// acquire's attempts included.
func (in *instance) onDecision(ctx context.Context, d *redlimit.Decision) {
	end := in.clock()
	r := Record{
		Kind:    KindDecision,
		Inst:    in.cfg.ID,
		ID:      in.nextID.Add(1),
		Start:   end - d.Latency.Microseconds(),
		End:     end,
		Allowed: d.Allowed,
		Outcome: outcomeOf(d),
		Rules:   ruleRecs(d),
	}
	if in.sharded {
		r.Parts = slotsOf(r.Rules)
	}
	if d.Err != nil {
		r.Err = d.Err.Error()
	}
	if dl, ok := ctx.Deadline(); ok {
		r.Deadline = end + time.Until(dl).Microseconds()
	}
	if t, ok := ctx.Value(tagKey{}).(*callTag); ok {
		r.Op = t.op
		t.id.Store(r.ID)
	}
	in.emit(r)
}

// onRefundError records a compensation (or refund) the store reported as
// failed (redisstore.Config.OnRefundError): the units it should have given
// back may stay charged.
func (in *instance) onRefundError(err error) {
	now := in.clock()
	in.emit(Record{Kind: KindRefundError, Inst: in.cfg.ID, Start: now, End: now, Err: errString(err)})
}

// slotsOf returns how many hash slots the rules' keys live in, when more
// than one: the parts of a call spanning slots on a cluster, which the
// store decides one by one and compensates (0 for one slot).
func slotsOf(rules []RuleRec) int {
	var slots []int
	for _, rr := range rules {
		if s := hashslot.Of(rr.Key); !slices.Contains(slots, s) {
			slots = append(slots, s)
		}
	}
	if len(slots) < 2 {
		return 0
	}
	return len(slots)
}

func outcomeOf(d *redlimit.Decision) string {
	switch {
	case d.Source == redlimit.SourceFallback:
		return OutFallback
	case d.Source == redlimit.SourcePrimary && d.Allowed:
		return OutAllowed
	case d.Source == redlimit.SourcePrimary:
		return OutDenied
	case d.Failed:
		return OutFailed
	case d.Allowed:
		return OutOpen
	}
	return OutDenied
}

func ruleRecs(d *redlimit.Decision) []RuleRec {
	rs := make([]RuleRec, 0, len(d.Rules))
	for _, rd := range d.Rules {
		if rd.Key == "" {
			continue
		}
		rs = append(rs, RuleRec{
			Rule:      rd.Name,
			Key:       rd.Key,
			Alg:       rd.Algorithm.String(),
			Rate:      rd.Limit.Rate,
			Period:    rd.Limit.Period.Microseconds(),
			Burst:     rd.Limit.Burst,
			Cost:      rd.Cost,
			Evaluated: rd.Evaluated,
			Allowed:   rd.Result.Allowed,
			Prov:      rd.Result.Provisional,
			Remaining: rd.Result.Remaining,
			Retry:     rd.Result.RetryAfter.Microseconds(),
			ResetIn:   rd.Result.ResetAfter.Microseconds(),
			Refund:    rd.Result.Receipt != (algorithms.Receipt{}),
			Block:     rd.FromBlock,
			Blocks:    blockRules[rd.Name],
		})
	}
	return rs
}

// start runs the instance's workers until stop or crash.
func (in *instance) start(ctx context.Context) {
	ctx, in.cancel = context.WithCancel(ctx)
	for w := range in.cfg.Workers {
		rng := rand.New(rand.NewPCG(in.cfg.Seed, uint64(in.cfg.ID)<<16|uint64(w)))
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			for ctx.Err() == nil && !in.crashed.Load() {
				in.step(ctx, rng, w)
				pause(ctx, time.Duration(1+rng.IntN(4))*time.Millisecond)
			}
		}()
	}
}

// quiesce ends the workers after their current operation, which completes
// (releases and refunds included).
func (in *instance) quiesce() {
	if in.cancel != nil {
		in.cancel()
	}
	in.wg.Wait()
}

// stop quiesces the instance and closes its engines and client.
func (in *instance) stop() {
	in.quiesce()
	in.close()
}

// crash ends the instance abruptly: the workers return without releasing
// their slots or settling their refunds, and the client is closed under
// the calls in flight.
func (in *instance) crash() {
	in.crashed.Store(true)
	if in.cancel != nil {
		in.cancel()
	}
	in.close()
	in.wg.Wait()
}

func (in *instance) close() {
	for _, e := range in.engines {
		_ = e.Close()
	}
	_ = in.client.Close()
	if in.closeStore != nil {
		in.closeStore()
	}
}

func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func pick(rng *rand.Rand, s []string) string { return s[rng.IntN(len(s))] }

// step runs one operation drawn from the workload's mix; w is the
// worker's number in its instance.
func (in *instance) step(ctx context.Context, rng *rand.Rand, w int) {
	// Operations other than Wait and acquire do not take the worker's
	// context: a stopped run lets the operation in flight finish.
	bg := context.WithoutCancel(ctx)
	switch n := rng.IntN(100); {
	case n < 18:
		in.decide(bg, "hot", "decide", []redlimit.Input{{Material: pick(rng, hkeys)}, {Material: pick(rng, jkeys)}})
	case n < 26:
		in.decide(bg, "layered1", "decide", []redlimit.Input{{Material: pick(rng, routes)}, {Material: pick(rng, clients)}})
	case n < 46:
		cost := int64(1 + rng.IntN(2))
		in.decide(bg, "layered2", "decide", []redlimit.Input{{Material: pick(rng, routes), Cost: cost}, {Material: pick(rng, clients), Cost: cost}})
	case n < 57:
		in.decide(bg, "gcra", "allow", []redlimit.Input{{Material: pick(rng, gkeys)}})
	case n < 62:
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		wctx, _ = withTag(wctx, "wait")
		_ = in.engines["gcra"].Wait(wctx, pick(rng, gkeys))
		cancel()
	case n < 73:
		in.refundable(ctx, bg, rng)
	case n < 84:
		in.slots(ctx, bg, rng)
	case n < 92:
		in.late(ctx, bg, rng, w)
	case n < 98:
		in.peek(bg, rng)
	default:
		in.reset(bg, rng)
	}
}

// decide runs one Decide on engine name and returns the decision and its id.
func (in *instance) decide(ctx context.Context, name, op string, inputs []redlimit.Input) (*redlimit.Decision, int64) {
	ctx, tag := withTag(ctx, op)
	var d redlimit.Decision
	in.engines[name].Decide(ctx, named(in.engines[name], inputs), &d)
	return &d, tag.id.Load()
}

// named names the Inputs of in after e's rules, in rule order: the
// workload writes a request's Inputs in rule order.
func named(e *redlimit.Limiter, in []redlimit.Input) []redlimit.Input {
	for i, r := range e.Rules() {
		if i < len(in) && in[i].Rule == "" {
			in[i].Rule = r.Name
		}
	}
	return in
}

// settle settles d, a decision of engine e whose one rule is refundable,
// at cost.
func settle(ctx context.Context, e *redlimit.Limiter, d *redlimit.Decision, cost int64) error {
	return e.Settle(ctx, d, redlimit.Cost{Rule: e.Rules()[0].Name, Units: cost})
}

// acquire waits for a slot of e's concurrency rule for key: Allow, and
// while the slots are taken, sleep 10ms, doubling up to 500ms (a slot is
// usually given back long before its period ends), until ctx ends.
func acquire(ctx context.Context, e *redlimit.Limiter, key string) (*redlimit.Decision, error) {
	wait := 10 * time.Millisecond
	for {
		d := e.Allow(ctx, key)
		switch {
		case d.Allowed:
			return d, nil
		case d.Failed:
			return nil, d.Err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// peekInputs and resetInputs peek at and reset the keys of chosen rules of
// an engine (see internal/bridge).
var (
	peekInputs  = bridge.PeekInputs.(func(*redlimit.Limiter, context.Context, []redlimit.Input, *redlimit.Decision))
	resetInputs = bridge.ResetInputs.(func(*redlimit.Limiter, context.Context, []redlimit.Input) error)
)

// refundable reserves 2 units of a quota, does the "work", and settles what
// it cost (0 or 1), sometimes twice (the second must give nothing back).
func (in *instance) refundable(ctx, bg context.Context, rng *rand.Rand) {
	e := in.engines["quota"]
	d, id := in.decide(bg, "quota", "decide", []redlimit.Input{{Material: pick(rng, qkeys), Cost: 2}})
	if !d.Allowed || d.Source == redlimit.SourceNone {
		return
	}
	pause(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
	if in.crashed.Load() {
		return // died before the response: the refund is never sent
	}
	cost := int64(rng.IntN(2))
	times := 1
	if rng.IntN(10) == 0 {
		times = 2
	}
	for range times {
		s := in.clock()
		err := settle(bg, e, d, cost)
		in.emit(Record{Kind: KindRefund, Inst: in.cfg.ID, Ref: id, Start: s, End: in.clock(),
			Units: []int64{2 - cost}, Result: settleResult(err), Err: errString(err)})
	}
}

func settleResult(err error) string {
	switch {
	case err == nil:
		return ResOK
	case errors.Is(err, algorithms.ErrNotRefunded):
		return ResNotRefunded
	}
	return ResError
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// slots takes a slot (Allow, or acquire which waits), holds it for a while
// and releases it.
func (in *instance) slots(ctx, bg context.Context, rng *rand.Rand) {
	key := pick(rng, ckeys)
	var d *redlimit.Decision
	var id int64
	if rng.IntN(2) == 0 {
		d, id = in.decide(bg, "slots", "allow", []redlimit.Input{{Material: key}})
	} else {
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		actx, tag := withTag(actx, "acquire")
		var err error
		d, err = acquire(actx, in.engines["slots"], key)
		cancel()
		if err != nil {
			return
		}
		id = tag.id.Load()
	}
	if !d.Allowed {
		return
	}
	pause(ctx, time.Duration(10+rng.IntN(150))*time.Millisecond)
	if in.crashed.Load() {
		return // died holding the slot: its lease brings it back
	}
	s := in.clock()
	err := in.engines["slots"].Settle(bg, d)
	res := ResOK
	if err != nil {
		res = ResError
	}
	in.emit(Record{Kind: KindRelease, Inst: in.cfg.ID, Ref: id, Start: s, End: in.clock(), Result: res, Err: errString(err)})
}

func (in *instance) peek(ctx context.Context, rng *rand.Rand) {
	name, inputs := "gcra", []redlimit.Input{{Material: pick(rng, gkeys)}}
	if rng.IntN(2) == 0 {
		name, inputs = "layered1", []redlimit.Input{{Material: pick(rng, routes)}, {Material: pick(rng, clients)}}
	}
	var d redlimit.Decision
	s := in.clock()
	peekInputs(in.engines[name], ctx, named(in.engines[name], inputs), &d)
	r := Record{Kind: KindPeek, Inst: in.cfg.ID, ID: in.nextID.Add(1), Op: "peek", Start: s, End: in.clock(),
		Allowed: d.Allowed, Outcome: outcomeOf(&d), Rules: ruleRecs(&d), Err: errString(d.Err)}
	in.emit(r)
}

// reset forgets a hot pair (quota blocks), a GCRA key, or a layered client
// key (the route's Input missing: its key is left alone).
func (in *instance) reset(ctx context.Context, rng *rand.Rand) {
	var keys []string
	var err error
	var hold int64
	s := in.clock()
	switch n := rng.IntN(4); {
	case n == 0:
		// A hot pair, whose rules take quota blocks: the fixed window moves
		// to its next epoch's key and deletes nothing (its old key is
		// closed: whoever has not learned of the reset is denied there and
		// asks the epoch, docs/leasing.md),
		// the GCRA key is deleted, and another instance may still answer
		// from a block it took before, until the block's hold is over.
		i := rng.IntN(len(hkeys))
		keys = []string{storageKey(in.cfg.Prefix, "hot-gcra", "gcra", jkeys[i])}
		hold = hotBlocks.Hold.Microseconds()
		err = resetInputs(in.engines["hot"], ctx, named(in.engines["hot"], []redlimit.Input{{Material: hkeys[i]}, {Material: jkeys[i]}}))
	case n == 1:
		m := pick(rng, gkeys)
		keys = []string{storageKey(in.cfg.Prefix, "gcra", "gcra", m)}
		err = in.engines["gcra"].Reset(ctx, m)
	default:
		m := pick(rng, clients)
		keys = []string{storageKey(in.cfg.Prefix, "client-sw", "sw", m)}
		err = resetInputs(in.engines["layered1"], ctx, named(in.engines["layered1"], []redlimit.Input{{Missing: true}, {Material: m}}))
	}
	res := ResOK
	if err != nil {
		res = ResError
	}
	in.emit(Record{Kind: KindReset, Inst: in.cfg.ID, ID: in.nextID.Add(1), Op: "reset", Start: s, End: in.clock(), Keys: keys, Hold: hold, Result: res, Err: errString(err)})
}

// storageKey is the engine's key for material under a rule (see
// redlimit.Rule.Name); the workload's materials need no sanitising.
func storageKey(prefix, rule, tag, material string) string {
	return prefix + ":" + rule + ":" + tag + ":{" + material + "}"
}

// probe decides once every key of every engine, for the lockout check, and
// releases what it takes.
func (in *instance) probe(ctx context.Context) {
	for i := range max(len(routes), len(clients)) {
		in.decide(ctx, "layered1", "probe", []redlimit.Input{{Material: routes[i%len(routes)]}, {Material: clients[i%len(clients)]}})
		in.decide(ctx, "layered2", "probe", []redlimit.Input{{Material: routes[i%len(routes)]}, {Material: clients[i%len(clients)]}})
	}
	for _, k := range gkeys {
		in.decide(ctx, "gcra", "probe", []redlimit.Input{{Material: k}})
	}
	for _, k := range qkeys {
		in.decide(ctx, "quota", "probe", []redlimit.Input{{Material: k}})
	}
	for i, k := range hkeys {
		in.decide(ctx, "hot", "probe", []redlimit.Input{{Material: k}, {Material: jkeys[i]}})
	}
	for _, k := range ckeys {
		d, _ := in.decide(ctx, "slots", "probe", []redlimit.Input{{Material: k}})
		_ = in.engines["slots"].Settle(ctx, d)
	}
}

var discardLogger = slog.New(slog.DiscardHandler)

// workloadKeys lists the storage keys the workload uses under prefix (for
// the world's slot migrations).
func workloadKeys(prefix string) []string {
	var keys []string
	for _, m := range routes {
		keys = append(keys, storageKey(prefix, "route-fw", "fw", m), storageKey(prefix, "route-sl", "sl", m))
	}
	for _, m := range clients {
		keys = append(keys, storageKey(prefix, "client-sw", "sw", m), storageKey(prefix, "client-tb", "tb", m))
	}
	for _, m := range gkeys {
		keys = append(keys, storageKey(prefix, "gcra", "gcra", m))
	}
	for _, m := range qkeys {
		keys = append(keys, storageKey(prefix, "quota", "fw", m))
	}
	for _, m := range ckeys {
		keys = append(keys, storageKey(prefix, "slots", "cc", m))
	}
	for i, m := range hkeys {
		keys = append(keys, storageKey(prefix, "hot-fw", "fw", m), storageKey(prefix, "hot-fw", "fw", m)+":epoch",
			storageKey(prefix, "hot-gcra", "gcra", jkeys[i]))
	}
	return keys
}
