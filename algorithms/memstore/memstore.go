package memstore

import (
	"context"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/internal/receipt"
	"github.com/redlimit/redlimit/internal/contract"
)

const (
	memoryShards = 64
	// memorySweepStep is how many slots one new key sweeps, at most, while a
	// sweep pass is under way; a pass starts at most once a second.
	memorySweepStep = 32
	// memorySample is how many slots are sampled to choose a key to evict.
	memorySample = 8
)

// Config configures a [Store]. The zero value is ready to use.
type Config struct {
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// MaxKeys bounds how many keys are kept; 0 means 1<<20. At the cap, a
	// new key takes the place of an expired key or of one soon back to
	// full capacity (see [Store], "Memory"). Size it above the
	// number of clients you expect within the longest Period.
	MaxKeys int
}

// Store is an in-process [algorithms.Backend] with the same semantics as
// the Redis backend, redisstore.Store. Build one with [New].
//
// The checks of a call are decided all-or-nothing in one critical section;
// a call never waits for I/O. A Store is safe for concurrent use.
//
// # Concurrency
//
// Keys are spread over 64 shards, each with its own mutex; a call locks the
// shards of its keys in a fixed order, so the checks of one call are
// decided in one critical section, all-or-nothing. A call never waits for
// I/O: the limiter puts no timeout and no deny cache in front of a Store.
//
// # Time and expiry
//
// The clock is [Config].Now (time.Now by default), in microseconds. As with
// Redis TTLs, a key expires when it is back to full capacity, by the
// store's own time, which never goes back: a key that expired stays
// expired even if the clock steps back. A token bucket or GCRA key lives a
// second longer (calc.ExpiryMargin), as redisstore's on an injected clock
// (bucket_ttl in lua/prelude.lua): a clock stepping back by up to a second
// finds its state and waits for it, and both stores decide alike. A calendar quota's windows
// ([algorithms.PerDayIn]) are computed around the same clock, in the
// quota's time zone.
//
// # Memory
//
// [Config].MaxKeys bounds the keys held. A full Store holds at most 128
// bytes per key besides the key's own bytes (a test checks this bound); a
// sliding log key also holds its log, one entry per unit up to its
// capacity. Memory, once taken, is kept for reuse rather than returned.
//
// Expired keys are swept a few at a time as new keys arrive (a pass over
// every key at most once a second). At the cap, a new key takes the place
// of an expired key if it finds one among a few sampled at random, else of
// the live key among them that would return to full capacity soonest: an
// evicted key starts again at full capacity. A call never evicts its own
// keys (so MaxKeys may be exceeded by the keys of one call). Admitting a
// new key examines a bounded number of keys, however many are held.
//
// A check on an existing key does not allocate.
type Store struct {
	carrier   // InProcess: no timeout, no deny cache in front
	now       func() time.Time
	highWater atomic.Int64 // the latest now seen, µs: expiry never goes back
	perShard  int
	seed      maphash.Seed
	shards    [memoryShards]memoryShard
	book      commitBook // the commit markers of refundable calls (refund.go)
}

// carrier holds what a Store tells the limiter about itself (in process:
// every call decided under the shards' locks, never waiting for I/O).
type carrier = contract.Carrier

// memoryShard holds its keys' states in a dense slice of slots, indexed by
// the key's 64-bit hash. Two keys with the same hash share one entry: the
// later one evicts the earlier (its slot keeps the key to tell them apart).
type memoryShard struct {
	mu        sync.Mutex
	index     map[uint64]int32 // hash of a key → its slot
	slots     []slot
	cursor    int   // the next slot the sweep examines; len(slots): no pass under way
	nextSweep int64 // µs: no sweep pass starts before
	visited   int64 // slots examined to admit new keys (tests)
	seed      maphash.Seed
	records   map[string]*refundRecord // the keys' refund records (refund.go)
	recSweep  int                      // sweep records when they reach this many
	_         [40]byte                 // keep shards on separate cache lines (128 bytes each)
}

type slot struct {
	key string
	calc.State
	expires int64 // µs; the state is absent from this instant on
	pending int64 // µs; until then a refundable commit may be given back (refund.go)
}

// New returns a Store configured by cfg.
func New(cfg Config) (*Store, error) {
	if cfg.MaxKeys < 0 {
		return nil, &algorithms.ConfigError{Field: "memstore.Config.MaxKeys", Reason: "must be >= 0, got " + strconv.Itoa(cfg.MaxKeys)}
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 1 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	perShard := min(max(cfg.MaxKeys/memoryShards, 1), math.MaxInt32-1)
	m := &Store{carrier: contract.Carry(contract.Traits{InProcess: true}), now: cfg.Now, perShard: perShard, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].index = make(map[uint64]int32)
		m.shards[i].seed = m.seed
	}
	return m, nil
}

