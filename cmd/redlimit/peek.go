package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/middleware/engine"
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
		fmt.Fprintf(g.stderr, "usage: redlimit %s [-alg ALG -limit RATE/PERIOD [-burst N]] RULE KEY\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
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

// engineFor returns an engine with the one rule def on client: no deny
// cache, no fallback (errors are reported, not hidden).
func engineFor(client redis.UniversalClient, def ruleDef) (*engine.Engine, error) {
	store, err := redisstore.New(client, redisstore.Config{Now: clock})
	if err != nil {
		return nil, err
	}
	limit := def.Limit
	if limit.Rate == 0 {
		limit = algorithms.PerSecond(1) // a reset needs the key, not the limit
	}
	return engine.New(store, engine.Config{
		Rules:       []engine.Rule{{Name: def.Name, Algorithm: def.Algorithm, Limit: limit}},
		Prefix:      def.Prefix,
		NoDenyCache: true,
		OnError:     engine.FailClosed,
		Timeout:     5 * time.Second,
		Logger:      slog.New(slog.DiscardHandler),
	})
}

// withRule parses the RULE KEY arguments of command name and runs fn with
// an engine of that one rule on the Redis of g.
func withRule(ctx context.Context, g *global, name string, args []string, needLimit bool, fn func(def ruleDef, key string, e *engine.Engine) error) error {
	def, key, err := ruleCommand(ctx, g, name, args, needLimit)
	if err != nil {
		return err
	}
	client, err := g.client()
	if err != nil {
		return err
	}
	defer client.Close()
	e, err := engineFor(client, def)
	if err != nil {
		return err
	}
	defer e.Close()
	return fn(def, key, e)
}

func cmdPeek(ctx context.Context, g *global, args []string) error {
	return withRule(ctx, g, "peek", args, true, func(def ruleDef, key string, e *engine.Engine) error {
		return g.peek(ctx, def, key, e)
	})
}

func (g *global) peek(ctx context.Context, def ruleDef, key string, e *engine.Engine) error {
	d := e.Peek(ctx, key)
	if d.Err != nil {
		return d.Err
	}
	rd := d.Rules[0]
	s := keyState{Rule: def.Name, Key: key, StorageKey: rd.Key}
	s.fill(rd.Result)
	if g.json {
		return g.emit(s)
	}
	return g.table([]keyState{s})
}

func cmdReset(ctx context.Context, g *global, args []string) error {
	return withRule(ctx, g, "reset", args, false, func(def ruleDef, key string, e *engine.Engine) error {
		return g.reset(ctx, def, key, e)
	})
}

func (g *global) reset(ctx context.Context, def ruleDef, key string, e *engine.Engine) error {
	if err := e.Reset(ctx, key); err != nil {
		return err
	}
	var d engine.Decision
	e.PeekInputs(ctx, []engine.Input{{Material: key}}, &d) // for the storage key only
	if g.json {
		return g.emit(map[string]any{"rule": def.Name, "key": key, "storage_key": d.Rules[0].Key, "reset": true})
	}
	_, err := fmt.Fprintf(g.stdout, "reset %s\n", d.Rules[0].Key)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%gs\t%gs\n", s.Rule, s.Key, next, s.Remaining, s.Limit, s.RetryAfter, s.ResetAfter)
	}
	return tw.Flush()
}
