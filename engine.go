package redlimit

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
)

// Config configures an [Limiter]. Only Rules is required.
type Config struct {
	// Rules are decided together for every request, in one backend call.
	Rules []Rule

	// Prefix starts every storage key:
	// "<Prefix>:<rule>:<algorithm tag>:{<key material>}" (see Rule.Name).
	// Default "rate". No braces, no spaces.
	Prefix string

	// Timeout bounds each backend call (default 100ms; negative disables).
	// The call gets a context with this deadline, and Decide stops waiting
	// at the deadline even when the backend ignores it: the call runs in a
	// goroutine of its own, and a late one finishes in the background, its
	// answer dropped. Past 1024 such calls still running (per Limiter and
	// the Engines derived from it), calls fail at once. A redisstore
	// whose client honours deadlines is called directly, without the
	// goroutine; a memstore gets no timeout at all: it cannot block.
	Timeout time.Duration

	// NoDenyCache turns off the local deny cache. By default a backend
	// other than a memstore or a [denycache.Cache] is wrapped in a [denycache.Cache]: a key
	// denied with RetryAfter d is denied locally, without a backend call,
	// until d has passed. Engines derived with With share it.
	NoDenyCache bool

	// DenyCache sizes the deny cache.
	DenyCache denycache.Config

	// OnError is the error policy (default Fallback).
	OnError ErrorPolicy

	// FallbackBackend decides while the primary is down under the Fallback
	// policy. Default: a memstore.Store shared by every Limiter of the
	// process built on the same backend value (and those derived with
	// With), so that a key several of them decide is held to the
	// instance's share once; dropped when the last of them is closed
	// (see docs/failure-policies.md).
	FallbackBackend algorithms.Backend

	// FallbackAfter is how long, under the Fallback policy, the primary
	// must fail every call before this instance switches to its fallback
	// (default 1s): from a first failure, with no call the primary allowed
	// and no probe answered since. One slow call, or a stall shorter than
	// FallbackAfter, does not switch: each request whose call failed
	// meanwhile is refused undecided (Decision.Failed), never admitted by
	// the fallback. See ErrorPolicy Fallback and docs/failure-policies.md.
	FallbackAfter time.Duration

	// ProbeInterval is how often, under the Fallback policy, a background
	// probe checks whether the primary is back once the instance is on its
	// fallback (default 1s). During a run of failures shorter than
	// FallbackAfter it probes every FallbackAfter/4 (never less often than
	// ProbeInterval).
	ProbeInterval time.Duration

	// Instances is how many instances (processes) share the limits, for
	// the Fallback policy: while on its fallback, each instance enforces
	// 1/Instances of every limit (rate and burst divided by Instances,
	// rounded down, at least 1), so that the fleet's fallbacks together
	// admit at most the limit (at most Instances units per window when
	// the limit is smaller). 0 (the default) means unknown: each fallback
	// enforces the whole limit, and a fleet of N instances admits up to N
	// times the limit during an outage. Give the number of instances you
	// run, or the largest a deploy reaches (more instances than
	// configured admit more; fewer admit less).
	Instances int

	// Shadow puts every rule in shadow mode: decide, report, never deny.
	Shadow bool

	// OnDecision, when set, is called with every decision Decide makes,
	// before it returns. The Decision is valid only during the call (copy
	// what you keep, see Decision.Clone).
	OnDecision func(context.Context, *Decision)

	// Sleep is how Wait waits: it returns after d, or earlier with the
	// context's error when ctx ends. Default: a time.Timer. Tests and
	// examples that run the backend on an injected clock give one that
	// advances that clock.
	Sleep func(ctx context.Context, d time.Duration) error

	// RefundWindow is how long after a decision its refundable rules'
	// charges may be given back (Rule.Refundable; see Limiter.Settle):
	// default 1 minute, at most 24 hours. A refund after it gives nothing
	// back. The store keeps a marker per key charged by a refundable rule
	// for that long (see algorithms.Check.RefundWindow).
	RefundWindow time.Duration

	// Now is the clock of quota blocks (Rule.Blocks): their holding time
	// and their window's end, measured from the instant a block was
	// taken. The HTTP middleware reads it too, as the wall clock of its
	// epoch X-RateLimit-Reset header (decisions use the backend's
	// clock). Default time.Now, whose monotonic reading ignores steps of
	// the wall clock. An injected clock that steps back makes the blocks
	// and epochs taken before the step unusable (their rest goes back):
	// no block is used past its window (docs/leasing.md, "A clock that
	// steps back"). Tests that run the backend on an injected clock give
	// the same one here (and to DenyCache.Now).
	Now func() time.Time

	// Logger receives backend errors (Warn, at most one line a second),
	// fallback switches (Warn/Info) and, at Debug, every decision; and the
	// HTTP middleware's on this Limiter (a full queue of work after
	// responses, errors after responses, a hook's panic). Default
	// slog.Default().
	Logger *slog.Logger
}

