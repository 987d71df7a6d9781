package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// ruleDef is what the CLI must know of a rule to read its keys.
type ruleDef struct {
	Name      string
	Algorithm algorithms.Algorithm
	Limit     algorithms.Limit // zero when unknown (a reset needs none)
	Prefix    string           // from the admin endpoint, else -prefix

	// Blocks says whether the rule has quota blocks (redlimit.Rule.Blocks),
	// when BlocksKnown: a reset of a fixed window key with blocks goes
	// through the engine's epochs, never a DEL (see docs/leasing.md).
	Blocks, BlocksKnown bool
}

// ruleFlags are the flags that define a rule on the command line.
type ruleFlags struct {
	alg    string
	limit  string
	burst  int64
	blocks optBool
}

func (f *ruleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.alg, "alg", "", "the rule's algorithm: fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency")
	fs.StringVar(&f.limit, "limit", "", `the rule's limit, "RATE/PERIOD": 100/1m, 10/1s, 5000/1h; a calendar quota "RATE/UNIT@ZONE": 5000/day@Europe/Berlin (day, week, month, year; UTC without @ZONE)`)
	fs.Int64Var(&f.burst, "burst", 0, "the rule's burst (token_bucket, gcra)")
	fs.Var(&f.blocks, "blocks", "the rule has quota blocks (redlimit.Rule.Blocks): -blocks, or -blocks=false")
}

// optBool is a boolean flag that knows whether it was given.
type optBool struct{ set, v bool }

