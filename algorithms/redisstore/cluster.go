package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// RefundWindow is how long after its commit a refund may give units back
// on Redis Cluster or a Ring (see the package doc, "Redis Cluster"). A
// refund that reaches its slot later gives nothing back: the units stay
// charged until the key's state expires, as when a refund fails. For as
// long, a denial of a key that such a commit charged is
// [algorithms.Result].Provisional.
const RefundWindow = 5 * time.Second

// pendingKey is the pending marker of the storage key key: set, for
// RefundWindow, by every commit of a call spanning slots.
func pendingKey(key string) string { return sibling(key, ":pending") }

// commitKey is the commit marker that the part of a call spanning slots
// whose first key is key sets when it commits, and its refund deletes; id
// names the call.
func commitKey(key, id string) string { return sibling(key, ":commit:"+id) }

// newCommitID returns a random name for the commits of one call.
func newCommitID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// sibling returns key followed by suffix, in key's hash slot: key+suffix
// when key has a hash tag (which stays the first), "{"+key+"}"+suffix when
// it is not empty and has no brace, and otherwise "{"+t+"}"+key+suffix with a tag t
// of the slot. A Ring places it with key, because it shares key's tag,
// or because the script runs on key's shard anyway.
func sibling(key, suffix string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + suffix
		}
	}
	if key != "" && !strings.ContainsAny(key, "{}") {
		return "{" + key + "}" + suffix
	}
	return "{" + slotTag(hashslot.Of(key)) + "}" + key + suffix
}

// slotTags caches slotTag's answers.
var slotTags sync.Map // int -> string

// slotTag returns the smallest decimal number whose slot is slot, found by
// trying them in turn (about 16384 tries) the first time.
func slotTag(slot int) string {
	if t, ok := slotTags.Load(slot); ok {
		return t.(string)
	}
	for i := 0; ; i++ {
		t := strconv.Itoa(i)
		if hashslot.Of(t) == slot {
			slotTags.Store(slot, t)
			return t
		}
	}
}

// sharder says where a key lives when a client spreads keys over servers.
// Two keys may be touched by one script exactly when shard returns the same
// slot and node for both.
type sharder interface {
	// shard returns key's hash slot, and the node to run the script on,
	// or nil for the client itself.
	shard(key string) (slot int, node *redis.Client, err error)

	// failed is told that a script failed, so that the client may learn
	// where the slots live now.
	failed()
}

// clusterClient is implemented by *redis.ClusterClient and by types
// embedding it; no other go-redis client has ForEachMaster.
type clusterClient interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
	ReloadState(ctx context.Context)
}

// ringClient is implemented by *redis.Ring and by types embedding it.
type ringClient interface {
	GetShardClientForKey(key string) (*redis.Client, error)
}

type clusterSharder struct{ cluster clusterClient }

func (clusterSharder) shard(key string) (int, *redis.Client, error) {
	return hashslot.Of(key), nil, nil
}

// failed asks for the slot map to be reloaded in the background (go-redis
// coalesces these requests). A master that crashed sends no MOVED, and
// go-redis otherwise reloads its map only every ClusterStateReloadInterval
// (60 s by default): without this, the slots of a crashed master would
// keep failing that long after its replica took over.
func (s clusterSharder) failed() { s.cluster.ReloadState(context.Background()) }

type ringSharder struct{ ring ringClient }

func (s ringSharder) shard(key string) (int, *redis.Client, error) {
	c, err := s.ring.GetShardClientForKey(key)
	return 0, c, err
}

// failed does nothing: a Ring watches its shards' health itself.
func (ringSharder) failed() {}

// sharderFor returns the sharder for client, or nil when every key lives on
// one server.
func sharderFor(client redis.Scripter) sharder {
	switch c := client.(type) {
	case clusterClient:
		return clusterSharder{c}
	case ringClient:
		return ringSharder{c}
	}
	return nil
}

// part is the checks of one call that live in one slot (or ring shard).
type part struct {
	slot   int
	node   *redis.Client
	idx    []int // positions in the call
	checks []algorithms.Check
	ps     []calc.Params
	res    []algorithms.Result
	now    int64  // the now the decide call used
	commit string // the commit marker its decide call set if it committed
	window int64  // the commit marker's TTL in ms
	err    error
}

func (p *part) allowed() bool {
	for i := range p.res {
		if !p.res[i].Allowed {
			return false
		}
	}
	return true
}