// Allow implements [algorithms.Backend].
func (m *Store) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if err := contract.ValidateCall(checks, results); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &algorithms.BackendError{Backend: "memory", Err: err}
	}
	var pbuf [4]calc.Params
	ps := pbuf[:0]
	for i := range checks {
		c := &checks[i]
		ps = append(ps, calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost))
		if c.Algorithm == algorithms.Concurrency {
			ps[i].R = int64(c.Lease) // as redisstore sends it
			if c.Lease == 0 {
				ps[i].R = int64(contract.NewLease())
			}
		}
	}
	now := m.now().UnixMicro()
	prepareCalendars(checks, ps, now)
	hw := m.expiryTime(now)

	var (
		hbuf   [4]uint64
		sbuf   [4]uint8
		hashes = hbuf[:0]
		shards = sbuf[:0]
	)
	for i := range checks {
		h := maphash.String(m.seed, checks[i].Key)
		hashes = append(hashes, h)
		shards = append(shards, uint8(h%memoryShards))
	}
	if len(shards) == 1 {
		sh := &m.shards[shards[0]]
		sh.mu.Lock()
		m.decide(checks, ps, hashes, shards, results, now, hw)
		sh.mu.Unlock()
		return nil
	}
	var obuf [4]uint8
	order := append(obuf[:0], shards...)
	slices.Sort(order)
	order = slices.Compact(order)
	for _, i := range order {
		m.shards[i].mu.Lock()
	}
	m.decide(checks, ps, hashes, shards, results, now, hw)
	for _, i := range order {
		m.shards[i].mu.Unlock()
	}
	return nil
}

// expiryTime records now and returns the store's time for expiry, the
// latest now seen: like Redis TTLs, expiry follows the store's own time,
// which never goes back, so a key that expired stays expired even if the
// clock steps back.
func (m *Store) expiryTime(now int64) int64 {
	hw := m.highWater.Load()
	for now > hw && !m.highWater.CompareAndSwap(hw, now) {
		hw = m.highWater.Load()
	}
	return max(hw, now)
}

// decide runs both phases with every involved shard locked: evaluate all
// checks, then, only if all pass, evaluate again committing. hw is the
// store's time for expiry (see Allow).
func (m *Store) decide(checks []algorithms.Check, ps []calc.Params, hashes []uint64, shards []uint8, results []algorithms.Result, now, hw int64) {
	var (
		absent  slot
		sbuf    [4]*slot
		states  = sbuf[:0]
		allowed = true
		refund  = receipt.Window(checks) > 0
	)
	for i := range checks {
		st := m.shards[shards[i]].lookup(hashes[i], checks[i].Key)
		states = append(states, st)
		o := evalOrAbsent(st, &absent, &ps[i], now, hw)
		results[i] = result(o, ps[i].Cap)
		allowed = allowed && o.Allowed
		if !o.Allowed && refund && st != nil && st.pending > hw {
			results[i].Provisional = true
		}
	}
	if !allowed {
		// Nothing is consumed: the checks that passed report their state as
		// it is, read by evaluating a cost that can never fit.
		for i, st := range states {
			if !results[i].Allowed {
				continue
			}
			peek := ps[i]
			peek.Cost = peek.Cap + 1
			o := evalOrAbsent(st, &absent, &peek, now, hw)
			o.Allowed = true
			results[i] = result(o, ps[i].Cap)
		}
		return
	}
	for i := range checks {
		st := states[i]
		exists := st != nil && st.expires > hw
		if !exists {
			sh := &m.shards[shards[i]]
			st = sh.insert(hashes[i], checks[i].Key, hw, m.perShard, checks)
			// insert may have moved or swept other slots of the shard
			for j := i + 1; j < len(checks); j++ {
				if shards[j] == shards[i] {
					states[j] = sh.lookup(hashes[j], checks[j].Key)
				}
			}
		}
		o := st.Eval(&ps[i], now, exists, true)
		// The TTL Redis would get on an injected clock: reset rounded up
		// to a millisecond, a bucket's a second more (calc.KeyTTL).
		st.expires = hw + calc.KeyTTL(ps[i].Alg, o.Reset)
	}
	m.commitRefundable(checks, hashes, shards, results, now, hw)
}

// evalOrAbsent evaluates p without committing against st, or against a
// fresh state (in absent, reused) when the key has none.
func evalOrAbsent(st, absent *slot, p *calc.Params, now, hw int64) calc.Outcome {
	if st == nil {
		*absent = slot{}
		return absent.Eval(p, now, false, false)
	}
	o := st.Eval(p, now, st.expires > hw, false)
	if o.TTL > 0 {
		// the evaluation set the key's TTL, as the script does (a cut
		// time-debt, a denied sliding log)
		st.expires = hw + calc.KeyTTL(p.Alg, o.TTL)
	}
	return o
}

// result is the Result of an outcome under a limit of capacity.
func result(o calc.Outcome, capacity int64) algorithms.Result {
	return algorithms.Result{
		Allowed:    o.Allowed,
		Limit:      capacity,
		Remaining:  max(o.Remaining, 0),
		RetryAfter: time.Duration(o.Retry) * time.Microsecond,
		ResetAfter: time.Duration(o.Reset) * time.Microsecond,
	}
}