// maxInstances bounds Config.Instances.
const maxInstances = 1 << 20

// Limiter decides requests by its rules: given the key material of each
// rule, it asks its backend about all of them in one call, under a
// timeout, and applies the error policy, the fallback, the deny cache and
// shadow mode. It knows nothing of HTTP. Build it with [New]; it is safe
// for concurrent use. Close it when done to stop a fallback probe.
type Limiter struct {
	s     *shared
	rules []compiled
	pool  sync.Pool // *scratch
}

// shared is what an Limiter and those derived from it with With share.
type shared struct {
	backend       algorithms.Backend // the primary, wrapped in the deny cache
	fallback      algorithms.Backend // nil unless the policy is Fallback
	health        *health            // nil unless the policy is Fallback
	timeout       time.Duration      // per call; negative: none (in-process backend)
	configTimeout time.Duration      // Config.Timeout after defaults, for the probe
	inline        bool               // the backend honours deadlines: no goroutine per call
	prefix        string
	peekKeys      *keyCache // "<prefix>:_peek:{<material>}", see Peek
	policy        ErrorPolicy
	probeInterval time.Duration
	instances     int64 // Config.Instances: the fallback enforces 1/instances of each limit
	shadow        bool
	onDecision    func(context.Context, *Decision)
	sleep         func(context.Context, time.Duration) error
	refundWindow  time.Duration // of the checks of refundable rules
	logger        *slog.Logger
	now           func() time.Time   // Config.Now after defaults
	injectedNow   bool               // Config.Now was given
	errLog        throttle           // of the lines of undecided requests
	stalled       atomic.Int64       // abandoned backend calls still running (see bounded)
	abandoned     atomic.Int64       // releases of failed calls' leases running (releaseAbandoned)
	settleLog     throttle           // of the lines of settle errors
	primary       algorithms.Backend // the backend given to New, unwrapped
	blocks        *blocks            // quota blocks of the rules with Rule.Blocks

	// releaseFallback lets go of the default fallback shared with the
	// other Engines on the same primary (defaultFallback); nil when
	// Config.FallbackBackend was given
	releaseFallback func()
}

// scratch is the per-call working memory, pooled.
type scratch struct {
	checks  []algorithms.Check
	results []algorithms.Result
	index   []int    // rule index of each check
	in      []Input  // the call's Inputs in rule order (see order)
	named   []bool   // which rules an Input named (see order)
	local   []local  // units taken from quota blocks
	leased  []leased // checks of rules with blocks sent to the backend
	// deadline, when not zero, is Config.Timeout after the request first
	// waited for a quota block: the wait and the backend call that may
	// follow share that one Timeout.
	deadline time.Time
}

