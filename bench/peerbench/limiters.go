package main

import (
	"context"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulimiter "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient"
)

// allowFunc is the adapter every limiter is measured through: one check of
// cost 1 on key, answering whether it was allowed.
type allowFunc func(ctx context.Context, key string) (bool, error)

// limit is rate units per period, translated by each adapter into its
// library's own type. Bucket algorithms get a burst of rate.
type limit struct {
	rate int
	per  time.Duration
}

// limiter is one row of the tables.
type limiter struct {
	name string
	// id prefixes every key the limiter is given, so that no two limiters
	// ever share state on the one Redis server.
	id string
	// main limiters run every scenario; the others (redlimit's other
	// algorithms, the deny cache) only the scenarios listed in only.
	only []string
	// build makes an adapter on client for l.
	build func(c *redis.Client, l limit) (allowFunc, error)
	// prefix is what the library prepends to the keys it is given.
	prefix string
	// stateless marks the baseline, which limits nothing.
	stateless bool
	// same names the algorithm of a same-algorithm pair ("fixed window",
	// "GCRA"), peer marks the other library's row of the pair: the table
	// "Same algorithm, side by side" sets each redlimit row beside its peer.
	same string
	peer bool
}

func (lm limiter) runs(scenario string) bool {
	if lm.only == nil {
		return true
	}
	for _, s := range lm.only {
		if s == scenario {
			return true
		}
	}
	return false
}

// The algorithms of the same-algorithm pairs.
const (
	sameFixedWindow = "fixed window"
	sameGCRA        = "GCRA"
)

// limiters lists the rows in table order; the first is the reference of
// every ratio.
func limiters() []limiter {
	secondary := []string{scHot8, scKeys}
	return []limiter{
		{name: "redlimit gcra", id: "gcra", build: redlimit(algorithms.GCRA, redisstore.Config{}, false), same: sameGCRA},
		{name: "redlimit gcra + DenyCache", id: "gcra-dc", build: redlimit(algorithms.GCRA, redisstore.Config{}, true), only: []string{scHot64, scKeys, scAbuse}},
		{name: "redlimit gcra, unpipelined (Pipelines: -1)", id: "gcra-unpiped", build: redlimit(algorithms.GCRA, redisstore.Config{Pipelines: -1}, false)},
		{name: "go-redis/redis_rate v10", id: "redis_rate", build: redisRate, prefix: "rate:", same: sameGCRA, peer: true},
		{name: "go-redis/redis_rate v10, autopipelined client", id: "redis_rate-ap", build: redisRateAutoPipelined, prefix: "rate:"},
		{name: "ulule/limiter v3 (redis store)", id: "ulule", build: ulule, prefix: "limiter:", same: sameFixedWindow, peer: true},
		{name: "throttled v2 (goredisstore.v9)", id: "throttled", build: throttledGCRA, prefix: "throttled:"},
		{name: "baseline: EVALSHA `return 1`", id: "baseline", build: baseline, stateless: true},
		{name: "redlimit token_bucket", id: "tb", build: redlimit(algorithms.TokenBucket, redisstore.Config{}, false), only: secondary},
		{name: "redlimit sliding_window", id: "sw", build: redlimit(algorithms.SlidingWindow, redisstore.Config{}, false), only: secondary},
		{name: "redlimit fixed_window", id: "fw", build: redlimit(algorithms.FixedWindow, redisstore.Config{}, false), same: sameFixedWindow},
		{name: "redlimit fixed_window on rueidis (rueidisclient)", id: "fw-rueidis", build: redlimitRueidis(algorithms.FixedWindow), same: sameFixedWindow},
		{name: "redlimit gcra on rueidis (rueidisclient)", id: "gcra-rueidis", build: redlimitRueidis(algorithms.GCRA), same: sameGCRA},
		{name: "redlimit sliding_log", id: "sl", build: redlimit(algorithms.SlidingLog, redisstore.Config{}, false), only: secondary},
	}
}

// controlRow is the A/A control (-control): ulule/limiter again, under
// keys of its own, set beside the first as if it were redlimit's fixed
// window, so that the same-algorithm tables report "control ÷
// ulule/limiter": what two copies of one limiter differ by in this
// harness, round by round.
func controlRow() limiter {
	return limiter{name: "control (ulule/limiter v3 again)", id: "control", build: ulule, prefix: "limiter:", same: sameFixedWindow}
}

// redlimit builds redlimit's backend on the client with cfg, behind a
// DenyCache when denyCache is set, checking with algorithm a.
func redlimit(a algorithms.Algorithm, cfg redisstore.Config, denyCache bool) func(*redis.Client, limit) (allowFunc, error) {
	return func(c *redis.Client, l limit) (allowFunc, error) {
		b, err := redisstore.New(c, cfg)
		if err != nil {
			return nil, err
		}
		var backend algorithms.Backend = b
		if denyCache {
			if backend, err = denycache.New(b, denycache.Config{}); err != nil {
				return nil, err
			}
		}
		return redlimitAllow(backend, a, l), nil
	}
}

