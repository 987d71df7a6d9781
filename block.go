package redlimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Quota blocks ("quota leasing"). A rule with Rule.Blocks set lets each
// Limiter take a block of k units of a hot key in one backend call, which
// charges them in the store exactly as k requests would, and answer up to
// k checks of that key from memory; what it has not used when the block's
// time is up, when demand stops or on Close goes back to the store, at
// most once, with a refund (algorithms.Refunder). Not to be confused with
// the leases of concurrency slots (algorithms.Lease, Limiter.Settle).
// See docs/leasing.md.

// BlockConfig turns on quota blocks for a rule (Rule.Blocks). The zero
// BlockConfig is valid: every field has a default.
type BlockConfig struct {
	// Hold is how long a block should last: k is the key's local arrival
	// rate times Hold. Default 100ms; at least 1ms, at most 10s. A block
	// not used up within 2×Hold gives the rest back; a window's block is
	// never used after its window ends. A token bucket's or GCRA's block
	// is used for Hold at most, and at most a quarter of the bucket's full
	// window (Burst/Rate), and what it has left then is not given back
	// (see algorithms.Blocker).
	Hold time.Duration

	// Share is the largest fraction of what the key has left in the store
	// (the Remaining of the last reply) one block may take, so that the
	// instances sharing a key split the end of a window between them and
	// the last units go request by request: a block of fewer than 2 units
	// is not taken. Default 0.25; above 0, at most 1.
	Share float64

	// Max caps the units of one block; 0 means the key's capacity.
	Max int64

	// MinRate is the local arrival rate, in checks of a key per second
	// seen by this Limiter, from which the key's checks are answered from
	// blocks: below it every check goes to the store, as without blocks.
	// Blocks so turn themselves on for the keys that are hot on this
	// instance and off again when they cool down (the key's last block
	// then goes back within a sweep). The rate is measured as blocks are
	// sized (over at least a quarter Hold, at most 4 Holds). 0 means no
	// threshold beyond the 2 checks a block needs (so at least 2 checks
	// per Hold, 20/s at the default Hold); it must not be negative.
	MinRate float64
}

// blockable reports whether quota blocks are exact for a: the window
// algorithms, whose units count in the window they are charged in, and
// the buckets, whose blocks are stored as if their units arrived at the
// hold's end (algorithms.Blocker).
func blockable(a algorithms.Algorithm) bool {
	return a == algorithms.FixedWindow || a == algorithms.SlidingWindow || bucketAlg(a)
}

// bucketAlg reports whether a is a bucket algorithm: its blocks are taken
// with algorithms.Blocker and never given back.
func bucketAlg(a algorithms.Algorithm) bool {
	return a == algorithms.TokenBucket || a == algorithms.GCRA
}

// compileBlocks validates r's BlockConfig and sets its defaults.
func compileBlocks(r *Rule) error {
	b := r.Blocks
	if b == nil {
		return nil
	}
	fail := func(field, reason string) error {
		return &algorithms.ConfigError{Rule: r.Name, Field: field, Reason: reason}
	}
	switch {
	case !blockable(r.Algorithm):
		return fail("Blocks", "is not exact for "+r.Algorithm.String()+": quota blocks serve fixed_window (calendar quotas included), sliding_window, token_bucket and gcra rules (see docs/leasing.md)")
	case r.Shadow:
		return fail("Blocks", "must be nil for a shadow rule")
	case r.Refundable:
		return fail("Blocks", "must be nil for a refundable rule")
	case b.Hold < 0 || b.Hold != 0 && (b.Hold < time.Millisecond || b.Hold > 10*time.Second):
		return fail("Blocks.Hold", "must be 0 (100ms) or between 1ms and 10s, got "+b.Hold.String())
	case b.Share < 0 || b.Share > 1 || math.IsNaN(b.Share):
		return fail("Blocks.Share", "must be 0 (0.25) or in (0, 1], got "+strconv.FormatFloat(b.Share, 'g', -1, 64))
	case b.Max < 0:
		return fail("Blocks.Max", "must be >= 0, got "+strconv.FormatInt(b.Max, 10))
	case b.MinRate < 0 || math.IsNaN(b.MinRate) || math.IsInf(b.MinRate, 0):
		return fail("Blocks.MinRate", "must be >= 0 checks per second, got "+strconv.FormatFloat(b.MinRate, 'g', -1, 64))
	}
	if r.Algorithm == algorithms.FixedWindow {
		// a reset closes the key it leaves with 2^39 units (see epoch.go)
		limits := []algorithms.Limit{r.Limit}
		for _, t := range r.Tiers {
			limits = append(limits, t)
		}
		for _, l := range limits {
			if l.Rate > maxEpochCapacity {
				return fail("Blocks", "needs a capacity below 2^39 for a fixed window rule (a reset closes the old key with 2^39 units), got "+l.String())
			}
		}
	}
	c := *b
	if c.Hold == 0 {
		c.Hold = 100 * time.Millisecond
	}
	if c.Share == 0 {
		c.Share = 0.25
	}
	r.Blocks = &c
	return nil
}

