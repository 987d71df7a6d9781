package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// tags are the algorithm tags of storage keys (see engine.Rule.Name).
var tags = map[string]algorithms.Algorithm{
	"fw": algorithms.FixedWindow, "sl": algorithms.SlidingLog, "sw": algorithms.SlidingWindow,
	"tb": algorithms.TokenBucket, "gcra": algorithms.GCRA, "cc": algorithms.Concurrency,
}

// storageKey is a parsed "<prefix>:<rule>:<tag>:{<material>}".
type storageKey struct {
	key, rule, material string
	alg                 algorithms.Algorithm
}

func parseKey(prefix, k string) (storageKey, bool) {
	rest, ok := strings.CutPrefix(k, prefix+":")
	if !ok {
		return storageKey{}, false
	}
	rule, rest, ok1 := strings.Cut(rest, ":")
	tag, rest, ok2 := strings.Cut(rest, ":")
	alg, known := tags[tag]
	if !ok1 || !ok2 || !known || strings.HasPrefix(rule, "_") || len(rest) < 2 || rest[0] != '{' || rest[len(rest)-1] != '}' {
		return storageKey{}, false
	}
	return storageKey{key: k, rule: rule, material: rest[1 : len(rest)-1], alg: alg}, true
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
	Keys    []keyState `json:"keys"`
	Scanned int        `json:"scanned"`
	Masters int        `json:"masters"`
	Skipped int        `json:"skipped"` // keys of rules whose limit is unknown
}

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
	if err := fs.Parse(args); err != nil {
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
	client, err := g.client()
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
		res = topResult{Keys: []keyState{}}
	)
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
				sk, ok := parseKey(g.prefix, k)
				if !ok {
					continue
				}
				def, known := defs[sk.rule]
				mu.Lock()
				full := res.Scanned >= *maxKeys
				res.Scanned++
				if !known || def.Algorithm != sk.alg {
					res.Skipped++
				}
				mu.Unlock()
				if full {
					return nil
				}
				if !known || def.Algorithm != sk.alg {
					continue
				}
				st, err := peekKey(ctx, store, def, sk)
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
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
	_, err = fmt.Fprintf(g.stdout, "scanned %d keys on %d masters; %d of rules whose limit is unknown skipped\n", res.Scanned, res.Masters, res.Skipped)
	return err
}

// peekKey reads the state of one storage key without consuming: the
// engine's peek (see engine.Engine.PeekInputs), a check of the key with
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
	return s, nil
}
