package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/internal/receipt"
	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/lua"
)

// Config configures a [Store]. The zero value is ready to use.
type Config struct {
	// Now, when set, replaces the Redis server's clock (TIME) as the time
	// of every check. Leave it nil in production: the server's clock is the
	// one clock every application instance shares. Tests inject one. Redis
	// still expires keys on its own clock, by the TTL each check sets (the
	// time its state needs on the injected clock; a token bucket or GCRA
	// key's, a second more, so that the injected clock may step back by up
	// to a second and still find the state: see "Clocks and expiry" in
	// docs/reliability.md): an injected clock that runs slower than the
	// server's lets a key expire before its time, and a check pass that the
	// injected history refuses. Tests that stop the injected clock while
	// they run (a slow machine may take a second) use limits whose state
	// outlasts them, per hour rather than per second.
	Now func() time.Time

	// OnRefundError, when set, hears of each refund that failed on a
	// cluster or a Ring, as a *[algorithms.BackendError]: the units it
	// should have given back stay consumed until the key's state expires.
	// So does a refund or cancel that ran but gave nothing back to some
	// keys, each holding a fixed window's count on the server's clock
	// whose TTL (which names its window) was changed since the commit:
	// its error matches [algorithms.ErrKeyState] and names them.
	// It may be called concurrently, and after Allow has returned.
	//
	// The refunds and cancels that a failed call spanning slots leaves
	// to the background (see the package doc, "Redis Cluster") run at
	// most 256 at once per Store, each for up to 2 s; one more is not
	// started, and is reported here too: its units stay charged until its
	// keys' state expires (a fixed window's end; a bucket's reset).
	OnRefundError func(err error)

	// Pipelines bounds the round trips in flight at once before calls
	// queue and share a pipeline (see the package doc, "Pipelining").
	// 0 means [DefaultPipelines]; a negative value turns pipelining off.
	// At most 4096 calls queue (per Ring shard on a Ring): a call that
	// finds that many fails at once, with a *[algorithms.BackendError]
	// for the engine's error policy.
	Pipelines int

	// Replicas, when > 0, is the exact mode across failovers: a decision
	// counts only once that many replicas have it. Every script is
	// followed, in the same round trip and on the same connection, by
	// WAIT Replicas ReplicaTimeout, and a decision fewer replicas
	// acknowledged is an error ([ErrNotReplicated]) that goes to the
	// engine's error policy. Calls are not pipelined in this mode.
	//
	// What it guarantees: a decision reported allowed is on the master and
	// on Replicas replicas, so a failover that promotes one of them keeps
	// it. What it does not: a failover that promotes a replica that had
	// not acknowledged (with more replicas than Replicas, Sentinel and
	// Cluster promote the most up-to-date one they can reach, usually but
	// not always one that acknowledged); a decision that errs here may
	// still be committed on the master (it is charged, the request goes to
	// the error policy). Its cost is one more round trip of replication
	// per call (see docs/reliability.md for the measured figures).
	Replicas int

	// ReplicaTimeout bounds the WAIT of Replicas; 0 means
	// [DefaultReplicaTimeout]. Keep it below the engine's Timeout.
	ReplicaTimeout time.Duration
}

// Store is the [algorithms.Backend] of record: it decides the checks of a
// call with Lua scripts run by EVALSHA. Build one with [New] on any go-redis
// client.
//
// On a single node or a Sentinel client, a call is one script, atomic and
// all-or-nothing. On a Redis Cluster or a Ring, the checks of one hash
// slot are decided atomically, and a call spanning slots is made
// all-or-nothing by refunds: the slots that committed for a call that
// another slot denied give their units back (see the package doc, "Redis
// Cluster").
//
// A Store is safe for concurrent use.
type Store struct {
	carrier        // HonoursDeadline when the client does (honoursDeadline)
	client         redis.Scripter
	now            func() time.Time
	onRefundError  func(error)
	replicas       int           // Config.Replicas
	replicaTimeout time.Duration // with replicas
	shards         sharder       // nil: every key on one server
	proc           processor     // sends a script outside a pipeline; nil: through the Scripter (see processorFor)
	pipe           *pipeline     // nil: no pipelining on the client itself
	nodePipes      int           // on a Ring, > 0: the Pipelines of each shard's pipeline
	pipes          sync.Map      // on a Ring: a shard's *redis.Client -> its *pipeline

	// calendarNow is the clock that calendar windows are computed around
	// when the server's clock decides; nil means time.Now (tests skew it).
	calendarNow func() time.Time

	// onCancel, when set (tests), hears each cancel of a part delivered:
	// whether it gave units back.
	onCancel func(gaveBack bool)

	settling atomic.Int64 // refunds and cancels running in the background (see detach)
	dropped  atomic.Int64 // refunds and cancels not started, maxDetached running
}