// checkBlocks returns a *ConfigError when r has blocks that s cannot serve.
func (s *shared) checkBlocks(r Rule) error {
	fail := func(reason string) error {
		return &algorithms.ConfigError{Rule: r.Name, Field: "Blocks", Reason: reason}
	}
	if s.shadow {
		return fail("must be nil under Config.Shadow")
	}
	if bucketAlg(r.Algorithm) {
		if _, ok := s.primary.(algorithms.Blocker); !ok {
			return fail("needs a backend that takes blocks of " + r.Algorithm.String() + " keys (an algorithms.Blocker, as memstore and redisstore are), got " + fmt.Sprintf("%T", s.primary))
		}
		return nil
	}
	if _, ok := s.primary.(algorithms.Refunder); !ok {
		return fail("needs a backend that can give units back (an algorithms.Refunder, as memstore and redisstore are), got " + fmt.Sprintf("%T", s.primary))
	}
	return nil
}

// blockRule is the quota blocks of one rule: its keys' states.
type blockRule struct {
	alg  algorithms.Algorithm
	cfg  BlockConfig
	hold int64 // ns
	bs   *blocks

	epochs bool // fixed window: the key carries an epoch (see epoch.go)
	bucket bool // token bucket, GCRA: blocks used within their hold, never given back

	keys   keyTable // see blockkeys.go
	sweeps int      // the sweeper's passes
}

// blockKey is the state of one key of a rule with blocks.
type blockKey struct {
	key   string                   // the rule's storage key (epoch 0)
	clk   *blockClock              // the blocks' clock
	gen   atomic.Uint64            // the generation of keys it was last looked up in
	cur   atomic.Pointer[epochKey] // the key of the current epoch
	slots [2]atomic.Pointer[block] // the block in use and the next one
	era   atomic.Int64             // the clock's era of the instants below

	arrivals atomic.Int64                  // requests seen, for the arrival rate
	fetching atomic.Bool                   // a block is being taken (one at a time)
	ready    atomic.Pointer[chan struct{}] // closed when that block is in

	// What the store said at the last reply (of a block or a request that
	// went to it): its Remaining, and until when (ns) that still bounds
	// what the key can give.
	remote      atomic.Int64
	remoteUntil atomic.Int64
	retryAt     atomic.Int64 // ns: no block before (after a failed call)
	deniedUntil atomic.Int64 // ns: checks denied locally before (see observe)
	denyRetry   atomic.Int64 // ns: when the store said a denied check would pass
	resets      atomic.Int64 // Limiter.Reset of the key: a block taken across one is dropped
	blockAt     atomic.Int64 // ns: when the last block arrived (0: never)
	asking      atomic.Bool  // the epoch counter is being asked (see askEpoch)
	askAt       atomic.Int64 // ns: no epoch question before

	// The fetcher's (one at a time) and the sweeper's.
	lastFetch    int64
	lastArrivals int64
	seen         int64 // arrivals at the last sweep
	idle         int   // sweeps without arrivals
}

// block is k units charged in the store, answered locally.
type block struct {
	units    atomic.Int64 // left; negative once retired
	size     int64
	era      int64 // the clock's era of the instants below: used in it only
	until    int64 // ns: used while now < until (its window's end, at the latest)
	returnAt int64 // ns: its time is up; the rest goes back
	resetAt  int64 // ns: when the key is full again (at the latest)
	refund   algorithms.Refund
	giveBack bool // its rest goes back when it ends early (windows; a bucket's never)
}

