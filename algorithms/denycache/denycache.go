package denycache

import (
	"context"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

const (
	denyShardsMax  = 64          // shards of a Cache (fewer when MaxKeys < 64)
	denySample     = 8           // entries sampled to pick an eviction victim
	denySweepEvery = time.Second // how often a shard drops its expired entries
)

// Config configures a [Cache]. The zero value is ready to use.
type Config struct {
	// MaxKeys bounds how many denials are remembered; 0 means 65536. The
	// bound is split evenly over the shards (64, or the largest power of
	// two <= MaxKeys when it is smaller), rounded down to a multiple of
	// their number. See [Cache], "Memory and concurrency".
	MaxKeys int

	// Now is the local clock. Nil means time.Now, whose monotonic reading
	// keeps entries immune to steps of the wall clock.
	Now func() time.Time
}

// Cache is an [algorithms.Backend] that remembers final denials in process
// and answers further calls of a denied key itself, until the denial's
// RetryAfter has passed, without calling the Backend it wraps. Build one
// with [New] in front of the Backend of record.
//
// A call answered locally is denied with Results derived from the
// recorded denial (its RetryAfter counting down), and consumes nothing;
// every other call goes to the wrapped Backend. The cache never allows
// anything itself.
//
// A Cache is safe for concurrent use.
//
// # Entries
//
// When the wrapped Backend denies a check with a RetryAfter d > 0 (not a
// cost above capacity, denied with a zero RetryAfter) and not Provisional, the cache records for its
// Key: the Algorithm and Limit, the denied cost (0 counting as 1), and the
// denial's Limit, Remaining and reset instant t+ResetAfter, valid from t
// until t+d. t is the local time at which the call to the wrapped Backend
// began, so a slow round trip can only shorten an entry, never lengthen
// it.
//
// A later call is denied locally when any of its checks matches a live
// entry: same Key, same Algorithm and Limit (a changed limit, such as a
// user moving to a higher tier, bypasses the entry), a cost at least the
// denied cost and at most the capacity, at a local time now with
// t <= now < t+d (a clock that went back bypasses the entry).
//
// Each matching check's Result is Allowed false, Limit the capacity,
// Remaining as recorded, RetryAfter t+d-now (> 0) and ResetAfter the larger
// of reset-now and RetryAfter. Every other check of the call is not
// evaluated: its Result is the zero Result (Limit == 0 means "not
// evaluated"; callers writing headers skip it). Nothing is consumed
// anywhere, as when the wrapped Backend denies a call. A call answered
// locally does not look at its context; it is validated with
// [contract.ValidateCall], as every backend validates one. Any other call
// goes to the wrapped Backend unchanged, which validates it.
//
// When the wrapped Backend returns an error, Allow returns it and records
// nothing. An allowed check removes its key's entry unless the entry is
// live, under the same Algorithm and Limit, for a larger cost (which that
// check does not contradict).
//
// # Probes
//
// When an entry expires, the first call it would have decided goes to the
// wrapped Backend as the entry's probe, and the calls of that key arriving
// while the probe is under way wait for its answer, or for their context,
// whichever ends first (a context that ends fails the call with a
// *[algorithms.BackendError] whose Backend is "denycache"). If the probe is
// denied, its denial, recorded, decides them locally; if it is allowed, or
// fails, they go on as if there had been no entry, and each is decided by
// the wrapped Backend. A probe whose call to the wrapped Backend panics is
// ended too, as the panic goes on to the probe's caller: the calls waiting
// for it go on to the wrapped Backend. Many instances competing for one
// key's refills thus cost about one call each per period while their
// probes are denied.
//
// # Why a local denial is safe
//
// The denial was final, so the key cannot be allowed that cost before t+d.
// Other instances sharing the store only consume capacity; the only thing
// that gives capacity back is a refund on Redis Cluster or a Ring, which
// undoes a commit of a call spanning slots. A refund of a commit made after
// the denial gives back at most what that commit took since. A refund of a
// commit made before it gives back only within redisstore.RefundWindow of
// that commit, while the key's pending marker exists, and a denial then is
// reported Provisional and never recorded.
//
// Only durations cross from the store to the cache: the store's clock
// measures d, the local clock measures t and now. Their offsets never
// matter. If the store loses a key's state (eviction, FLUSHALL, an
// unreplicated failover), the cache may keep denying that key for at most
// the RetryAfter last reported.
//
// # Reset
//
// [Cache.Reset] resets keys in the wrapped Backend, then forgets this
// cache's entries for them: the next call of each key on this process is
// decided by the wrapped Backend at once. A call to the wrapped Backend
// that began before a Reset records no denial. Other processes' caches in
// front of the same store are not told: each may keep denying a reset key
// locally until the entry it holds expires, at most the RetryAfter the
// store last reported to it for that key, measured from the start of that
// call (the same bound as for a store that lost a key's state, above).
//
// # Memory and concurrency
//
// While the cache holds no entry, a call reads one counter and goes to the
// wrapped Backend: a service whose clients stay within their limits pays
// no lookup. Otherwise keys are spread over up to 64 shards; looking a key
// up takes its shard's read lock only, recording a denial its write lock.
// Expired entries are ignored at once, replaced or removed when the
// wrapped Backend next denies or allows their key, swept from a shard at
// most once a second (when a denial is recorded there, or, once they have
// been expired for a second, by the lookups of any key), and preferred by
// eviction. [Config].MaxKeys bounds the entries; a shard
// full of live entries evicts the entry expiring soonest among 8 it
// samples at random. An evicted denial only costs one more call to the
// wrapped Backend.
//
// Allocations (tests check them): a call whose keys are not cached adds
// none to the wrapped Backend's; a call of up to 4 checks answered locally
// makes none; recording a new denial may allocate.
type Cache struct {
	carrier  // CachesDenials; HonoursDeadline as next
	next     algorithms.Backend
	now      func() time.Time
	epoch    time.Time // instants are kept as durations since epoch
	seed     maphash.Seed
	mask     uint64
	perShard int
	shards   []denyShard
	held     atomic.Int64  // entries in every shard, live or not: 0 lets calls skip the lookups
	cursor   atomic.Uint64 // the shard the next lookup may tidy
	resets   atomic.Uint64 // keys forgotten by Reset: a call that began before one records nothing
}

type denyShard struct {
	mu        sync.RWMutex
	entries   map[string]denial
	nextSweep atomic.Int64  // a time.Duration: no sweep of this shard before
	local     atomic.Uint64 // calls answered locally whose first hit is here
	_         [64]byte      // keep shards on separate cache lines
}

// denial is one remembered denial. Instants are durations since the cache's
// epoch on its local clock.
type denial struct {
	limit     algorithms.Limit
	cost      int64 // the denied cost, >= 1
	capacity  int64
	remaining int64
	at        time.Duration // when the call to next began
	until     time.Duration // at + RetryAfter
	reset     time.Duration // at + ResetAfter
	alg       algorithms.Algorithm
	probe     *probe // the call asking next about this key since it expired
}

// probe is a call to next on behalf of the expired denial of key; done is
// closed when its answer has been recorded.
type probe struct {
	key  string
	done chan struct{}
}

// carrier holds what a Cache tells the limiter about itself: it caches
// denials (no second deny cache in front), and returns by its context's
// deadline when the Backend behind it does (local answers never wait; a
// call waiting for another call's probe returns when its context ends).
type carrier = contract.Carrier

// New returns a Cache in front of next, configured by cfg.
func New(next algorithms.Backend, cfg Config) (*Cache, error) {
	if next == nil {
		return nil, &algorithms.ConfigError{Field: "next", Reason: "must not be nil"}
	}
	if cfg.MaxKeys < 0 {
		return nil, &algorithms.ConfigError{Field: "denycache.Config.MaxKeys", Reason: "must be >= 0, got " + strconv.Itoa(cfg.MaxKeys)}
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 1 << 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := denyShardsMax
	for n > cfg.MaxKeys {
		n /= 2
	}
	d := &Cache{
		carrier:  contract.Carry(contract.Traits{CachesDenials: true, HonoursDeadline: contract.TraitsOf(next).HonoursDeadline}),
		next:     next,
		now:      cfg.Now,
		epoch:    cfg.Now(),
		seed:     maphash.MakeSeed(),
		mask:     uint64(n - 1),
		perShard: cfg.MaxKeys / n,
		shards:   make([]denyShard, n),
	}
	for i := range d.shards {
		d.shards[i].entries = make(map[string]denial)
		d.shards[i].nextSweep.Store(math.MinInt64)
	}
	return d, nil
}

// Allow implements [algorithms.Backend]: it answers locally when a check
// matches a remembered denial, and passes the call to the wrapped Backend
// otherwise (see [Cache]).
func (d *Cache) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	var seen seenSet
	for {
		now := d.now().Sub(d.epoch)
		if d.held.Load() == 0 {
			// Nothing is remembered: no key to look up, no probe to wait for.
			return d.ask(ctx, checks, results, now, nil, &seen)
		}
		d.tidy(now)
		s, err := d.lookup(checks, results, now, &seen)
		switch {
		case err != nil:
			d.release(s.claimed)
			return err
		case s.first >= 0:
			d.release(s.claimed)
			d.shard(checks[s.first].Key).local.Add(1)
			return nil
		case s.waitFor == nil:
			return d.ask(ctx, checks, results, now, s.claimed, &seen)
		}
		// Another call is asking next about an expired denial of this
		// call: its answer decides this call too, or lets it through.
		select {
		case <-s.waitFor.done:
		case <-ctx.Done():
			return &algorithms.BackendError{Backend: "denycache", Err: ctx.Err()}
		}
		seen.reset()
	}
}

// scan is what looking up the entries of a call's checks found.
type scan struct {
	first   int    // the first check answered locally, or -1
	waitFor *probe // a probe under way for an expired entry of the call
	claimed *probe // the probe this call makes
}

// lookup looks up the entry of each check at now. When one matches, the
// call is answered locally: lookup validates it, writes every Result (the
// matching checks' from their entries, zero for the others) and returns
// first >= 0. Until then it marks in seen the checks that have an entry,
// and makes the call the probe of the first expired entry that would have
// decided its check, or notes the probe another call is making for it.
func (d *Cache) lookup(checks []algorithms.Check, results []algorithms.Result, now time.Duration, seen *seenSet) (scan, error) {
	s := scan{first: -1}
	for i := range checks {
		c := &checks[i]
		sh := d.shard(c.Key)
		sh.mu.RLock()
		e, ok := sh.entries[c.Key]
		sh.mu.RUnlock()
		hit := ok && e.matches(c, now)
		if s.first < 0 {
			if !ok {
				continue
			}
			seen.add(i, len(checks))
			if !hit {
				s.watch(d, &e, c, now)
				continue
			}
			if err := validateHit(checks, results); err != nil {
				return s, err
			}
			clear(results[:i])
			s.first = i
		}
		if hit {
			results[i] = e.result(now)
		} else {
			results[i] = algorithms.Result{}
		}
	}
	return s, nil
}

// watch makes the call the probe of e, the entry of c, if e has expired at
// now and would otherwise have decided c, or notes the probe another call
// is making for it. Only the first such entry of a call is watched.
func (s *scan) watch(d *Cache, e *denial, c *algorithms.Check, now time.Duration) {
	if s.waitFor != nil || s.claimed != nil || !e.expiredFor(c, now) {
		return
	}
	if p, mine := d.claim(c.Key, now); mine {
		s.claimed = p
	} else {
		s.waitFor = p
	}
}

// validateHit validates a call that a remembered denial answers. A lone
// check that hits is valid: its entry was recorded from a call next
// accepted, with the same Key, Algorithm and Limit and a cost in
// 1..capacity. Other calls are validated in full.
func validateHit(checks []algorithms.Check, results []algorithms.Result) error {
	if len(checks) > 1 || len(results) == 0 {
		return contract.ValidateCall(checks, results)
	}
	return nil
}

// ask passes the call, which began at now, to next, learns from its
// answer, and then ends the probe claimed, if the call makes one: also
// when next panics (the panic goes on to the caller), so that the calls
// waiting for the probe go on rather than wait for it forever.
func (d *Cache) ask(ctx context.Context, checks []algorithms.Check, results []algorithms.Result, now time.Duration, claimed *probe, seen *seenSet) error {
	defer d.release(claimed)
	gen := d.resets.Load()
	err := d.next.Allow(ctx, checks, results)
	if err == nil {
		d.learn(checks, results, now, seen, gen)
	}
	return err
}

// learn records the final denials of a call to next that began at now,
// when gen was d.resets, and forgets the entries, among those seen, of the
// checks it allowed.
func (d *Cache) learn(checks []algorithms.Check, results []algorithms.Result, now time.Duration, seen *seenSet, gen uint64) {
	for i := range min(len(checks), len(results)) {
		c, r := &checks[i], &results[i]
		switch {
		case !r.Allowed && r.RetryAfter > 0 && !r.Provisional && c.Algorithm != algorithms.Concurrency:
			// A concurrency denial is not remembered: its RetryAfter is
			// when a lease expires, and a release may free a slot at
			// any moment before.
			d.record(c, r, now, gen)
		case r.Allowed && seen.has(i):
			d.forget(c, now)
		}
	}
}

// seenSet holds which checks of a call have an entry, live or not. It
// allocates only when a check past the fourth has one.
type seenSet struct {
	small [4]bool
	more  []bool // checks 4 and beyond
}

// add marks check i of a call of n checks.
func (s *seenSet) add(i, n int) {
	if i < len(s.small) {
		s.small[i] = true
		return
	}
	if s.more == nil {
		s.more = make([]bool, n-len(s.small))
	}
	s.more[i-len(s.small)] = true
}

// has reports whether check i is marked.
func (s *seenSet) has(i int) bool {
	if i < len(s.small) {
		return s.small[i]
	}
	return s.more != nil && s.more[i-len(s.small)]
}

// reset unmarks every check.
func (s *seenSet) reset() {
	s.small = [4]bool{}
	clear(s.more)
}

// LocalDenials returns how many calls d has denied locally, without calling
// the wrapped Backend, since it was created.
func (d *Cache) LocalDenials() uint64 {
	var n uint64
	for i := range d.shards {
		n += d.shards[i].local.Load()
	}
	return n
}

func (d *Cache) shard(key string) *denyShard {
	return &d.shards[maphash.String(d.seed, key)&d.mask]
}

// matches reports whether e, looked up by c's key, decides c at now.
func (e *denial) matches(c *algorithms.Check, now time.Duration) bool {
	return e.at <= now && now < e.until && e.covers(c)
}

// expiredFor reports whether e would decide c if it had not expired at now.
func (e *denial) expiredFor(c *algorithms.Check, now time.Duration) bool {
	return e.at <= now && now >= e.until && e.covers(c)
}

// covers reports whether e, looked up by c's key, is about c: the same
// Algorithm and Limit, and a cost at least the denied one and at most the
// capacity.
func (e *denial) covers(c *algorithms.Check) bool {
	cost := c.Cost // a negative cost matches nothing: next rejects it
	if cost == 0 {
		cost = 1
	}
	return c.Algorithm == e.alg && c.Limit == e.limit && cost >= e.cost && cost <= e.capacity
}

// claim makes the caller the probe of key's expired entry (mine true), or
// returns the probe another call is making already. It returns nil, false
// if the entry has changed since the caller read it: the caller then goes
// on as it would have without an entry.
func (d *Cache) claim(key string, now time.Duration) (p *probe, mine bool) {
	sh := d.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.entries[key]
	switch {
	case !ok || now < e.until:
		return nil, false
	case e.probe != nil:
		return e.probe, false
	}
	e.probe = &probe{key: key, done: make(chan struct{})}
	sh.entries[key] = e
	return e.probe, true
}

// release ends probe p: its key's entry, if the call did not replace or
// remove it, forgets p, and the calls waiting for p go on. A nil p is no
// probe.
func (d *Cache) release(p *probe) {
	if p == nil {
		return
	}
	sh := d.shard(p.key)
	sh.mu.Lock()
	if e, ok := sh.entries[p.key]; ok && e.probe == p {
		e.probe = nil
		sh.entries[p.key] = e
	}
	sh.mu.Unlock()
	close(p.done)
}

func (e *denial) result(now time.Duration) algorithms.Result {
	retry := e.until - now
	return algorithms.Result{
		Limit:      e.capacity,
		Remaining:  e.remaining,
		RetryAfter: retry,
		ResetAfter: max(e.reset-now, retry),
		Local:      true,
	}
}

// record remembers that r denied c in a call to next that began at now,
// when gen was d.resets, unless Reset has forgotten a key since: the call
// may have been decided before the reset.
func (d *Cache) record(c *algorithms.Check, r *algorithms.Result, now time.Duration, gen uint64) {
	e := denial{
		limit:     c.Limit,
		cost:      max(c.Cost, 1),
		capacity:  c.Limit.Capacity(c.Algorithm),
		remaining: r.Remaining,
		at:        now,
		until:     now + r.RetryAfter,
		reset:     now + r.ResetAfter,
		alg:       c.Algorithm,
	}
	sh := d.shard(c.Key)
	sh.mu.Lock()
	if d.resets.Load() != gen {
		sh.mu.Unlock()
		return
	}
	n := len(sh.entries)
	if now >= time.Duration(sh.nextSweep.Load()) {
		sh.sweep(now)
		sh.nextSweep.Store(int64(now + denySweepEvery))
	}
	if _, ok := sh.entries[c.Key]; !ok && len(sh.entries) >= d.perShard {
		sh.evict()
	}
	sh.entries[c.Key] = e
	d.held.Add(int64(len(sh.entries) - n))
	sh.mu.Unlock()
}

// forget removes c's entry after next allowed c at now, unless the entry
// still holds: live, same limit, for a larger cost than c's.
func (d *Cache) forget(c *algorithms.Check, now time.Duration) {
	sh := d.shard(c.Key)
	sh.mu.Lock()
	if e, ok := sh.entries[c.Key]; ok {
		live := e.at <= now && now < e.until && c.Algorithm == e.alg && c.Limit == e.limit
		if !live || max(c.Cost, 1) >= e.cost {
			delete(sh.entries, c.Key)
			d.held.Add(-1)
		}
	}
	sh.mu.Unlock()
}

// tidy sweeps one shard, in turn, of the entries that expired more than
// denySweepEvery ago, at most once per denySweepEvery per shard: when
// nothing is denied any more, the cache empties and lookups stop (see
// Allow), even if no denial is ever recorded again. Entries that expired
// just now stay for their probes.
func (d *Cache) tidy(now time.Duration) {
	sh := &d.shards[d.cursor.Add(1)&d.mask]
	if now < time.Duration(sh.nextSweep.Load()) {
		return
	}
	sh.mu.Lock()
	if next := time.Duration(sh.nextSweep.Load()); now >= next {
		n := len(sh.entries)
		sh.sweep(now - denySweepEvery)
		sh.nextSweep.Store(int64(now + denySweepEvery))
		d.held.Add(int64(len(sh.entries) - n))
	}
	sh.mu.Unlock()
}

func (sh *denyShard) sweep(now time.Duration) {
	for k, e := range sh.entries {
		if e.until <= now {
			delete(sh.entries, k)
		}
	}
}

// evict removes the entry expiring soonest among a few at a random place of
// the map (Go randomises where iteration starts).
func (sh *denyShard) evict() {
	var (
		victim string
		soon   time.Duration = math.MaxInt64
		n      int
	)
	for k, e := range sh.entries {
		if e.until < soon {
			victim, soon = k, e.until
		}
		if n++; n == denySample {
			break
		}
	}
	delete(sh.entries, victim)
}

// Len returns how many denials d holds: those still denying and those
// expired but not yet swept (see the package doc, "Memory and
// concurrency"). A gauge for an admin page or metrics.
func (d *Cache) Len() int { return int(d.held.Load()) }