// carrier holds what a Store tells the limiter about itself: whether a call
// returns by its context's deadline.
type carrier = contract.Carrier

// script (several checks, refunds) and the one-check scripts, indexed by
// Algorithm, are shared by every Store: their SHA1s are computed once.
var (
	script     = redis.NewScript(luaScript("multi"))
	oneScripts = func() (s [algorithms.Concurrency + 1]*redis.Script) {
		for _, a := range algorithms.Algorithms {
			s[a] = redis.NewScript(luaScript("one_" + a.String()))
		}
		return s
	}()
)

// luaScript returns the script package lua builds under name (each is
// checked in as docs/scripts/<name>.lua). Every name asked for here is
// one it builds: the package's variables would not initialise otherwise,
// and every test would fail.
func luaScript(name string) string {
	s, ok := lua.Script(name)
	if !ok {
		panic("redlimit: package lua builds no script " + name)
	}
	return s
}

// Script modes (ARGV[2] of lua/dispatch.lua).
const (
	modeDecide        = 0
	modeRefund        = 1
	modeDecideSharded = 2 // with pending markers
	modeDecidePart    = 3 // with pending markers and a commit marker
)

// New returns a Store using client, which may be any go-redis client:
// *redis.Client, *redis.ClusterClient, *redis.Ring, a failover (Sentinel)
// client or a redis.UniversalClient.
func New(client redis.Scripter, cfg Config) (*Store, error) {
	if client == nil {
		return nil, &algorithms.ConfigError{Field: "client", Reason: "must not be nil"}
	}
	if err := validReplicas(client, &cfg); err != nil {
		return nil, err
	}
	b := &Store{carrier: contract.Carry(contract.Traits{HonoursDeadline: honoursDeadline(client)}), client: client, now: cfg.Now, onRefundError: cfg.OnRefundError, shards: sharderFor(client)}
	max := cfg.Pipelines
	if cfg.Replicas > 0 {
		b.replicas, b.replicaTimeout = cfg.Replicas, cfg.ReplicaTimeout
		if b.replicaTimeout == 0 {
			b.replicaTimeout = DefaultReplicaTimeout
		}
		max = -1 // each script waits for its own WAIT, on its own connection
	}
	if max == 0 {
		max = DefaultPipelines
	}
	b.proc = processorFor(client)
	if c, ok := pipelinable(client); ok {
		if max > 0 {
			_, cluster := client.(*redis.ClusterClient)
			b.pipe = &pipeline{client: c, max: max, cluster: cluster}
		}
	}
	if _, ok := client.(*redis.Ring); ok && max > 0 {
		b.nodePipes = max
	}
	return b, nil
}

// Allow implements [algorithms.Backend]: one EVALSHA, or on a cluster one
// per hash slot of the checks' keys, plus one per committed slot when
// another slot denies.
func (b *Store) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if err := contract.ValidateCall(checks, results); err != nil {
		return err
	}
	var pbuf [4]calc.Params
	ps := pbuf[:0]
	for i := range checks {
		c := &checks[i]
		ps = append(ps, calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost))
		if c.Algorithm == algorithms.Concurrency {
			ps[i].R = int64(c.Lease) // the script's r (see lua/concurrency.lua)
			if c.Lease == 0 {
				ps[i].R = int64(contract.NewLease())
			}
		}
	}
	var now int64
	if b.now != nil {
		now = b.now().UnixMicro()
	}
	b.prepareCalendars(checks, ps, now)
	w := receipt.Window(checks) // > 0: a refundable call
	switch {
	case b.shards != nil:
		return b.allowSharded(ctx, checks, ps, results, now, w)
	case w > 0:
		return b.decideRefundable(ctx, nil, checks, ps, results, now, w)
	}
	_, err := b.decide(ctx, nil, checks, ps, results, now, markers{})
	return err
}