// retired is what a retired block's units hold: far below any cost.
const retired = math.MinInt64 / 2

// take takes n units of b, if it has them.
func (b *block) take(n int64) bool {
	for {
		u := b.units.Load()
		if u < n {
			return false
		}
		if b.units.CompareAndSwap(u, u-n) {
			return true
		}
	}
}

// put gives n units taken back to b; they are lost when b has been
// retired meanwhile (its rest has gone back already).
func (b *block) put(n int64) {
	for {
		u := b.units.Load()
		if u < 0 || b.units.CompareAndSwap(u, u+n) {
			return
		}
	}
}

// retire ends b and returns what it had left, once: 0 to every later call.
func (b *block) retire() int64 {
	return max(b.units.Swap(retired), 0)
}

// left returns the units b has left (0 when retired).
func (b *block) left() int64 { return max(b.units.Load(), 0) }

// blocks is the quota-block machinery an Limiter and the Engines derived
// from it share: their rules' states, the bound on fetches, the sweeper.
type blocks struct {
	blockClock
	s     *shared
	sem   chan struct{} // fetches in flight
	wg    sync.WaitGroup
	mu    sync.Mutex
	rules []*blockRule
	stop  chan struct{}
	done  chan struct{}
	close bool
	n     atomic.Int32 // rules with blocks

	sweeping sync.Mutex
}

// maxFetches bounds the blocks being taken at once, per Limiter.
const maxFetches = 64

// newBlocks returns the blocks of s on the clock now, injected when
// Config.Now was given (it may step back: see blockclock.go).
func newBlocks(s *shared, now func() time.Time, injected bool) *blocks {
	bs := &blocks{s: s, sem: make(chan struct{}, maxFetches)}
	bs.init(now, injected)
	return bs
}

// rule registers a rule with blocks and starts the sweeper with the first.
func (bs *blocks) rule(r *Rule) *blockRule {
	br := &blockRule{alg: r.Algorithm, cfg: *r.Blocks, hold: int64(r.Blocks.Hold), bs: bs,
		epochs: r.Algorithm == algorithms.FixedWindow, bucket: bucketAlg(r.Algorithm)}
	br.keys.init(&bs.blockClock)
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.rules = append(bs.rules, br)
	bs.n.Add(1)
	if bs.stop == nil && !bs.close {
		bs.stop, bs.done = make(chan struct{}), make(chan struct{})
		go bs.sweeper(bs.stop, bs.done, r.Blocks.Hold)
	}
	return br
}

// key returns the state of key, made on first use (see keyTable.get).
func (br *blockRule) key(key string, now int64) *blockKey { return br.keys.get(key, now) }

// forget drops the blocks of key without giving their units back (see
// Limiter.Reset).
func (br *blockRule) forget(key string) {
	k := br.keys.lookup(key)
	if k == nil {
		return
	}
	for i := range k.slots {
		if b := k.slots[i].Swap(nil); b != nil {
			b.retire()
		}
	}
	k.resets.Add(1)
	k.remoteUntil.Store(0)
}

// local is the units a request took from a block.
type local struct {
	b *block
	n int64
}

// leased is a check of a rule with blocks that went to the backend: its
// answer tells how much the key has left.
type leased struct {
	j   int // its index in scratch.checks
	br  *blockRule
	k   *blockKey
	era int64 // the clock's era of the check's sending
}

// observeLeased records what the primary answered for the checks of
// rules with blocks that the request sent it. A denial of a key with
// epochs asks the store, in the background, whether another instance has
// reset the key (see askEpoch).
func (bs *blocks) observeLeased(s *scratch, d *Decision, sent int64) {
	if d.Source != SourcePrimary {
		return
	}
	for _, l := range s.leased {
		c := &s.checks[l.j]
		r := &s.results[l.j]
		l.br.observe(l.k, c.Limit, r, sent, l.era, true)
		if l.br.epochs && r.Limit != 0 && !r.Allowed && r.Remaining == 0 {
			bs.askEpoch(l.br, l.k, c.Limit, sent) // maybe closed by a reset
		}
	}
}

// What takeLocal did with a check.
const (
	toStore     = iota // the check goes to the backend
	blockAllow         // answered from a block
	blockDenial        // denied locally (see blockRule.observe)
)

