package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// keyState is one key's state under one rule, as peek and top print it.
type keyState struct {
	Rule       string  `json:"rule"`
	Key        string  `json:"key"`
	StorageKey string  `json:"storage_key"`
	Allowed    bool    `json:"allowed"`
	Remaining  int64   `json:"remaining"`
	Limit      int64   `json:"limit"`
	RetryAfter float64 `json:"retry_after_seconds"`
	ResetAfter float64 `json:"reset_after_seconds"`
	Blocks     bool    `json:"quota_blocks,omitempty"` // peek and reset: the rule has quota blocks
}

func (s *keyState) fill(r algorithms.Result) {
	s.Allowed, s.Remaining, s.Limit = r.Allowed, r.Remaining, r.Limit
	s.RetryAfter, s.ResetAfter = seconds(r.RetryAfter), seconds(r.ResetAfter)
}

func seconds(d time.Duration) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(d.Seconds(), 'f', 3, 64), 64)
	return v
}

// ruleCommand parses the flags and RULE KEY of peek and reset.
func ruleCommand(ctx context.Context, g *global, name string, args []string, needLimit bool) (ruleDef, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(g.stderr)
	var rf ruleFlags
	rf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(g.stderr, "usage: redlimit %s [-alg ALG -limit RATE/PERIOD [-burst N] [-blocks|-blocks=false]] RULE KEY\n", name)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return ruleDef{}, "", err
	}
	if fs.NArg() != 2 {
		return ruleDef{}, "", usagef("want RULE KEY, got %d arguments", fs.NArg())
	}
	if fs.Arg(1) == "" {
		return ruleDef{}, "", usagef("the key is empty")
	}
	def, err := g.resolve(ctx, fs.Arg(0), &rf, needLimit)
	return def, fs.Arg(1), err
}

// engineFor returns an engine with the one rule def on client, as the
// service runs it (its quota blocks included: a reset of a fixed window
// key with blocks goes through the engine's epochs): no deny cache, no
// fallback (errors are reported, not hidden). A rule the engine refuses
// was given on the command line: bad usage.
func engineFor(client redis.UniversalClient, def ruleDef) (*redlimit.Limiter, error) {
	store, err := redisstore.New(client, redisstore.Config{Now: clock})
	if err != nil {
		return nil, err
	}
	return newEngine(store, def)
}

// checkRule reports, as bad usage, what the engine refuses in def (a rule
// name, a limit too large for quota blocks), before any connection.
func checkRule(def ruleDef) error {
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		return err
	}
	e, err := newEngine(mem, def)
	if err == nil {
		e.Close()
	}
	return err
}

// newEngine returns an engine with the one rule def on store.
func newEngine(store algorithms.Backend, def ruleDef) (*redlimit.Limiter, error) {
	limit := def.Limit
	if limit.Rate == 0 {
		limit = algorithms.PerSecond(1) // a reset needs the key, not the limit
	}
	rule := redlimit.Rule{Name: def.Name, Algorithm: def.Algorithm, Limit: limit}
	if def.Blocks {
		rule.Blocks = &redlimit.BlockConfig{}
	}
	cfg := redlimit.Config{
		Rules:       []redlimit.Rule{rule},
		Prefix:      def.Prefix,
		NoDenyCache: true,
		OnError:     redlimit.FailClosed,
		Timeout:     5 * time.Second,
		Logger:      slog.New(slog.DiscardHandler),
	}
	if clock != nil {
		cfg.Now = clock
	}
	e, err := redlimit.New(store, cfg)
	var ce *algorithms.ConfigError
	if errors.As(err, &ce) {
		return nil, usageError{err.Error()}
	}
	return e, err
}

// withRule parses the RULE KEY arguments of command name and runs fn with
// an engine of that one rule on the Redis of g.
func withRule(ctx context.Context, g *global, name string, args []string, needLimit bool, fn func(def ruleDef, key string, e *redlimit.Limiter) error) error {
	def, key, err := ruleCommand(ctx, g, name, args, needLimit)
	if err != nil {
		return err
	}
	if def.Algorithm == algorithms.FixedWindow && def.Blocks && def.Limit.Rate == 0 {
		return usagef("rule %s has quota blocks: its keys are reset through epochs of its windows; give -limit RATE/PERIOD", show(def.Name))
	}
	if err := checkRule(def); err != nil {
		return err
	}
	client, err := g.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	if def, err = blocksOf(ctx, client, def, key, name == "reset"); err != nil {
		return err
	}
	e, err := engineFor(client, def)
	if err != nil {
		return err
	}
	defer e.Close()
	return fn(def, key, e)
}

