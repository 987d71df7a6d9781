package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// tags are the algorithm tags of storage keys (see redlimit.Rule.Name).
var tags = map[string]algorithms.Algorithm{
	"fw": algorithms.FixedWindow, "sl": algorithms.SlidingLog, "sw": algorithms.SlidingWindow,
	"tb": algorithms.TokenBucket, "gcra": algorithms.GCRA, "cc": algorithms.Concurrency,
}

// storageKey is a parsed "<prefix>:<rule>:<tag>:{<material>}", or, for a
// fixed window rule with quota blocks, "<...>}:e<n>", the key of epoch n
// after n resets in the window (see docs/leasing.md).
type storageKey struct {
	key, rule, material string
	alg                 algorithms.Algorithm
	epoch               int64
}

// What a scanned key is, when it is not a rate-limit state top reads.
const (
	isState   = ""
	isSibling = "markers and epoch counters"
	isOther   = "not rate-limit keys"
)

// parseKey parses k, a key under prefix: a rate-limit state, a sibling
// of one (a refund's marker, an epoch counter) or another key.
func parseKey(prefix, k string) (storageKey, string) {
	rest, ok := strings.CutPrefix(k, prefix+":")
	if !ok {
		return storageKey{}, isOther
	}
	rule, rest, ok1 := strings.Cut(rest, ":")
	tag, rest, ok2 := strings.Cut(rest, ":")
	alg, known := tags[tag]
	end := strings.LastIndex(rest, "}")
	if !ok1 || !ok2 || !known || strings.HasPrefix(rule, "_") || !strings.HasPrefix(rest, "{") || end < 1 {
		return storageKey{}, isOther
	}
	sk := storageKey{key: k, rule: rule, material: rest[1:end], alg: alg}
	if suffix := rest[end+1:]; suffix != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(suffix, ":e"), 10, 64)
		if !strings.HasPrefix(suffix, ":e") || err != nil || n <= 0 || alg != algorithms.FixedWindow {
			return storageKey{}, isSibling
		}
		sk.epoch = n
	}
	return sk, isState
}

// globEscape escapes the glob characters of SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// pacer spreads work at no more than rate items a second, over every
// goroutine that shares it.
type pacer struct {
	mu   sync.Mutex
	next time.Time
	each time.Duration
}

func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(n) * p.each)
	p.mu.Unlock()
	if d := time.Until(at); d > 0 {
		return sleep(ctx, d)
	}
	return nil
}

type topResult struct {
	Keys    []keyState     `json:"keys"`
	Scanned int            `json:"scanned"`
	Masters int            `json:"masters"`
	Skipped int            `json:"skipped"`     // keys scanned and not listed
	Why     map[string]int `json:"skipped_why"` // how many, per reason
}

// Why top skips a key it scanned, beyond parseKey's.
const (
	skipUnknown  = "of rules whose limit is unknown"
	skipClosed   = "closed by a reset (an old epoch of a key with quota blocks)"
	skipWrong    = "of another Redis type"
	skipNoNumber = "not readable as a rate-limit state (not a number)"
)

// skipOrder is the order of the reasons in top's summary line.
var skipOrder = []string{skipUnknown, skipClosed, isSibling, isOther, skipWrong, skipNoNumber}