// allowSharded decides a call whose checks may live in several slots: one
// decide call per slot, concurrently; if any slot denies or fails, the
// slots that committed are refunded (see the package doc, "Redis
// Cluster").
func (b *Store) allowSharded(ctx context.Context, checks []algorithms.Check, ps []calc.Params, results []algorithms.Result, now int64, w time.Duration) error {
	node, one, err := b.oneShard(checks)
	if err != nil {
		return err
	}
	if one {
		// One slot: one script, atomic, as on a single node.
		if w > 0 {
			err = b.decideRefundable(ctx, node, checks, ps, results, now, w)
		} else {
			_, err = b.decide(ctx, node, checks, ps, results, now, markers{sharded: true})
		}
		if err != nil {
			b.shards.failed()
		}
		return err
	}
	parts, err := b.split(checks, ps)
	if err != nil {
		return err
	}
	// The markers of a call spanning slots serve the compensation of a
	// denied call for RefundWindow, and a refundable call's refund for w.
	window := max(windowMs(w), RefundWindow.Milliseconds())
	concurrently(len(parts), func(j int) {
		p := &parts[j]
		p.window = window
		p.now, p.err = b.decide(ctx, p.node, p.checks, p.ps, p.res, now, markers{sharded: true, commit: p.commit, window: window})
	})
	if err := b.compensate(ctx, parts); err != nil {
		return err
	}
	allowed := w > 0
	for j := range parts {
		allowed = allowed && parts[j].allowed()
	}
	if allowed { // a refundable call: its Receipts
		for j := range parts {
			receipts(parts[j].res, parts[j].commit, parts[j].now)
		}
	}
	scatter(parts, results)
	return nil
}

// oneShard reports whether every check lives in one slot (one ring shard),
// and returns the node to run their script on.
func (b *Store) oneShard(checks []algorithms.Check) (*redis.Client, bool, error) {
	slot, node, err := b.shards.shard(checks[0].Key)
	if err != nil {
		return nil, false, &algorithms.BackendError{Backend: "redis", Err: err}
	}
	for i := 1; i < len(checks); i++ {
		s, n, err := b.shards.shard(checks[i].Key)
		if err != nil {
			return nil, false, &algorithms.BackendError{Backend: "redis", Err: err}
		}
		if s != slot || n != node {
			return nil, false, nil
		}
	}
	return node, true, nil
}

// split groups checks by slot (ring shard) into parts, in the order their
// slots first appear, each with the commit marker of one call.
func (b *Store) split(checks []algorithms.Check, ps []calc.Params) ([]part, error) {
	var parts []part
	for i := range checks {
		slot, node, err := b.shards.shard(checks[i].Key)
		if err != nil {
			return nil, &algorithms.BackendError{Backend: "redis", Err: err}
		}
		j := 0
		for j < len(parts) && (parts[j].slot != slot || parts[j].node != node) {
			j++
		}
		if j == len(parts) {
			parts = append(parts, part{slot: slot, node: node})
		}
		parts[j].idx = append(parts[j].idx, i)
	}
	id := newCommitID()
	for j := range parts {
		p := &parts[j]
		p.commit = commitKey(checks[p.idx[0]].Key, id)
		p.checks = make([]algorithms.Check, len(p.idx))
		p.ps = make([]calc.Params, len(p.idx))
		p.res = make([]algorithms.Result, len(p.idx))
		for k, i := range p.idx {
			p.checks[k], p.ps[k] = checks[i], ps[i]
		}
	}
	return parts, nil
}

// compensate settles a call whose parts have been decided. If every part
// allowed, there is nothing to do, unless the caller's context ended
// meanwhile: the call is then undone as if a part had failed, and
// compensate returns the context's error. If a part denied, the parts that
// committed give their units back, concurrently, before compensate
// returns. If a part failed, nothing was decided: compensate returns its
// error, and the parts that committed give their units back in the
// background, without the caller's context, which may be what failed. A
// part that failed (its deadline ended, its connection broke) may or may
// not have committed, or may still commit: it is cancelled in the
// background (lua/cancel.lua), which gives back what it took if it
// committed and otherwise stops it from committing later. Without that, a
// Redis slow enough to hit the deadlines drains the rules of the parts
// that commit (a route rule shared by every client), for the rest of
// their windows.
func (b *Store) compensate(ctx context.Context, parts []part) error {
	var failed error
	allowed := true
	var committed []*part
	for j := range parts {
		p := &parts[j]
		switch {
		case p.err != nil:
			failed = p.err
			b.shards.failed()
		case p.allowed():
			committed = append(committed, p)
		default:
			allowed = false
		}
	}
	if failed == nil && allowed {
		if ctx.Err() == nil {
			return nil
		}
		// Every part allowed, but the caller's context ended first: the
		// caller has given up on the call (the engine stops waiting at
		// its deadline when the client does not honour it) and will
		// neither use nor settle it. The parts that committed give their
		// units back, as when a part fails.
		failed = &algorithms.BackendError{Backend: "redis", Err: context.Cause(ctx)}
	}
	if failed != nil {
		for _, p := range committed {
			b.detach(func() { b.refundDetached(ctx, p) })
		}
		for j := range parts {
			if parts[j].err != nil {
				b.detach(func() { b.cancelDetached(ctx, &parts[j]) })
			}
		}
		return failed
	}
	concurrently(len(committed), func(j int) { b.refundPart(ctx, committed[j]) })
	return nil
}