// blocksOf settles whether def, a fixed window rule, has quota blocks
// when neither the admin endpoint nor -blocks said: its key's epoch
// counter, "<key>:epoch", exists only for a rule with blocks whose key was
// reset in the current window. Without it, a peek reads the same key
// either way (no reset, epoch 0), but a reset cannot be done right without
// knowing: a DEL lets the units other instances give back count again, an
// epoch's reset leaves a rule without blocks untouched. A rule with blocks
// needs its limit (the counters' windows are its windows).
func blocksOf(ctx context.Context, client redis.UniversalClient, def ruleDef, key string, reset bool) (ruleDef, error) {
	if def.Algorithm != algorithms.FixedWindow {
		return def, nil
	}
	if !def.BlocksKnown {
		e, err := engineFor(client, def)
		if err != nil {
			return def, err
		}
		storage := e.Peek(ctx, key)
		e.Close()
		if storage.Err != nil {
			return def, storage.Err
		}
		n, err := client.Exists(ctx, storage.Rules[0].Key+":epoch").Result()
		switch {
		case err != nil:
			return def, err
		case n > 0:
			def.Blocks, def.BlocksKnown = true, true
		case reset:
			return def, usagef("rule %s is a fixed window rule: say whether it has quota blocks (-blocks, or -blocks=false), or give -admin URL", show(def.Name))
		}
	}
	if def.Blocks && def.Limit.Rate == 0 {
		return def, usagef("rule %s has quota blocks: its keys are reset through epochs of its windows; give -limit RATE/PERIOD", show(def.Name))
	}
	return def, nil
}

func cmdPeek(ctx context.Context, g *global, args []string) error {
	return withRule(ctx, g, "peek", args, true, func(def ruleDef, key string, e *redlimit.Limiter) error {
		return g.peek(ctx, def, key, e)
	})
}

func (g *global) peek(ctx context.Context, def ruleDef, key string, e *redlimit.Limiter) error {
	d := e.Peek(ctx, key)
	if d.Err != nil {
		return d.Err
	}
	rd := d.Rules[0]
	s := keyState{Rule: def.Name, Key: key, StorageKey: rd.Key, Blocks: def.Blocks}
	s.fill(rd.Result)
	if g.json {
		return g.emit(s)
	}
	return g.table([]keyState{s})
}

func cmdReset(ctx context.Context, g *global, args []string) error {
	return withRule(ctx, g, "reset", args, false, func(def ruleDef, key string, e *redlimit.Limiter) error {
		return g.reset(ctx, def, key, e)
	})
}

// reset resets key under def through the engine, as the service and its
// admin page do (redlimit.Limiter.Reset), and prints the storage key
// the rule now uses: after a reset of a fixed window rule with quota
// blocks, its next epoch's key ("<key>:e<n>").
func (g *global) reset(ctx context.Context, def ruleDef, key string, e *redlimit.Limiter) error {
	if err := e.Reset(ctx, key); err != nil {
		return err
	}
	d := e.Peek(ctx, key) // for the storage key only
	if d.Err != nil {
		return d.Err
	}
	if g.json {
		out := map[string]any{"rule": def.Name, "key": key, "storage_key": d.Rules[0].Key, "reset": true}
		if def.Blocks {
			out["quota_blocks"] = true
		}
		return g.emit(out)
	}
	_, err := fmt.Fprintf(g.stdout, "reset %s\n", show(d.Rules[0].Key))
	return err
}

// table prints key states.
func (g *global) table(states []keyState) error {
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tKEY\tNEXT\tREMAINING\tLIMIT\tRETRY AFTER\tFULL AFTER")
	for _, s := range states {
		next := "allowed"
		if !s.Allowed {
			next = "denied"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%gs\t%gs\n", show(s.Rule), show(s.Key), next, s.Remaining, s.Limit, s.RetryAfter, s.ResetAfter)
	}
	return tw.Flush()
}