// lookup returns the state of key (whose hash is h), or nil. The pointer is
// valid until the next insert into the shard.
func (sh *memoryShard) lookup(h uint64, key string) *slot {
	if i, ok := sh.index[h]; ok && sh.slots[i].key == key {
		return &sh.slots[i]
	}
	return nil
}

// insert returns the state for key (whose hash is h): the one held, even if
// expired, or a new one. It sweeps at most memorySweepStep slots and, at
// the cap, evicts a key sampled by victim, never one of call's.
func (sh *memoryShard) insert(h uint64, key string, hw int64, limit int, call []algorithms.Check) *slot {
	if i, ok := sh.index[h]; ok {
		if sh.slots[i].key != key {
			// another key with the same hash: evicted
			sh.slots[i] = slot{key: key}
		}
		return &sh.slots[i]
	}
	if sh.cursor >= len(sh.slots) && hw >= sh.nextSweep {
		sh.cursor = 0
		sh.nextSweep = hw + int64(time.Second/time.Microsecond)
	}
	sh.sweep(hw)
	if len(sh.slots) >= limit {
		if i := sh.victim(hw, call); i >= 0 {
			delete(sh.index, sh.hash(i))
			sh.slots[i] = slot{key: key}
			sh.index[h] = int32(i)
			return &sh.slots[i]
		}
	}
	if len(sh.slots) == cap(sh.slots) {
		// grow by doubling up to the cap, not beyond
		grown := make([]slot, len(sh.slots), max(min(2*cap(sh.slots), limit), len(sh.slots)+1, 8))
		copy(grown, sh.slots)
		sh.slots = grown
	}
	sh.slots = append(sh.slots, slot{key: key})
	sh.index[h] = int32(len(sh.slots) - 1)
	return &sh.slots[len(sh.slots)-1]
}

// sweep advances the sweep pass under way by up to memorySweepStep slots,
// removing the expired ones.
func (sh *memoryShard) sweep(hw int64) {
	for range memorySweepStep {
		i := sh.cursor
		if i >= len(sh.slots) {
			return
		}
		sh.visited++
		if sh.slots[i].expires > hw || sh.slots[i].pending > hw {
			sh.cursor++
			continue
		}
		// the last slot, not yet examined, moves to i
		last := len(sh.slots) - 1
		delete(sh.index, sh.hash(i))
		if i != last {
			sh.slots[i] = sh.slots[last]
			sh.index[sh.hash(i)] = int32(i)
		}
		sh.slots[last] = slot{}
		sh.slots = sh.slots[:last]
	}
}

// victim returns the slot to give to a new key: among memorySample slots
// (all of them in a small shard, else chosen at random), an expired one,
// else the one that expires soonest, skipping the keys of call; -1 when
// every slot sampled holds one of them.
func (sh *memoryShard) victim(hw int64, call []algorithms.Check) int {
	n := len(sh.slots)
	best, soonest := -1, int64(math.MaxInt64)
	for k := range min(n, memorySample) {
		i := k
		if n > memorySample {
			i = rand.IntN(n)
		}
		sh.visited++
		if e := sh.slots[i].expires; e < soonest && !inCall(sh.slots[i].key, call) {
			best, soonest = i, e
			if e <= hw {
				break
			}
		}
	}
	return best
}

func inCall(key string, call []algorithms.Check) bool {
	for i := range call {
		if call[i].Key == key {
			return true
		}
	}
	return false
}

// hash returns the hash of slot i's key.
func (sh *memoryShard) hash(i int) uint64 {
	return maphash.String(sh.seed, sh.slots[i].key)
}

// Len returns how many keys the backend holds, expired or not.
func (m *Store) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.slots)
		sh.mu.Unlock()
	}
	return n
}

var _ algorithms.Blocker = (*Store)(nil)

// TakeBlock implements [algorithms.Blocker] with the arithmetic of
// lua/block.lua (calc.State.Block).
func (m *Store) TakeBlock(ctx context.Context, c algorithms.Check, hold time.Duration) (algorithms.Result, error) {
	if err := contract.ValidateBlock(c, hold); err != nil {
		return algorithms.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return algorithms.Result{}, &algorithms.BackendError{Backend: "memory", Err: err}
	}
	p := calc.Prepare(uint8(c.Algorithm), c.Limit.Rate, c.Limit.Period, c.Limit.Burst, c.Cost)
	now := m.now().UnixMicro()
	hw := m.expiryTime(now)
	h := maphash.String(m.seed, c.Key)
	sh := &m.shards[h%memoryShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.lookup(h, c.Key)
	exists := st != nil && st.expires > hw
	var fresh slot
	if st == nil {
		st = &fresh // a key is stored only once it holds state
	}
	o := st.Block(&p, now, int64(hold/time.Microsecond), exists)
	ttl := o.TTL
	if o.Allowed {
		ttl = o.Reset
	}
	if ttl > 0 {
		if st == &fresh {
			st = sh.insert(h, c.Key, hw, m.perShard, []algorithms.Check{c})
			st.State = fresh.State
		}
		st.expires = hw + calc.KeyTTL(p.Alg, ttl)
	}
	return result(o, p.Cap), nil
}