func cmdTop(ctx context.Context, g *global, args []string) error {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(g.stderr)
	var rf ruleFlags
	rf.register(fs)
	rule := fs.String("rule", "", "only this rule's keys (with -alg and -limit, or from -admin)")
	n := fs.Int("n", 20, "how many keys to show")
	rate := fs.Int("rate", 1000, "keys scanned and read per second, at most, over all masters")
	maxKeys := fs.Int("max", 100000, "stop after scanning this many keys")
	fs.Usage = func() {
		fmt.Fprintln(g.stderr, "usage: redlimit top [-rule RULE [-alg ALG -limit RATE/PERIOD]] [-n 20] [-rate 1000] [-max 100000]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *n <= 0 || *rate <= 0 || *maxKeys <= 0 {
		return usagef("top takes no arguments, and -n, -rate and -max must be > 0")
	}
	defs := map[string]ruleDef{}
	match := globEscape(g.prefix) + ":*"
	if *rule != "" {
		def, err := g.resolve(ctx, *rule, &rf, true)
		if err != nil {
			return err
		}
		if err := checkRule(def); err != nil {
			return err
		}
		defs[def.Name] = def
		match = globEscape(def.Prefix) + ":" + globEscape(def.Name) + ":*"
	} else {
		if len(g.admin) == 0 {
			return usagef("top needs the rules' limits: -admin URL, or -rule RULE -alg ALG -limit RATE/PERIOD")
		}
		all, err := g.adminRules(ctx)
		if err != nil {
			return err
		}
		for name, d := range all {
			if !strings.Contains(name, "/") && d.Limit.Rate != 0 && d.Prefix == g.prefix {
				defs[name] = d
			}
		}
	}
	client, err := g.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Config{Now: clock})
	if err != nil {
		return err
	}
	p := &pacer{each: time.Second / time.Duration(*rate)}
	var (
		mu  sync.Mutex
		res = topResult{Keys: []keyState{}, Why: map[string]int{}}
	)
	skip := func(why string) {
		mu.Lock()
		res.Skipped++
		res.Why[why]++
		mu.Unlock()
	}
	scan := func(ctx context.Context, node redis.Cmdable) error {
		mu.Lock()
		res.Masters++
		mu.Unlock()
		var cursor uint64
		for {
			if err := p.wait(ctx, 100); err != nil {
				return err
			}
			keys, next, err := node.Scan(ctx, cursor, match, 100).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				mu.Lock()
				full := res.Scanned >= *maxKeys
				if !full {
					res.Scanned++
				}
				mu.Unlock()
				if full {
					return nil
				}
				sk, what := parseKey(g.prefix, k)
				if what != isState {
					skip(what)
					continue
				}
				def, known := defs[sk.rule]
				if !known || def.Algorithm != sk.alg {
					skip(skipUnknown)
					continue
				}
				st, err := peekKey(ctx, store, def, sk)
				switch {
				case errors.Is(err, algorithms.ErrKeyState):
					// one key's state, not Redis: count it, go on
					if strings.Contains(err.Error(), "WRONGTYPE") {
						skip(skipWrong)
					} else {
						skip(skipNoNumber)
					}
					continue
				case errors.Is(err, errClosed):
					skip(skipClosed)
					continue
				case err != nil:
					return fmt.Errorf("%s: %w", show(k), err)
				}
				mu.Lock()
				res.Keys = append(res.Keys, st)
				mu.Unlock()
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, client)
	}
	if err != nil {
		return err
	}
	slices.SortFunc(res.Keys, func(a, b keyState) int {
		// nearest the limit first: the smallest share remaining
		if c := cmp.Compare(a.Remaining*b.Limit, b.Remaining*a.Limit); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	res.Keys = res.Keys[:min(len(res.Keys), *n)]
	if g.json {
		return g.emit(res)
	}
	if err := g.table(res.Keys); err != nil {
		return err
	}
	line := fmt.Sprintf("scanned %d keys on %d masters; skipped %d", res.Scanned, res.Masters, res.Skipped)
	sep := ": "
	for _, why := range skipOrder {
		if n := res.Why[why]; n > 0 {
			line += sep + strconv.Itoa(n) + " " + why
			sep = ", "
		}
	}
	_, err = fmt.Fprintln(g.stdout, line)
	return err
}

// errClosed is a key of an epoch a reset left: closed with 2^39 units
// (see docs/leasing.md, "Reset"), so that nothing given back to it is
// admitted again. It is no key's current state.
var errClosed = errors.New("closed by a reset")

// peekKey reads the state of one storage key without consuming: the
// engine's peek (see redlimit.Limiter.Peek), a check of the key with
// a check that always denies on a key of the same hash slot.
func peekKey(ctx context.Context, store *redisstore.Store, def ruleDef, sk storageKey) (keyState, error) {
	checks := []algorithms.Check{
		{Key: sk.key, Algorithm: def.Algorithm, Limit: def.Limit},
		{Key: def.Prefix + ":_peek:{" + sk.material + "}", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1), Cost: 2},
	}
	results := make([]algorithms.Result, 2)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.Allow(ctx, checks, results); err != nil {
		return keyState{}, err
	}
	s := keyState{Rule: sk.rule, Key: sk.material, StorageKey: sk.key}
	s.fill(results[0])
	if def.Algorithm == algorithms.FixedWindow && !results[0].Allowed && results[0].Limit != 0 {
		// a denied fixed window key: maybe one a reset closed
		closed, err := closedKey(ctx, store, def, sk)
		if err != nil {
			return keyState{}, err
		}
		if closed {
			return keyState{}, errClosed
		}
	}
	return s, nil
}

// closedKey reports whether the fixed window key sk holds 2^39 units or
// more: a key a reset closed (no limit of a rule with blocks reaches 2^39).
// It reads the count under the largest capacity, consuming nothing.
func closedKey(ctx context.Context, store *redisstore.Store, def ruleDef, sk storageKey) (bool, error) {
	limit := def.Limit
	limit.Rate = 1 << 40
	checks := []algorithms.Check{
		{Key: sk.key, Algorithm: algorithms.FixedWindow, Limit: limit},
		{Key: def.Prefix + ":_peek:{" + sk.material + "}", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1), Cost: 2},
	}
	results := make([]algorithms.Result, 2)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.Allow(ctx, checks, results); err != nil {
		return false, err
	}
	return 1<<40-results[0].Remaining >= 1<<39, nil
}