// refundPart refunds p, which committed in a call that another part
// denied, and replaces its results with its checks' state after the
// refund. A refund that fails leaves the commit's results. One that the
// caller's context ended, or that the cluster did not run, goes on in the
// background. One that ran but gave nothing back to some keys (errNotGiven)
// keeps the state it read, and is reported.
func (b *Store) refundPart(ctx context.Context, p *part) {
	res := p.res
	p.res = slices.Clone(res)
	if err := b.refund(ctx, p.node, p.checks, p.ps, p.res, p.now, p.commit); err != nil {
		if errors.Is(err, errNotGiven) {
			if b.onRefundError != nil {
				b.onRefundError(err)
			}
			return
		}
		p.res = res
		if ctx.Err() != nil || notRun(err) {
			b.detach(func() { b.refundDetached(ctx, p) })
			return
		}
		b.refundFailed(err)
	}
}

// refundTimeout bounds the refunds that run after their call returned.
const refundTimeout = 2 * time.Second

// refundDetached refunds p on a context of its own, for a call that has
// returned already.
func (b *Store) refundDetached(ctx context.Context, p *part) {
	res := slices.Clone(p.res)
	b.detached(ctx, func(ctx context.Context) error {
		return b.refund(ctx, p.node, p.checks, p.ps, res, p.now, p.commit)
	})
}

// cancelDetached runs lua/cancel.lua for p, a part whose decide call
// failed, on a context of its own. A cancel that cannot be delivered is
// reported to OnRefundError: the part's units, if it committed, stay
// charged until its keys' state ends.
func (b *Store) cancelDetached(ctx context.Context, p *part) {
	keys, args := scriptArgs(p.checks, p.ps, 0, 0, 0)
	if b.now != nil {
		args[0] = b.now().UnixMicro()
	}
	args[1] = p.window
	keys = append(keys, p.commit)
	b.detached(ctx, func(ctx context.Context) error {
		vals, err := b.run(ctx, p.node, cancelScript, keys, args)
		if err != nil {
			return err
		}
		if len(vals) < 2 || vals[0] < 0 || vals[0] > 3 || (vals[0] == 3) != (len(vals) > 2) {
			return &algorithms.BackendError{Backend: "redis", Err: fmt.Errorf("cancel script reply %v, want [0|1|2 now] or [3 now position...]", vals)}
		}
		if b.onCancel != nil {
			b.onCancel(vals[0] == 1 || vals[0] == 3)
		}
		if vals[0] == 3 {
			// it had committed: the keys named gave nothing back
			return notGiven(p.commit, keys[:len(p.checks)], vals[2:])
		}
		return nil
	})
}

// detached runs settle, a refund or cancel for a call that has returned
// already, on a context of its own bounded by refundTimeout, trying again
// while the cluster answers that it did not run the script (CLUSTERDOWN
// while a failover is under way, ...); a failure goes to OnRefundError.
func (b *Store) detached(ctx context.Context, settle func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	for {
		err := settle(ctx)
		if err == nil {
			return
		}
		if !notRun(err) || ctx.Err() != nil {
			b.refundFailed(err)
			return
		}
		b.shards.failed()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cancelScript settles a part of a call spanning slots whose outcome its
// caller never learned (see lua/cancel.lua).
var cancelScript = redis.NewScript(luaScript("cancel"))

// The pipeline sends a script's source on NOSCRIPT (see evalCmd).
func init() { sources[cancelScript] = luaScript("cancel") }

// notRun reports whether err is a reply saying that the script did not run
// and may run later: sending it again is worth it. (After a network error
// the script may have run; running a refund twice would give nothing back
// the second time, but the node is likely out of reach.)
func notRun(err error) bool {
	return redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsNoReplicasError(err)
}

func (b *Store) refundFailed(err error) {
	b.shards.failed()
	if b.onRefundError != nil {
		b.onRefundError(err)
	}
}

// concurrently runs fn(0) ... fn(n-1), fn(0) on the calling goroutine and
// the others on goroutines of their own, and waits for all.
func concurrently(n int, fn func(j int)) {
	var wg sync.WaitGroup
	for j := 1; j < n; j++ {
		wg.Go(func() { fn(j) })
	}
	if n > 0 {
		fn(0)
	}
	wg.Wait()
}

// scatter copies each part's results to their positions in the call.
func scatter(parts []part, results []algorithms.Result) {
	for j := range parts {
		for k, i := range parts[j].idx {
			results[i] = parts[j].res[k]
		}
	}
}