// pipelinable returns client as a batching.Batcher if the backend pipelines on
// it: a *redis.Client (Sentinel included), a cluster client, or a client
// of another library that is a batching.Batcher (rueidisclient). Not a Ring (scripts go to each
// shard's own client, which has a pipeline of its own), nor a client that
// batches already (an AutoPipeliner), nor a Pipeliner or a Tx.
func pipelinable(client redis.Scripter) (batching.Batcher, bool) {
	switch c := client.(type) {
	case *redis.Client:
		return goRedisBatcher{c}, true
	case *redis.ClusterClient:
		return goRedisBatcher{c}, true
	case batching.Batcher:
		return c, true
	}
	return nil, false
}

// run runs s on node, or on the backend's own client when node is nil,
// through the pipeline if there is one.
func (b *Store) run(ctx context.Context, node *redis.Client, s *redis.Script, keys []string, args []any) ([]int64, error) {
	var vals []int64
	var err error
	switch {
	case b.replicas > 0:
		vals, err = b.runReplicated(ctx, node, s, keys, args)
	case node != nil && b.nodePipes > 0:
		vals, err = b.nodePipe(node).run(ctx, s, keys, args)
	case node == nil && b.pipe != nil:
		vals, err = b.pipe.run(ctx, s, keys, args)
	default:
		// unpipelined, the same call a pipeline sends a lone caller's
		vals, err = b.runDirect(ctx, node, s, keys, args)
	}
	if err != nil {
		return nil, backendErr(err, keys)
	}
	return vals, nil
}

// runDirect runs s on node, or on the backend's own client when node is
// nil, outside any pipeline: through the client's processor, each script
// sent at most once (see once), or through a Scripter the store does not
// know, by its EvalSha and Eval.
func (b *Store) runDirect(ctx context.Context, node *redis.Client, s *redis.Script, keys []string, args []any) ([]int64, error) {
	switch {
	case node != nil:
		return runScript(ctx, goRedisProcessor{node}, s, keys, args)
	case b.proc != nil:
		return runScript(ctx, b.proc, s, keys, args)
	}
	return s.Run(ctx, b.client, keys, args...).Int64Slice()
}

// backendErr wraps err, the error of a script run on keys, as an
// [algorithms.BackendError]; nil for nil.
func backendErr(err error, keys []string) error {
	switch {
	case err == nil:
		return nil
	case keyState(err):
		return &algorithms.BackendError{Backend: "redis", Err: err, Keys: keys}
	}
	return &algorithms.BackendError{Backend: "redis", Err: err}
}

// nodePipe returns the pipeline of node, a Ring's shard.
func (b *Store) nodePipe(node *redis.Client) *pipeline {
	if p, ok := b.pipes.Load(node); ok {
		return p.(*pipeline)
	}
	p, _ := b.pipes.LoadOrStore(node, &pipeline{client: goRedisBatcher{node}, max: b.nodePipes})
	return p.(*pipeline)
}

// keyState reports whether err, a script's reply, concerns the state
// stored under the script's keys rather than the server
// ([algorithms.ErrKeyState]): a
// WRONGTYPE error from a command the script ran, or a Lua runtime error,
// which Redis 7 reports as "ERR user_script:12: attempt to ..." and Redis 6
// as "ERR Error running script (call to f_...): @user_script:12: attempt to
// ...". Errors of the server (OOM, BUSY, READONLY, LOADING, ...) carry
// their own upper-case code, also when a script's command meets them.
func keyState(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	if strings.HasPrefix(msg, "WRONGTYPE ") || strings.Contains(msg, ": WRONGTYPE ") {
		return true
	}
	var ok bool
	if msg, ok = strings.CutPrefix(msg, "ERR "); !ok {
		return false
	}
	if _, after, found := strings.Cut(msg, "): @"); found && strings.HasPrefix(msg, "Error running script") {
		msg = after
	}
	msg, ok = strings.CutPrefix(msg, "user_script:")
	if !ok {
		return false
	}
	i := 0
	for i < len(msg) && '0' <= msg[i] && msg[i] <= '9' {
		i++
	}
	msg, ok = strings.CutPrefix(msg[i:], ": ")
	// A Lua message starts in lower case ("attempt to ...", "bad argument
	// ..."); a server error relayed through the script starts with its code.
	return ok && i > 0 && msg != "" && 'a' <= msg[0] && msg[0] <= 'z'
}