// takeLocal answers rule i's check c from a block of its key, if one has
// the units: it fills rd and returns blockAllow. A key whose blocks are
// empty while one is being taken waits for it (no longer than a call to
// the store would take, under the same timeout) rather than send a call
// of its own. A key the store denied a quarter Hold ago at most is denied
// locally (blockDenial). Otherwise the check goes to the backend
// (toStore), refundable so that the deny cache does not hold its denial
// until the window ends (a denial within the refund window of a block is
// Provisional); either way a block is fetched in the background when the
// key runs low.
//
// now is Decide's reading of the blocks' clock; the era is read after it
// (see blockclock.go). The key's instants ahead of now are trusted only as
// far ahead as they can lie (within): after a step back of an injected
// clock, an instant of the era before would lie further.
func (e *Limiter) takeLocal(ctx context.Context, br *blockRule, k *blockKey, c *algorithms.Check, rd *RuleDecision, s *scratch, now int64) int {
	bs := e.s.blocks
	era := bs.era.Load()
	if k.era.Load() != era {
		k.rebase(era)
	}
	k.arrivals.Add(1)
	n := max(c.Cost, 1)
	if _, key := k.epochIn(now, era); key != c.Key {
		c.Key, rd.Key = key, key
	}
	if k.take(bs, br, c, rd, s, n, now, era) {
		return blockAllow
	}
	if within(now, k.deniedUntil.Load(), br.hold/4) {
		retry := time.Duration(max(k.denyRetry.Load()-now, 1))
		rd.Evaluated = true
		rd.Result = algorithms.Result{Limit: c.Limit.Capacity(br.alg), Remaining: max(k.remote.Load(), 0), RetryAfter: retry, ResetAfter: retry}
		return blockDenial
	}
	bs.prefetch(br, k, c.Limit, now, era)
	if bs.wait(ctx, k, s) {
		t, era := bs.instant()
		if k.take(bs, br, c, rd, s, n, t, era) {
			return blockAllow
		}
		if _, key := k.epochIn(t, era); key != c.Key {
			c.Key, rd.Key = key, key // the block call found a new epoch
		}
	}
	if at := k.blockAt.Load(); !br.bucket && at != 0 && now-at < int64(refundWindow(br.cfg.Hold)) {
		// the store reports a denial within a block's refund window
		// Provisional only for a refundable check
		c.RefundWindow = refundWindow(br.cfg.Hold)
	}
	s.leased = append(s.leased, leased{j: len(s.checks), br: br, k: k, era: era})
	return toStore
}

// rebase forgets the instants k keeps of an era before era: what the store
// said of the key and until when. Its blocks and epoch carry their era and
// are not used out of it (see take, epochIn). Racing with observe, a stale
// instant may survive: takeLocal trusts none further ahead than it can lie.
func (k *blockKey) rebase(era int64) {
	old := k.era.Load()
	if old >= era || !k.era.CompareAndSwap(old, era) {
		return
	}
	k.remoteUntil.Store(0)
	k.deniedUntil.Store(0)
	k.retryAt.Store(0)
	k.askAt.Store(0)
	k.blockAt.Store(0)
}

// take answers the check c of n units from a block of k, if one has them.
// The check and rd then name the key the block charged: the epoch the
// check was built with may be older than the block's (a block call that
// found a newer epoch while the check waited for it, see takeLocal).
func (k *blockKey) take(bs *blocks, br *blockRule, c *algorithms.Check, rd *RuleDecision, s *scratch, n, now, era int64) bool {
	for i := range k.slots {
		b := k.slots[i].Load()
		if b == nil || b.era != era || now >= b.until || b.refund.Check.Limit != c.Limit || !b.take(n) {
			continue
		}
		c.Key, rd.Key = b.refund.Check.Key, b.refund.Check.Key
		s.local = append(s.local, local{b: b, n: n})
		// remote before left: a block arriving meanwhile is installed
		// before its reply is recorded, so that Remaining errs high
		remote := k.remote.Load()
		left := k.left()
		rem := min(remote+left, b.refund.Result.Limit)
		if left <= b.size/2 {
			bs.prefetch(br, k, c.Limit, now, era)
		}
		rd.Evaluated = true
		rd.FromBlock = true
		rd.Result = algorithms.Result{Allowed: true, Limit: b.refund.Result.Limit, Remaining: rem, ResetAfter: time.Duration(max(b.resetAt-now, 0))}
		return true
	}
	return false
}

