package gen

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// Algorithm is an algorithm as the scripts know it: its name (as
// algorithms.Algorithm.String names it, or "calendar"), its number in
// ARGV (as algorithms.Algorithm numbers it; 7 a calendar check), and the
// sections that define its functions in the general code.
type Algorithm struct {
	Name      string
	ID        int
	Functions []string
	Fast      string // the section of its fast function, if it has one
}

// Algorithms are the algorithms in the order the scripts hold them;
// TestScriptNumbers in package redisstore checks the numbers against the
// model's.
var Algorithms = []Algorithm{
	{Name: "fixed_window", ID: 1, Functions: []string{"fixed_window.string", "fixed_window.functions"}, Fast: "fixed_window.fast"},
	{Name: "sliding_log", ID: 2, Functions: []string{"sliding_log"}},
	{Name: "sliding_window", ID: 3, Functions: []string{"sliding_window.functions"}, Fast: "sliding_window.fast"},
	{Name: "token_bucket", ID: 4, Functions: []string{"gcra.bucket", "token_bucket.functions"}, Fast: "token_bucket.fast"},
	{Name: "gcra", ID: 5, Functions: []string{"gcra.bucket", "gcra.functions"}},
	{Name: "concurrency", ID: 6, Functions: []string{"concurrency.functions"}},
}

// Calendar is a calendar quota's check: a fixed window over calendar
// periods, decided by its own function.
var Calendar = Algorithm{Name: "calendar", ID: 7, Functions: []string{"fixed_window.string", "calendar.functions"}}

// Script is one script Redis runs.
type Script struct {
	Name  string
	Parts []string // the sections it joins, in order
	Text  string
}

// part is a section and the values of its ${vars}.
type part struct {
	section string
	vars    map[string]string
}

// recipe is a script's parts.
type recipe struct {
	name  string
	parts []part
}

func p(section string, kv ...string) part {
	vars := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		vars[kv[i]] = kv[i+1]
	}
	return part{section, vars}
}

// table returns a Lua table constructor of the functions <name><suffix>
// of algs, keyed by their numbers.
func table(suffix string, algs ...Algorithm) string {
	var b strings.Builder
	b.WriteString("{")
	for i, a := range algs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("[" + strconv.Itoa(a.ID) + "] = " + a.Name + suffix)
	}
	b.WriteString("}")
	return b.String()
}

// functions returns the parts that define the functions of algs, each
// section once, in order.
func functions(algs ...Algorithm) []part {
	var out []part
	var seen []string
	for _, a := range algs {
		for _, s := range a.Functions {
			if !slices.Contains(seen, s) {
				seen = append(seen, s)
				out = append(out, p(s))
			}
		}
	}
	return out
}

func join(parts ...[]part) []part { return slices.Concat(parts...) }

// recipes returns every script's recipe.
func recipes() []recipe {
	var rs []recipe
	id := func(a Algorithm) string { return strconv.Itoa(a.ID) }
	// one check: the algorithm's flat head, if it has one, then the
	// general code of that algorithm alone
	for _, a := range append(slices.Clone(Algorithms), Calendar) {
		one := p("one", "check", a.Name, "id", id(a))
		general := join([]part{p("prelude")}, functions(a))
		var parts []part
		switch a.Name {
		case "fixed_window":
			parts = join([]part{p("fixed_window.one"), p("now")}, general, []part{one})
		case "gcra":
			parts = join([]part{p("now"), p("fast"), p("gcra.one")}, general, []part{one})
		case "calendar":
			parts = join([]part{p("now")}, general, []part{p("calendar.one"), one})
		default:
			if a.Fast != "" {
				parts = join([]part{p("now"), p("fast"), p(a.Fast), p("one_fast", "fast", a.Name+"_fast")}, general, []part{one})
			} else {
				parts = join([]part{p("now")}, general, []part{one})
			}
		}
		rs = append(rs, recipe{"one_" + a.Name, parts})
	}
	rs = append(rs,
		recipe{"lean_fixed_window", []part{p("fixed_window.lean")}},
		recipe{"lean_gcra", []part{p("gcra.lean")}},
	)
	// batches of one algorithm: a flat loop at the head, then the general
	// code and batch.lua
	for _, a := range Algorithms {
		entry := func(fasts, gcraCall string) part {
			return p("batch", "checks", table("", a), "writes", table("_write", a), "fasts", fasts, "gcra_call", gcraCall)
		}
		var parts []part
		switch {
		case a.Name == "gcra":
			parts = join([]part{p("batch_state"), p("fast"), p("gcra.batch"), p("prelude")}, functions(a),
				[]part{p("gcra.batch_calls"), entry("{}", "gcra_call")})
		case a.Fast != "":
			parts = join([]part{p("batch_state"), p("fast"), p(a.Fast), p("batch_fast", "fast", a.Name+"_fast", "id", id(a)), p("prelude")},
				functions(a), []part{entry(table("_fast", a), "nil")})
		default:
			parts = join([]part{p("batch_state"), p("prelude"), p("fast")}, functions(a), []part{entry("{}", "nil")})
		}
		rs = append(rs, recipe{"batch_" + a.Name, parts})
	}
	var fast []part
	var withFast []Algorithm
	for _, a := range Algorithms {
		if a.Fast != "" {
			fast = append(fast, p(a.Fast))
			withFast = append(withFast, a)
		}
	}
	rs = append(rs, recipe{"batch_all", join([]part{p("batch_state"), p("fast"), p("gcra.batch"), p("prelude")}, functions(Algorithms...), fast,
		[]part{p("gcra.batch_calls"), p("batch", "checks", table("", Algorithms...), "writes", table("_write", Algorithms...),
			"fasts", table("_fast", withFast...), "gcra_call", "gcra_call")})})
	all := append(slices.Clone(Algorithms), Calendar)
	var refunded []Algorithm // concurrency is released, never refunded late
	for _, a := range all {
		if a.Name != "concurrency" {
			refunded = append(refunded, a)
		}
	}
	general := join([]part{p("prelude")}, functions(all...))
	rs = append(rs,
		recipe{"multi", join(general, []part{p("now"), p("dispatch", "checks", table("", all...), "writes", table("_write", all...), "refunds", table("_refund", all...))})},
		recipe{"block", join([]part{p("prelude")}, functions(Algorithms[3], Algorithms[4]), []part{p("now"), p("block")})},
		recipe{"refund", join(general, []part{p("now"), p("unknown"), p("refund", "late", table("_refund", refunded...))})},
		recipe{"cancel", join(general, []part{p("now"), p("unknown"), p("cancel", "undo", table("_refund", all...))})},
		recipe{"release", []part{p("prelude"), p("concurrency.functions"), p("now"), p("release")}},
		recipe{"renew", []part{p("prelude"), p("concurrency.functions"), p("concurrency.renew"), p("now"), p("renew")}},
	)
	return rs
}

// Build returns every script Redis runs, built from the sources in fsys.
func Build(fsys fs.FS) ([]Script, error) {
	src, err := Parse(fsys)
	if err != nil {
		return nil, err
	}
	return src.Build()
}

// Build returns every script Redis runs, built from s.
func (s *Sources) Build() ([]Script, error) {
	var out []Script
	for _, r := range recipes() {
		var b strings.Builder
		var parts []string
		for _, pt := range r.parts {
			text, err := s.Expand(pt.section, pt.vars)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			b.WriteString(text)
			parts = append(parts, pt.section)
		}
		out = append(out, Script{Name: r.name, Parts: parts, Text: b.String()})
	}
	return out, nil
}