// markers says which marker keys a decide call on a sharded client passes
// (see docs/redis-cluster.md and lua/dispatch.lua). The zero value, for
// one server, passes none.
type markers struct {
	sharded bool   // each check's pending marker
	commit  string // a part of a call spanning slots: its commit marker
	window  int64  // with commit: the refund window in ms
}

// decide runs the script in decide mode for checks, which must all live on
// one server (one hash slot on a cluster), and returns the now the script
// used.
func (b *Store) decide(ctx context.Context, node *redis.Client, checks []algorithms.Check, ps []calc.Params, results []algorithms.Result, now int64, m markers) (int64, error) {
	if len(checks) == 1 && now == 0 && m == (markers{}) && node == nil && b.replicas == 0 {
		if done, err := b.decideLean(ctx, checks[0].Key, &ps[0], &results[0]); done || err != nil {
			return 0, err
		}
	}
	s, keys, args := decideRequest(checks, ps, now, m)
	vals, err := b.run(ctx, node, s, keys, args)
	if err != nil {
		return 0, err
	}
	if now, ok := b.skewed(vals, checks, ps); ok {
		// the server's now is outside the calendar windows sent
		s, keys, args = decideRequest(checks, ps, now, m)
		if vals, err = b.run(ctx, node, s, keys, args); err != nil {
			return 0, err
		}
	}
	return decode(vals, ps, results)
}

// argsCache holds the ARGV of recent one-check calls on the server's
// clock, which depend on nothing but the check's prepared limit and cost:
// a service repeats a few, and go-redis copies ARGV when it sends a
// script, so that one read-only slice serves every call of a limit
// (saving the slice and the boxed numbers, about 100 bytes a call), and
// the same for the lean script's ARGV (lean.go). It is direct-mapped: a
// limit that meets another's slot replaces it.
var argsCache [64]atomic.Pointer[cachedArgs]

type cachedArgs struct {
	p    calc.Params
	args []any // one.lua's
	lean []any // the lean script's; nil: none for p
}

// argsFor returns the cached ARGV of p's one-check calls on the server's
// clock.
func argsFor(p *calc.Params) *cachedArgs {
	h := uint64(p.Alg) ^ uint64(p.Cap)*0x9e3779b97f4a7c15 ^ uint64(p.Period)*0xc2b2ae3d27d4eb4f ^ uint64(p.R)*0x165667b19e3779f9 ^ uint64(p.U)*0x27d4eb2f165667c5 ^ uint64(p.Cost)*0x94d049bb133111eb
	slot := &argsCache[(h^h>>29)%uint64(len(argsCache))]
	if c := slot.Load(); c != nil && c.p == *p {
		return c
	}
	c := &cachedArgs{p: *p, args: newOneArgs(p, 0), lean: newLeanArgs(p)}
	slot.Store(c)
	return c
}

// oneArgs returns the ARGV of one.lua for p at now (0: the server's
// clock), with no spare capacity: a caller appending to it gets a copy.
func oneArgs(p *calc.Params, now int64) []any {
	if now != 0 {
		return newOneArgs(p, now)
	}
	return argsFor(p).args
}