// wait waits for the last block of k taken or being taken to be in, if
// there was one, and reports whether it is (or the call failed). It waits
// no later than s.deadline, which the first wait of a request sets to
// Config.Timeout from then: the waits of a request and the call to the
// primary that may follow share one Timeout (ask bounds that call by it;
// the fallback, in process, is asked as ever).
func (bs *blocks) wait(ctx context.Context, k *blockKey, s *scratch) bool {
	p := k.ready.Load()
	if p == nil {
		return false
	}
	select {
	case <-*p:
		return true // in already: no timer
	default:
	}
	var timeout <-chan time.Time
	if d := bs.s.configTimeout; d > 0 {
		if s.deadline.IsZero() {
			s.deadline = time.Now().Add(d)
		}
		t := time.NewTimer(time.Until(s.deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-*p:
		return true
	case <-ctx.Done():
	case <-timeout:
	}
	return false
}

// context is the context of a block's call or refund: Config.Timeout
// from now, none when it is negative (timeouts disabled).
func (bs *blocks) context() (context.Context, context.CancelFunc) {
	if d := bs.s.configTimeout; d > 0 {
		return context.WithTimeout(context.Background(), d)
	}
	return context.WithCancel(context.Background())
}

// left returns the units k's blocks have left.
func (k *blockKey) left() int64 {
	var n int64
	for i := range k.slots {
		if b := k.slots[i].Load(); b != nil {
			n += b.left()
		}
	}
	return n
}

// observe records what the store answered for a check of k taken at now
// (the call began at sent, in era; nothing is recorded once the clock has
// stepped back since).
//
// A check (not a block) the store denied denies the key's checks locally
// for a quarter Hold (never past the store's RetryAfter): the deny cache
// does not hold such denials (the check is refundable, see takeLocal), so
// that units other instances give back are found within a quarter Hold
// rather than when the window ends.
func (br *blockRule) observe(k *blockKey, limit algorithms.Limit, r *algorithms.Result, sent, era int64, check bool) {
	if r.Limit == 0 || br.bs.era.Load() != era {
		return
	}
	k.remote.Store(r.Remaining)
	k.remoteUntil.Store(sent + br.knownFor(limit, r))
	if check && !r.Allowed && r.RetryAfter > 0 {
		retry := sent + int64(r.RetryAfter)
		k.denyRetry.Store(retry)
		k.deniedUntil.Store(min(retry, sent+br.hold/4))
	}
}

// knownFor is how long (ns) after the call that produced r its Remaining
// still bounds what the key can give: until its window ends for a fixed
// window (a window's count only grows, but for refunds), one Hold for a
// sliding window (whose previous window's weight decays) and a bucket
// (which refills).
func (br *blockRule) knownFor(limit algorithms.Limit, r *algorithms.Result) int64 {
	if br.alg == algorithms.FixedWindow {
		d := r.ResetAfter
		if !r.Allowed && r.RetryAfter > d {
			d = r.RetryAfter
		}
		return int64(d)
	}
	return br.hold
}

// holdFor is how long (ns) a block of a key under limit lasts: Hold; for
// a bucket, at most a quarter of its full window (burst / rate), since a
// block holds the key's debt a hold ahead: a longer one would keep the
// other instances waiting for as long.
func (br *blockRule) holdFor(limit algorithms.Limit) int64 {
	if !br.bucket {
		return br.hold
	}
	full := float64(limit.Period) * float64(limit.Capacity(br.alg)) / float64(limit.Rate)
	return max(min(br.hold, int64(full/4)), int64(time.Microsecond))
}

// windowLeft is how long (ns) after the call that produced the allowed
// r its window lasts: a unit charged in a window must be used in it.
func (br *blockRule) windowLeft(limit algorithms.Limit, r *algorithms.Result) int64 {
	if br.alg == algorithms.SlidingWindow {
		// an allowed check's ResetAfter is the window's start + 2 periods
		return int64(r.ResetAfter - limit.Period)
	}
	return int64(r.ResetAfter) // the window's end
}

// size returns the units of k's next block at now, and then starts the
// arrival count of the rate afresh: the key's local arrival rate (at
// least 2 checks since the last block, over at least a quarter Hold, and
// no longer than 4 Holds) times Hold
// (not above what the window has left), capped by Share of what the store
// said it had left, Max and the key's capacity; below 2, or a rate below
// MinRate, no block.
func (br *blockRule) size(k *blockKey, limit algorithms.Limit, now int64) int64 {
	arr := k.arrivals.Load()
	n, elapsed := arr-k.lastArrivals, now-k.lastFetch
	if elapsed > 4*br.hold || elapsed < 0 {
		// a rate over a long quiet time says nothing of the burst now
		// (nor one over a clock that stepped back): measure afresh
		k.lastArrivals, k.lastFetch = arr, now
		return 0
	}
	span := br.holdFor(limit)
	elapsed = max(elapsed, span/4) // a burst at one instant is no infinite rate
	capacity := limit.Capacity(br.alg)
	remote := capacity
	if until := k.remoteUntil.Load(); now < until {
		remote = k.remote.Load()
		if br.alg == algorithms.FixedWindow {
			span = min(span, until-now)
		}
	}
	if n < 2 {
		return 0 // a key seen once since its last block is not hot
	}
	if br.cfg.MinRate > 0 && float64(n)*float64(time.Second) < br.cfg.MinRate*float64(elapsed) {
		return 0 // not hot enough: the count goes on
	}
	want := float64(n) * float64(span) / float64(elapsed)
	size := int64(min(want, float64(remote)*br.cfg.Share, float64(capacity)))
	if br.cfg.Max > 0 {
		size = min(size, br.cfg.Max)
	}
	if size < 2 {
		return 0
	}
	k.lastArrivals, k.lastFetch = arr, now
	return size
}

// prefetch starts taking a block of k in the background when k's blocks
// run low and none is being taken. now is of era.
func (bs *blocks) prefetch(br *blockRule, k *blockKey, limit algorithms.Limit, now, era int64) {
	if k.fetching.Load() || within(now, k.retryAt.Load(), br.hold) {
		return
	}
	if until := k.remoteUntil.Load(); now < until && float64(k.remote.Load())*br.cfg.Share < 2 {
		return // the key's last units go request by request
	}
	if !k.fetching.CompareAndSwap(false, true) {
		return
	}
	// sized here, by the one fetcher: a key not hot enough costs no
	// goroutine, and its checks no wait
	resets := k.resets.Load()
	n := br.size(k, limit, now)
	if n == 0 {
		k.fetching.Store(false)
		return
	}
	select {
	case bs.sem <- struct{}{}:
	default:
		k.fetching.Store(false)
		return
	}
	// pinned while fetching, before the block is in: the sweeper ends it
	if !br.keys.pin(k) {
		<-bs.sem
		k.fetching.Store(false)
		return
	}
	bs.mu.Lock()
	if bs.close {
		bs.mu.Unlock()
		<-bs.sem
		k.fetching.Store(false)
		return
	}
	bs.wg.Add(1)
	bs.mu.Unlock()
	ready := make(chan struct{})
	k.ready.Store(&ready)
	go bs.fetch(br, k, limit, n, now, era, resets, ready)
}

// refundWindow is how long after it is taken a block's rest may go back:
// 4 Holds, and at least 2s, so that a sweep late by a busy scheduler still
// gives back (the store keeps a marker per block that long).
func refundWindow(hold time.Duration) time.Duration { return max(4*hold, 2*time.Second) }

// fetch takes a block of n units of k, sized at sent (of era, no later
// than the call is sent), in one backend call and installs it. resets is
// the key's count of resets when it was sized. A block the store denies
// on a key with epochs makes it ask the store's epoch, once: on a newer
// one (another instance reset the key, and closed the old one), the block
// is taken there.
func (bs *blocks) fetch(br *blockRule, k *blockKey, limit algorithms.Limit, n, sent, era, resets int64, ready chan struct{}) {
	defer bs.wg.Done()
	defer func() { <-bs.sem }()
	defer close(ready)
	defer k.fetching.Store(false)
	s := bs.s
	ctx, cancel := bs.context()
	defer cancel()
	if br.bucket {
		bs.fetchBucket(ctx, br, k, limit, n, sent, era, resets)
		return
	}
	for try := 0; ; try++ {
		used, key := k.epochIn(sent, era)
		checks := []algorithms.Check{{Key: key, Algorithm: br.alg, Limit: limit, Cost: n, RefundWindow: refundWindow(br.cfg.Hold)}}
		results := make([]algorithms.Result, 1)
		if s.health != nil && s.health.down.Load() {
			return // blocks come from the primary only
		}
		if err := allow(ctx, s.backend, checks, results); err != nil {
			k.retryAt.Store(sent + br.hold)
			s.logError(err)
			return
		}
		r := &results[0]
		if k.resets.Load() != resets {
			return // taken across a reset of the key: maybe before it
		}
		if !r.Allowed {
			// A key a reset closed reports nothing left; one with units
			// left (fewer than the block) is not closed: no question.
			if br.epochs && try == 0 && r.Limit != 0 && r.Remaining == 0 && bs.refresh(ctx, br, k, limit, used) {
				continue
			}
			br.observe(k, limit, r, sent, era, false)
			return
		}
		b := &block{
			size:     n,
			era:      era,
			until:    sent + br.windowLeft(limit, r),
			refund:   algorithms.Refund{Check: checks[0], Result: *r},
			giveBack: true,
		}
		b.units.Store(n)
		recv, now := bs.instant()
		if now != era {
			// the clock stepped back meanwhile: the block's instants mean
			// nothing in this era; its rest goes back (to its window, if
			// the store's clock says it has not ended)
			bs.end(k, b, recv, now)
			return
		}
		b.returnAt, b.resetAt = recv+2*br.hold, recv+int64(r.ResetAfter)
		k.blockAt.Store(recv)
		old := bs.install(k, b)
		br.observe(k, limit, r, sent, era, false) // after the block is in (see take)
		if old != nil {
			bs.end(k, old, recv, era) // its rest goes back after: remote grows by it
		}
		return
	}
}

// refresh asks the store which epoch k is at, after it denied a block of
// k's epoch used, and reports whether it is a newer one, learnt.
func (bs *blocks) refresh(ctx context.Context, br *blockRule, k *blockKey, limit algorithms.Limit, used int64) bool {
	n, until, era, err := bs.s.readEpoch(ctx, k.key, limit)
	if err != nil {
		bs.s.logError(err)
		return false
	}
	return n > used && br.newer(k, n, until, era)
}

// fetchBucket takes a block of n units of k, a bucket's key, with
// algorithms.Blocker (checkBlocks made sure the primary is one) and
// installs it: it is used until its hold ends, from the instant the call
// was sent, and never given back.
func (bs *blocks) fetchBucket(ctx context.Context, br *blockRule, k *blockKey, limit algorithms.Limit, n, sent, era, resets int64) {
	s := bs.s
	if s.health != nil && s.health.down.Load() {
		return // blocks come from the primary only
	}
	hold := br.holdFor(limit)
	c := algorithms.Check{Key: k.key, Algorithm: br.alg, Limit: limit, Cost: n}
	r, err := s.primary.(algorithms.Blocker).TakeBlock(ctx, c, time.Duration(hold))
	if err != nil {
		k.retryAt.Store(sent + br.hold)
		s.logError(err)
		return
	}
	if k.resets.Load() != resets {
		return // taken across a reset of the key: maybe before it
	}
	if !r.Allowed {
		br.observe(k, limit, &r, sent, era, false)
		return
	}
	recv, now := bs.instant()
	if now != era {
		return // the clock stepped back meanwhile: never used
	}
	b := &block{
		size:     n,
		era:      era,
		until:    sent + hold,
		returnAt: sent + hold,
		resetAt:  recv + int64(r.ResetAfter),
		refund:   algorithms.Refund{Check: c, Result: r},
	}
	b.units.Store(n)
	k.blockAt.Store(recv)
	old := bs.install(k, b)
	br.observe(k, limit, &r, sent, era, false)
	if old != nil {
		old.retire()
	}
}

// install puts b in a free slot of k: an empty one, or one whose block is
// spent, over or of an era before; failing that, it takes the place of
// the block with fewer units left, which it returns: the caller ends it
// (its rest goes back) once the reply of b is recorded.
func (bs *blocks) install(k *blockKey, b *block) *block {
	now := bs.clock()
	for i := range k.slots {
		old := k.slots[i].Load()
		if (old == nil || old.left() == 0 || old.era != b.era || now >= old.until) && k.slots[i].CompareAndSwap(old, b) {
			return old
		}
	}
	victim := 0
	if a, b := k.slots[0].Load(), k.slots[1].Load(); a != nil && b != nil && b.left() < a.left() {
		victim = 1
	}
	return k.slots[victim].Swap(b)
}

// end retires b, a block of k, and gives its rest back unless its window
// has ended by now (of era): what k knows the store has left grows by as
// much. Of an era before now's, its end cannot be told from now: its
// rest goes back, and the store gives it back to its window only if that
// has not ended by the store's clock.
func (bs *blocks) end(k *blockKey, b *block, now, era int64) {
	n := b.retire()
	if n == 0 || !b.giveBack || b.era == era && now >= b.until {
		return
	}
	s := bs.s
	r, ok := s.backend.(algorithms.Refunder)
	if !ok {
		return
	}
	rf := b.refund
	rf.Units = n
	ctx, cancel := bs.context()
	defer cancel()
	err := r.Refund(ctx, []algorithms.Refund{rf})
	switch {
	case err == nil:
		k.remote.Add(n)
	case !errors.Is(err, algorithms.ErrNotRefunded):
		s.logSettleError(err)
	}
}

// sweeper gives back the blocks whose time is up, every Hold/2, and
// starts a generation of keys every rotateEvery sweeps.
func (bs *blocks) sweeper(stop, done chan struct{}, hold time.Duration) {
	defer close(done)
	t := time.NewTicker(max(hold/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			bs.sweep(false)
		}
	}
}

// sweep ends the blocks whose time is up (all of them when final), of
// the pinned keys only: O(keys holding blocks or epochs), under no lock a
// request takes. Every rotateEvery sweeps it starts a generation of keys
// (O(1) under each shard's lock: see keyTable.rotate), which forgets the keys
// not looked up in the generation before.
func (bs *blocks) sweep(final bool) {
	bs.sweeping.Lock() // one sweep at a time: seen, idle and sweeps are the sweep's
	defer bs.sweeping.Unlock()
	bs.mu.Lock()
	rules := append([]*blockRule(nil), bs.rules...)
	bs.mu.Unlock()
	now, era := bs.instant()
	var buf []*blockKey
	for _, br := range rules {
		if br.sweeps++; br.sweeps%rotateEvery == 0 && !final {
			br.keys.rotate()
		}
		buf = br.keys.pinned(buf[:0])
		for _, k := range buf {
			if h := sweepHook.Load(); h != nil {
				(*h)()
			}
			arr := k.arrivals.Load()
			if arr == k.seen {
				k.idle++
			} else {
				k.seen, k.idle = arr, 0
			}
			for i := range k.slots {
				b := k.slots[i].Load()
				if b == nil {
					continue
				}
				if final || b.era != era || now >= b.returnAt || now >= b.until || k.idle > 0 && b.left() > 0 {
					if k.slots[i].CompareAndSwap(b, nil) {
						bs.end(k, b, now, era)
					}
				}
			}
			// A key at an epoch other than 0 is kept until the epoch's
			// window ends: forgotten, it would start again at epoch 0 and
			// be denied on the old key once more after every idle spell
			// (the chaos harness's reset-ignored check).
			br.keys.unpin(k, func() bool {
				n, _ := k.epochIn(now, era)
				return n != 0 || k.left() > 0 || k.fetching.Load() || k.asking.Load()
			})
		}
		clear(buf)
	}
}

// shut stops the sweeper, waits for the blocks being taken and gives
// back every block's rest.
func (bs *blocks) shut() {
	bs.mu.Lock()
	if bs.close {
		bs.mu.Unlock()
		return
	}
	bs.close = true
	stop, done := bs.stop, bs.done
	bs.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	bs.wg.Wait()
	bs.sweep(true)
}

// giveBack returns the units the request took from blocks, for a
// request denied by another rule (all-or-nothing).
func giveBack(s *scratch) {
	for _, l := range s.local {
		l.b.put(l.n)
	}
}