func (b *optBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

func (b *optBool) IsBoolFlag() bool { return true }

// calendarUnits are the units of a calendar quota, by name.
var calendarUnits = map[string]algorithms.CalendarUnit{
	"day": algorithms.Day, "week": algorithms.Week, "month": algorithms.Month, "year": algorithms.Year,
}

// parseCalendar returns the calendar quota of rate units per unit in zone
// ("" means UTC).
func parseCalendar(rate int64, unit, zone string) (algorithms.Limit, error) {
	u, ok := calendarUnits[unit]
	if !ok {
		return algorithms.Limit{}, fmt.Errorf("the calendar unit %q is none of day, week, month, year", unit)
	}
	loc := time.UTC
	if zone != "" {
		var err error
		if loc, err = time.LoadLocation(zone); err != nil {
			return algorithms.Limit{}, fmt.Errorf("the time zone %q: %v", zone, err)
		}
	}
	return algorithms.Limit{Rate: rate, Calendar: u, Location: loc}, nil
}

// parseLimit parses "100/1m" (or "100/m", "100/minute"), and a calendar
// quota "5000/day" or "5000/month@Europe/Berlin".
func parseLimit(s string) (algorithms.Limit, error) {
	rate, per, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(strings.TrimSpace(rate), 10, 64)
	if !ok || err != nil || n <= 0 {
		return algorithms.Limit{}, fmt.Errorf("-limit %q: want RATE/PERIOD, like 100/1m", s)
	}
	per = strings.TrimSpace(per)
	if unit, zone, _ := strings.Cut(per, "@"); calendarUnits[unit] != 0 {
		l, err := parseCalendar(n, unit, zone)
		if err != nil {
			return l, fmt.Errorf("-limit %q: %v", s, err)
		}
		return l, nil
	}
	switch per {
	case "s", "sec", "second":
		per = "1s"
	case "m", "min", "minute":
		per = "1m"
	case "h", "hour":
		per = "1h"
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return algorithms.Limit{}, fmt.Errorf("-limit %q: the period %q is no duration (1s, 1m, 1h)", s, per)
	}
	return algorithms.Limit{Rate: n, Period: d}, nil
}

// adminPage is the part of an admin endpoint's JSON the CLI reads.
type adminPage struct {
	Sources []struct {
		Name   string `json:"name"`
		Prefix string `json:"prefix"`
		Rules  []struct {
			Name      string            `json:"name"`
			Algorithm string            `json:"algorithm"`
			Rate      int64             `json:"rate"`
			Period    string            `json:"period"`
			Burst     int64             `json:"burst"`
			Calendar  string            `json:"calendar"`
			Location  string            `json:"location"`
			Dynamic   bool              `json:"dynamic_limit"`
			Blocks    json.RawMessage   `json:"blocks"` // absent: an endpoint that does not say
			Totals    map[string]uint64 `json:"totals"`
		} `json:"rules"`
	} `json:"sources"`
}

// fetchAdmin reads one admin endpoint's JSON.
func (g *global) fetchAdmin(ctx context.Context, url string) (*adminPage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, usagef("-admin %q: %v", url, err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.Host == "" {
		return nil, usagef("-admin %q: want an http or https URL of an admin page", url)
	}
	q := req.URL.Query()
	q.Set("format", "json")
	req.URL.RawQuery = q.Encode()
	req.Header.Set("Accept", "application/json")
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var p adminPage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%s: not an admin page's JSON: %w", url, err)
	}
	return &p, nil
}

// adminRules returns every rule the admin endpoints define, by name
// (and by "source/name").
func (g *global) adminRules(ctx context.Context) (map[string]ruleDef, error) {
	defs := map[string]ruleDef{}
	for _, url := range g.admin {
		p, err := g.fetchAdmin(ctx, url)
		if err != nil {
			return nil, err
		}
		for _, s := range p.Sources {
			for _, r := range s.Rules {
				alg, err := algorithms.ParseAlgorithm(r.Algorithm)
				if err != nil {
					continue
				}
				d := ruleDef{Name: r.Name, Algorithm: alg, Prefix: s.Prefix}
				if r.Blocks != nil {
					d.BlocksKnown, d.Blocks = true, string(r.Blocks) != "null"
				}
				switch {
				case r.Dynamic:
				case r.Calendar != "":
					if l, err := parseCalendar(r.Rate, r.Calendar, r.Location); err == nil {
						d.Limit = l
					}
				default:
					period, err := time.ParseDuration(r.Period)
					if err == nil {
						d.Limit = algorithms.Limit{Rate: r.Rate, Period: period, Burst: r.Burst}
					}
				}
				if _, ok := defs[r.Name]; !ok {
					defs[r.Name] = d
				}
				defs[s.Name+"/"+r.Name] = d
			}
		}
	}
	return defs, nil
}

// resolve returns the definition of rule: from the flags, else from the
// admin endpoints. needLimit says whether the limit must be known.
func (g *global) resolve(ctx context.Context, rule string, f *ruleFlags, needLimit bool) (ruleDef, error) {
	def := ruleDef{Name: rule, Prefix: g.prefix}
	if src, name, ok := strings.Cut(rule, "/"); ok && src != "" {
		def.Name = name
	}
	if f.alg == "" && len(g.admin) > 0 {
		defs, err := g.adminRules(ctx)
		if err != nil {
			return def, err
		}
		d, ok := defs[rule]
		if !ok {
			return def, usagef("rule %q is not on the admin endpoints %s", rule, strings.Join(g.admin, ", "))
		}
		def = d
		if def.Prefix == "" {
			def.Prefix = g.prefix
		}
	}
	if f.alg != "" {
		alg, err := algorithms.ParseAlgorithm(f.alg)
		if err != nil {
			return def, usagef("-alg: %v", err)
		}
		def.Algorithm = alg
	}
	if f.limit != "" {
		l, err := parseLimit(f.limit)
		if err != nil {
			return def, usageError{err.Error()}
		}
		def.Limit = l
	}
	if f.burst != 0 {
		def.Limit.Burst = f.burst
	}
	if f.blocks.set {
		def.Blocks, def.BlocksKnown = f.blocks.v, true
	}
	if !def.Algorithm.Valid() {
		return def, usagef("rule %q: its algorithm is unknown: give -alg, or -admin URL", rule)
	}
	if needLimit && def.Limit.Rate == 0 {
		return def, usagef("rule %q: its limit is unknown (a per-request limit?): give -limit RATE/PERIOD", rule)
	}
	if def.Limit.Rate != 0 {
		if err := def.Limit.Validate(def.Algorithm); err != nil {
			return def, usagef("rule %q: %v", rule, err)
		}
	}
	return def, nil
}