// decideRequest is the script, KEYS and ARGV that decide checks: the
// algorithm's own script for one check, the dispatch for several; with the
// marker keys m names after the checks' keys (see lua/one.lua and
// lua/dispatch.lua).
func decideRequest(checks []algorithms.Check, ps []calc.Params, now int64, m markers) (*redis.Script, []string, []any) {
	if len(checks) == 1 {
		p := &ps[0]
		args := oneArgs(p, now)
		switch {
		case m.commit != "":
			return oneScript(p.Alg), []string{checks[0].Key, pendingKey(checks[0].Key), m.commit}, append(args, m.window)
		case m.sharded:
			return oneScript(p.Alg), []string{checks[0].Key, pendingKey(checks[0].Key)}, args
		}
		return oneScript(p.Alg), []string{checks[0].Key}, args
	}
	mode, extra := modeDecide, 0
	switch {
	case m.commit != "":
		mode, extra = modeDecidePart, 1
	case m.sharded:
		mode = modeDecideSharded
	}
	keys, args := scriptArgs(checks, ps, now, mode, extra)
	if mode != modeDecide {
		for i := range checks {
			keys = append(keys, pendingKey(checks[i].Key))
		}
	}
	if mode == modeDecidePart {
		keys = append(keys, m.commit)
		args = append(args, m.window)
	}
	return script, keys, args
}

// refund runs the script in refund mode: it gives back what a decide call
// at at, which allowed every check, set the commit marker commit and
// replied results, consumed, as it stands at the store's current time (a
// bucket's refill since the commit is not given back again), and replaces
// results with the checks' state after the refund. It gives back nothing
// if commit is gone: refunded already, or older than the refund window.
func (b *Store) refund(ctx context.Context, node *redis.Client, checks []algorithms.Check, ps []calc.Params, results []algorithms.Result, at int64, commit string) error {
	var now int64
	if b.now != nil {
		now = b.now().UnixMicro()
	}
	keys, args := scriptArgs(checks, ps, now, modeRefund, len(checks)+1)
	keys = append(keys, commit)
	for i := range checks {
		args = append(args, int64(results[i].ResetAfter/time.Microsecond))
	}
	args = append(args, at)
	vals, err := b.run(ctx, node, script, keys, args)
	if err != nil {
		return err
	}
	// after the now: the checks that gave nothing back (lua/dispatch.lua)
	n := min(len(vals), 4*len(ps)+1)
	if _, err = decode(vals[:n], ps, results); err != nil || len(vals) == n {
		return err
	}
	return notGiven(commit, keys[:len(checks)], vals[n:])
}

// scriptArgs builds KEYS and ARGV of the dispatch (see lua/dispatch.lua), with room for
// extra more arguments.
func scriptArgs(checks []algorithms.Check, ps []calc.Params, now int64, mode, extra int) ([]string, []any) {
	keys := make([]string, len(checks), 2*len(checks)+1)
	args := make([]any, callArgs+checkArgs*len(checks), callArgs+checkArgs*len(checks)+extra)
	args[0], args[1] = now, mode
	for i := range checks {
		keys[i] = checks[i].Key
		putCheck(args[callArgs+checkArgs*i:], &ps[i], ps[i].Cost)
	}
	return keys, args
}

// decode checks a script reply, turns it into Results and returns the now
// the script used: 0 when a one-check script's fast path left it out (see
// lua/one.lua), which it does only for calls that do not use it.
func decode(vals []int64, ps []calc.Params, results []algorithms.Result) (int64, error) {
	now := int64(0)
	switch {
	case len(vals) == 4*len(ps)+1:
		now = vals[len(vals)-1]
	case len(vals) == 4 && len(ps) == 1:
	default:
		return 0, &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("script reply has %d values, want %d", len(vals), 4*len(ps)+1)}
	}
	for i := range ps {
		v := vals[4*i : 4*i+4]
		if v[0] < 0 || v[0] > 2 || v[2] < 0 || v[3] < 0 {
			return 0, &algorithms.BackendError{Backend: "redis", Err: errors.New("malformed script reply")}
		}
		results[i] = algorithms.Result{
			Allowed:     v[0] == 1,
			Limit:       ps[i].Cap,
			Remaining:   max(v[1], 0),
			RetryAfter:  time.Duration(v[2]) * time.Microsecond,
			ResetAfter:  time.Duration(v[3]) * time.Microsecond,
			Provisional: v[0] == 2,
		}
	}
	return now, nil
}

// honoursDeadline reports whether client returns by its context's
// deadline, which go-redis does only with ContextTimeoutEnabled set in its
// options. A client of another library of this module says so itself, with
// the contract.Traits it carries (rueidisclient.Client does).
func honoursDeadline(client redis.Scripter) bool {
	if contract.TraitsOf(client).HonoursDeadline {
		return true
	}
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}