// redlimitRueidis builds redlimit's backend on a rueidis client of c's
// server (rueidisclient), checking with algorithm a. Its commands are
// not counted by the go-redis hook of the other rows.
func redlimitRueidis(a algorithms.Algorithm) func(*redis.Client, limit) (allowFunc, error) {
	return func(c *redis.Client, l limit) (allowFunc, error) {
		rc, err := rueidisOf(c.Options().Addr)
		if err != nil {
			return nil, err
		}
		b, err := redisstore.New(rc, redisstore.Config{})
		if err != nil {
			return nil, err
		}
		return redlimitAllow(b, a, l), nil
	}
}

// rueidisClients holds one rueidis client per server address, made once
// for the whole run as the go-redis clients are.
var rueidisClients struct {
	sync.Mutex
	m map[string]*rueidisclient.Client
}

func rueidisOf(addr string) (*rueidisclient.Client, error) {
	rueidisClients.Lock()
	defer rueidisClients.Unlock()
	if c, ok := rueidisClients.m[addr]; ok {
		return c, nil
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, DisableAutoPipelining: true})
	if err != nil {
		return nil, err
	}
	c, err := rueidisclient.New(rc)
	if err != nil {
		rc.Close()
		return nil, err
	}
	if rueidisClients.m == nil {
		rueidisClients.m = map[string]*rueidisclient.Client{}
	}
	rueidisClients.m[addr] = c
	return c, nil
}

// slidingLogMax is the largest Rate a sliding_log Limit may have.
const slidingLogMax = 2000

// redlimitAllow is the plain way to ask a Backend one question, as a
// handler would; the two one-element arrays are part of what it costs.
func redlimitAllow(b algorithms.Backend, a algorithms.Algorithm, l limit) allowFunc {
	lim := algorithms.Limit{Rate: int64(l.rate), Period: l.per}
	if a == algorithms.SlidingLog && lim.Rate > slidingLogMax {
		// The same rate, in the largest log a sliding_log key may hold.
		lim = algorithms.Limit{Rate: slidingLogMax, Period: l.per * slidingLogMax / time.Duration(l.rate)}
	}
	if err := lim.Validate(a); err != nil {
		return func(context.Context, string) (bool, error) { return false, err }
	}
	return func(ctx context.Context, key string) (bool, error) {
		checks := [1]algorithms.Check{{Key: key, Algorithm: a, Limit: lim}}
		var results [1]algorithms.Result
		err := b.Allow(ctx, checks[:], results[:])
		return results[0].Allowed, err
	}
}

func redisRate(c *redis.Client, l limit) (allowFunc, error) {
	return redisRateOn(c, l), nil
}

// redisRateAutoPipelined gives redis_rate go-redis's autopipeliner, which
// batches the commands of concurrent callers into one write: what redis_rate
// gets closest to redlimit's own pipelining with.
func redisRateAutoPipelined(c *redis.Client, l limit) (allowFunc, error) {
	ap, err := c.AutoPipeline()
	if err != nil {
		return nil, err
	}
	return redisRateOn(ap, l), nil
}

// rateClient is what redis_rate needs of a client.
type rateClient interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

func redisRateOn(c rateClient, l limit) allowFunc {
	rl := redis_rate.NewLimiter(c)
	lim := redis_rate.Limit{Rate: l.rate, Burst: l.rate, Period: l.per}
	return func(ctx context.Context, key string) (bool, error) {
		res, err := rl.Allow(ctx, key, lim)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
}

func ulule(c *redis.Client, l limit) (allowFunc, error) {
	store, err := ulredis.NewStore(c)
	if err != nil {
		return nil, err
	}
	lim := ulimiter.New(store, ulimiter.Rate{Period: l.per, Limit: int64(l.rate)})
	return func(ctx context.Context, key string) (bool, error) {
		res, err := lim.Get(ctx, key)
		return err == nil && !res.Reached, err
	}, nil
}

func throttledGCRA(c *redis.Client, l limit) (allowFunc, error) {
	store, err := goredisstore.NewCtx(c, "throttled:")
	if err != nil {
		return nil, err
	}
	// MaxBurst counts the requests beyond the first: a burst of rate.
	quota := throttled.RateQuota{MaxRate: throttled.PerDuration(l.rate, l.per), MaxBurst: l.rate - 1}
	rl, err := throttled.NewGCRARateLimiterCtx(store, quota)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, key string) (bool, error) {
		limited, _, err := rl.RateLimitCtx(ctx, key, 1)
		return err == nil && !limited, err
	}, nil
}

// returnOne is the cheapest script there is: the cost of one EVALSHA round
// trip, with no state and no decision.
var returnOne = redis.NewScript("return 1")

func baseline(c *redis.Client, _ limit) (allowFunc, error) {
	return func(ctx context.Context, key string) (bool, error) {
		err := returnOne.Run(ctx, c, []string{key}).Err()
		return err == nil, err
	}, nil
}