// New returns an Limiter deciding with backend, configured by cfg. Invalid
// configuration is an *[algorithms.ConfigError] naming the rule and field,
// for example
//
//	redlimit: rule "login": Limit.Burst must be >= 0, got -1
func New(backend algorithms.Backend, cfg Config) (*Limiter, error) {
	if backend == nil {
		return nil, &algorithms.ConfigError{Field: "backend", Reason: "must not be nil"}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "rate"
	}
	if strings.ContainsAny(cfg.Prefix, "{} \t\r\n") {
		return nil, &algorithms.ConfigError{Field: "Config.Prefix", Reason: "must not contain braces or spaces, got " + quote(cfg.Prefix)}
	}
	if len(cfg.Rules) == 0 {
		return nil, &algorithms.ConfigError{Field: "Config.Rules", Reason: "must hold at least one rule"}
	}
	if cfg.OnError > FailClosed {
		return nil, &algorithms.ConfigError{Field: "Config.OnError", Reason: "unknown policy " + cfg.OnError.String()}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	if err := defaultRefundWindow(&cfg.RefundWindow); err != nil {
		return nil, err
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = time.Second
	}
	if cfg.FallbackAfter < 0 {
		return nil, &algorithms.ConfigError{Field: "Config.FallbackAfter", Reason: "must be >= 0, got " + cfg.FallbackAfter.String()}
	}
	if cfg.FallbackAfter == 0 {
		cfg.FallbackAfter = time.Second
	}
	if cfg.Instances < 0 || cfg.Instances > maxInstances {
		return nil, &algorithms.ConfigError{Field: "Config.Instances", Reason: "must be between 0 and " + strconv.Itoa(maxInstances) + ", got " + strconv.Itoa(cfg.Instances)}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	injectedNow := cfg.Now != nil // it may step back: see blockclock.go
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	primary := backend
	local := inProcess(backend)
	if !local && !cfg.NoDenyCache && !cachesDenials(backend) {
		dc, err := denycache.New(backend, cfg.DenyCache)
		if err != nil {
			return nil, err
		}
		backend = dc
	}
	s := &shared{
		backend:       backend,
		timeout:       cfg.Timeout,
		configTimeout: cfg.Timeout,
		inline:        honoursDeadline(backend),
		prefix:        cfg.Prefix,
		peekKeys:      newKeyCache(cfg.Prefix + ":_peek:{"),
		policy:        cfg.OnError,
		probeInterval: cfg.ProbeInterval,
		instances:     int64(cfg.Instances),
		shadow:        cfg.Shadow,
		onDecision:    cfg.OnDecision,
		sleep:         cfg.Sleep,
		refundWindow:  cfg.RefundWindow,
		logger:        cfg.Logger,
		now:           cfg.Now,
		injectedNow:   injectedNow,
		primary:       primary,
	}
	s.blocks = newBlocks(s, cfg.Now, injectedNow)
	if local {
		s.timeout = -1
	}
	if cfg.OnError == Fallback {
		s.fallback = cfg.FallbackBackend
		if s.fallback == nil {
			mem, release, err := defaultFallback(primary)
			if err != nil {
				return nil, err
			}
			s.fallback, s.releaseFallback = mem, release
		}
		s.health = newHealth(s, cfg.FallbackAfter)
	}
	return s.engine(nil, cfg.Rules)
}

// With returns a new Limiter with the same backend and configuration and
// the given rules added after e's: per-route rules layered on shared ones,
// decided together in one call. It shares e's deny cache, fallback and
// probe; only the new rules are validated.
func (e *Limiter) With(rules ...Rule) (*Limiter, error) {
	return e.s.engine(e.rules, rules)
}

// engine returns an Limiter on s with the rules base (compiled already)
// followed by rules.
func (s *shared) engine(base []compiled, rules []Rule) (*Limiter, error) {
	e := &Limiter{s: s, rules: make([]compiled, len(base), len(base)+len(rules))}
	copy(e.rules, base)
	for _, r := range rules {
		c, err := compile(s.prefix, r)
		if err != nil {
			return nil, err
		}
		if err := s.checkLeaser(r); err != nil {
			return nil, err
		}
		if err := s.checkRefunder(r); err != nil {
			return nil, err
		}
		if r.Blocks != nil {
			if err := s.checkBlocks(r); err != nil {
				return nil, err
			}
			c.blocks = s.blocks.rule(&c.Rule)
		}
		for i := range e.rules {
			if e.rules[i].Name == r.Name {
				return nil, &algorithms.ConfigError{Rule: r.Name, Field: "Name", Reason: "is used by two rules"}
			}
		}
		e.rules = append(e.rules, c)
	}
	n := len(e.rules)
	e.pool.New = func() any {
		return &scratch{
			checks:  make([]algorithms.Check, 0, n),
			results: make([]algorithms.Result, n),
			index:   make([]int, 0, n),
			in:      make([]Input, n),
			named:   make([]bool, n),
		}
	}
	return e, nil
}

// localDenials returns how many calls the deny cache answered without a
// backend call (0 without a deny cache).
func (e *Limiter) localDenials() uint64 {
	if c, ok := e.s.backend.(interface{ LocalDenials() uint64 }); ok {
		return c.LocalDenials()
	}
	return 0
}

// Close stops the fallback probe, if one runs, for e and every Limiter
// derived from the same New, and ends their quota blocks (Rule.Blocks):
// it waits for the blocks being taken, then gives back, at most once,
// what every block has left, and stops the sweeper that returns blocks
// whose time is up. The Engines keep working, without blocks: every
// check of a rule with blocks then goes to the backend. Close an Limiter
// with blocks when done with it, or its sweeper runs on. Close also waits
// (at most Config.Timeout and a second) for the background releases of
// the concurrency slots that failed calls may have taken, and logs those
// still running after that.
func (e *Limiter) Close() error {
	if e.s.health != nil {
		e.s.health.close()
	}
	e.s.blocks.shut()
	e.s.waitAbandoned()
	if e.s.releaseFallback != nil {
		e.s.releaseFallback()
	}
	return nil
}
