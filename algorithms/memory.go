package algorithms

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const memoryShards = 64

// MemoryConfig configures a [Memory] backend. The zero value is ready to use.
type MemoryConfig struct {
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// MaxKeys bounds how many keys are kept (default 1<<20, about 100 MB at
	// worst for the constant-size algorithms). Keys whose state has expired
	// are swept first; when more live keys than MaxKeys compete, an arbitrary
	// live key is evicted and so regains full capacity. Size it above the
	// number of clients you expect within the longest Period.
	MaxKeys int
}

// Memory is an in-process [Backend] with the same semantics as [Redis]: the
// same arithmetic, field for field. It serves single-instance services,
// tests, and the middleware's fallback while Redis is unreachable.
//
// It is safe for concurrent use. Keys are spread over 64 shards, each with
// its own mutex; a call locks the shards of its keys in a fixed order, so a
// layered check is one critical section. A check on an existing key does not
// allocate.
type Memory struct {
	now       func() time.Time
	highWater atomic.Int64 // the latest now seen, µs: expiry never goes back
	perShard  int
	seed      maphash.Seed
	shards    [memoryShards]memoryShard
}

type memoryShard struct {
	mu        sync.Mutex
	keys      map[string]*state
	nextSweep int64
	_         [40]byte // keep shards on separate cache lines
}

var _ Backend = (*Memory)(nil)

// NewMemory returns a Memory backend configured by cfg.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if cfg.MaxKeys < 0 {
		return nil, &ConfigError{Field: "MemoryConfig.MaxKeys", Reason: "must be >= 0, got " + itoa(int64(cfg.MaxKeys))}
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 1 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Memory{now: cfg.Now, perShard: max(cfg.MaxKeys/memoryShards, 1), seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].keys = make(map[string]*state)
	}
	return m, nil
}

// Allow implements [Backend].
func (m *Memory) Allow(ctx context.Context, checks []Check, results []Result) error {
	var pbuf [4]prepared
	ps, err := prepareAll(checks, results, pbuf[:0])
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &BackendError{Backend: "memory", Err: err}
	}
	now := m.now().UnixMicro()
	// Like Redis TTLs, expiry follows the store's own time, which never goes
	// back: a key that expired stays expired even if the clock steps back.
	hw := m.highWater.Load()
	for now > hw && !m.highWater.CompareAndSwap(hw, now) {
		hw = m.highWater.Load()
	}
	hw = max(hw, now)

	var sbuf [4]uint8
	shards := sbuf[:0]
	for i := range checks {
		shards = append(shards, uint8(maphash.String(m.seed, checks[i].Key)%memoryShards))
	}
	if len(shards) == 1 {
		sh := &m.shards[shards[0]]
		sh.mu.Lock()
		m.decide(checks, ps, shards, results, now, hw)
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
	m.decide(checks, ps, shards, results, now, hw)
	for _, i := range order {
		m.shards[i].mu.Unlock()
	}
	return nil
}

// decide runs both phases with every involved shard locked: evaluate all
// checks, then, only if all pass, evaluate again committing. hw is the
// store's time for expiry (see Allow).
func (m *Memory) decide(checks []Check, ps []prepared, shards []uint8, results []Result, now, hw int64) {
	var (
		absent  state
		sbuf    [4]*state
		states  = sbuf[:0]
		allowed = true
	)
	for i := range checks {
		st := m.shards[shards[i]].keys[checks[i].Key]
		states = append(states, st)
		o := evalOrAbsent(st, &absent, &ps[i], now, hw)
		results[i] = o.result(ps[i].cap)
		allowed = allowed && o.allowed
	}
	if !allowed {
		// Nothing is consumed: the checks that passed report their state as
		// it is, read by evaluating a cost that can never fit.
		for i, st := range states {
			if !results[i].Allowed {
				continue
			}
			peek := ps[i]
			peek.cost = peek.cap + 1
			o := evalOrAbsent(st, &absent, &peek, now, hw)
			o.allowed = true
			results[i] = o.result(ps[i].cap)
		}
		return
	}
	for i, st := range states {
		exists := st != nil && st.expires > hw
		if !exists {
			// insert may sweep expired states, so look the key up again
			st = m.shards[shards[i]].insert(checks[i].Key, hw, m.perShard)
		}
		o := st.eval(&ps[i], now, exists, true)
		// The TTL Redis would get: reset rounded up to a millisecond.
		st.expires = hw + ceilDiv(o.reset, 1000)*1000
	}
}

// evalOrAbsent evaluates p without committing against st, or against a
// fresh state (in absent, reused) when the key has none.
func evalOrAbsent(st, absent *state, p *prepared, now, hw int64) outcome {
	if st == nil {
		*absent = state{}
		return absent.eval(p, now, false, false)
	}
	o := st.eval(p, now, st.expires > hw, false)
	if o.ttl > 0 {
		// the evaluation set the key's TTL, as the script does (a cut
		// time-debt, a denied sliding log)
		st.expires = hw + ceilDiv(o.ttl, 1000)*1000
	}
	return o
}

// insert returns the state for key, reusing an expired one, or a new one,
// sweeping expired states at most once a second and evicting an arbitrary
// live key when the shard is full of them.
func (sh *memoryShard) insert(key string, hw int64, limit int) *state {
	if st := sh.keys[key]; st != nil {
		return st
	}
	if len(sh.keys) >= limit || hw >= sh.nextSweep {
		sh.sweep(hw)
		sh.nextSweep = hw + int64(time.Second/time.Microsecond)
	}
	if len(sh.keys) >= limit {
		for k := range sh.keys {
			delete(sh.keys, k)
			break
		}
	}
	st := &state{}
	sh.keys[key] = st
	return st
}

func (sh *memoryShard) sweep(now int64) {
	for k, st := range sh.keys {
		if st.expires <= now {
			delete(sh.keys, k)
		}
	}
}

// Len returns how many keys the backend holds, expired or not.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

// prepareAll validates checks and results, returning the prepared checks in
// buf (grown only when there are more checks than buf holds).
func prepareAll(checks []Check, results []Result, buf []prepared) ([]prepared, error) {
	if len(checks) == 0 {
		return nil, &ConfigError{Field: "checks", Reason: "must not be empty"}
	}
	if len(results) < len(checks) {
		return nil, &ConfigError{Field: "results", Reason: "must hold one Result per Check, got " + itoa(int64(len(results))) + " for " + itoa(int64(len(checks)))}
	}
	for i := range checks {
		if checks[i].Key == "" {
			return nil, &ConfigError{Field: "Check.Key", Reason: "must not be empty"}
		}
		for j := range i {
			if checks[j].Key == checks[i].Key {
				return nil, &ConfigError{Field: "Check.Key", Reason: "appears twice in one call: " + quote(checks[i].Key)}
			}
		}
		p, err := prepare(&checks[i])
		if err != nil {
			return nil, err
		}
		buf = append(buf, p)
	}
	return buf, nil
}
