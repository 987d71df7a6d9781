package lua

import (
	"embed"
	"slices"
	"strconv"
	"strings"
)

//go:embed *.lua
var files embed.FS

// algorithmNames are the algorithms in the order their files are joined,
// named as algorithms.Algorithm.String names them; algorithmNames[i] is
// number i+1, the number ARGV sends for it and every table of the scripts
// (checks, writes, refunds, late, undo, fasts) is generated from, as
// algorithms.Algorithm numbers it (TestScriptNumbers in package
// redisstore checks both against the model).
var algorithmNames = []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "gcra", "concurrency"}

// calendarID numbers a calendar check (calendar.lua) in ARGV, after the
// algorithms: calc.Calendar.
const calendarID = 7

// ID returns the number a script receives in ARGV for a check of the
// algorithm named name ("gcra", as algorithms.Algorithm.String names it,
// or "calendar"), which is the algorithm's algorithms.Algorithm value;
// 0 for an unknown name.
func ID(name string) int {
	if name == "calendar" {
		return calendarID
	}
	for i, n := range algorithmNames {
		if n == name {
			return i + 1
		}
	}
	return 0
}

// table returns a Lua table constructor of the functions <name><suffix>
// of the algorithms in names, keyed by their numbers (ID).
func table(suffix string, names ...string) string {
	var b strings.Builder
	b.WriteString("{")
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("[" + strconv.Itoa(ID(name)) + "] = " + name + suffix)
	}
	b.WriteString("}")
	return b.String()
}

var (
	multi    string
	block    string
	refund   string
	cancel   string
	batchAll string
	single   = map[string]string{}
	batch    = map[string]string{}
	// lean: see Lean. Each is its head, the common case it shares with
	// the algorithm's one-check script, and the empty reply for what that
	// leaves.
	lean = map[string]string{
		"fixed_window": source("fixed_window_lean") + source("fixed_window_count") + "if count then return {count, reset} end\nreturn {}\n",
		"gcra":         source("gcra_lean") + source("gcra_flat") + "return {}\n",
	}
)

// fast holds the flat fast path that starts an algorithm's one-check
// script, for the algorithms that have one (not the sliding log, whose
// common case is already a handful of sorted-set commands): GCRA's is
// flat code, the others' a function (<name>_fast), which batch scripts
// call too: first in their own batch script's flat loop (batch_fast.lua),
// which needs only intf (fast.lua) besides it, then in batch.lua's.
var fast = map[string]string{
	"fixed_window":   "", // see init
	"sliding_window": source("sliding_window_one") + "local fast = sliding_window_fast\n" + source("one_fast"),
	"token_bucket":   source("token_bucket_one") + "local fast = token_bucket_fast\n" + source("one_fast"),
	"gcra":           source("gcra_one") + source("gcra_flat") + "end\n",
}

// checkLine names, for one.lua, the algorithm of a one-check script: its
// function `check` and its number `alg` (as ARGV sends it to dispatch.lua).
func checkLine(name string) string {
	return "local check, alg = " + name + ", '" + strconv.Itoa(ID(name)) + "'\n"
}

// fastFuncs names the algorithms whose fast path is a function.
var fastFuncs = map[string]bool{"fixed_window": true, "sliding_window": true, "token_bucket": true}

func init() {
	prelude := source("prelude")
	var b strings.Builder
	b.WriteString(prelude)
	var fastDefs strings.Builder
	var fastNames []string
	for _, name := range algorithmNames {
		alg := source(name)
		b.WriteString(alg)
		general := prelude + alg + checkLine(name) + source("one")
		switch {
		case name == "fixed_window":
			// The fixed window's fast paths read the server's clock only
			// when they start a window (see fixed_window_flat.lua and
			// fixed_window_one.lua): now is nil until then, and now.lua
			// reads it for the general code.
			single[name] = source("fixed_window_flat") + source("fixed_window_count") + source("fixed_window_flat_end") +
				source("fast") + source("fixed_window_one") +
				"local fast, now = fixed_window_fast, nil\nif ARGV[1] ~= '0' then now = tonumber(ARGV[1]) end\n" +
				source("one_fast") + source("now") + general
		case fast[name] != "":
			single[name] = source("now") + source("fast") + fast[name] + general
		default:
			single[name] = source("now") + general
		}
		id := strconv.Itoa(ID(name))
		entry := "local checks, writes, fasts = " + table("", name) + ", " + table("_write", name) + ", {}\n"
		def := ""
		if fastFuncs[name] {
			def = source(name + "_one")
			entry = "local checks, writes, fasts = " + table("", name) + ", " + table("_write", name) + ", " + table("_fast", name) + "\n"
			fastDefs.WriteString(def)
			fastNames = append(fastNames, name)
		}
		// A batch of one algorithm starts with a flat loop that decides
		// the one-check calls at its head before the prelude and the
		// algorithm are defined: batch_gcra.lua for GCRA, batch_fast.lua
		// around the fast function for the others that have one.
		switch {
		case name == "gcra":
			batch[name] = source("batch_state") + source("fast") + source("batch_gcra") + prelude + alg + entry + source("batch")
		case fastFuncs[name]:
			batch[name] = source("batch_state") + source("fast") + def +
				"local fast, fast_alg = " + name + "_fast, '" + id + "'\n" + source("batch_fast") +
				prelude + alg + entry + source("batch")
		default:
			batch[name] = source("batch_state") + prelude + source("fast") + alg + entry + source("batch")
		}
	}
	all := b.String()
	block = prelude + source("token_bucket") + source("gcra") + source("now") + source("block")
	b.WriteString(source("calendar"))
	// Concurrency is released, never refunded late: refund.lua's table
	// leaves it out, and answers its number as unknown.
	withCalendar := append(slices.Clone(algorithmNames), "calendar")
	refunded := slices.DeleteFunc(slices.Clone(withCalendar), func(n string) bool { return n == "concurrency" })
	refund = b.String() + source("now") + source("unknown") + "local late = " + table("_refund", refunded...) + "\n" + source("refund")
	cancel = b.String() + source("now") + source("unknown") + "local undo = " + table("_refund", withCalendar...) + "\n" + source("cancel")
	b.WriteString(source("now"))
	b.WriteString("local checks, writes, refunds = " + table("", withCalendar...) + ", " + table("_write", withCalendar...) + ", " + table("_refund", withCalendar...) + "\n")
	b.WriteString(source("dispatch"))
	multi = b.String()
	batchAll = source("batch_state") + source("fast") + source("batch_gcra") + all + fastDefs.String() +
		"local checks, writes, fasts = " + table("", algorithmNames...) + ", " + table("_write", algorithmNames...) + ", " + table("_fast", fastNames...) + "\n" + source("batch")
}

// source returns the contents of name.lua.
func source(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("lua: " + err.Error()) // embedded: cannot happen
	}
	return string(b)
}

// Multi returns the script that decides several checks all-or-nothing, or
// refunds them: the prelude, the five algorithms and the dispatch, joined.
func Multi() string { return multi }

// Block returns the script that takes a quota block of a token bucket or
// GCRA key: units its caller may use until a hold has passed, stored as if
// they arrived at its end (see block.lua).
func Block() string { return block }

// Refund returns the script that gives back, later, units that a decide
// call which set a commit marker took: the prelude, the five algorithms
// and refund.lua, joined.
func Refund() string { return refund }

// Cancel returns the script that settles one part of a call spanning
// slots whose caller never learned whether it committed: it gives back
// what the part took if it committed, and otherwise stops it from
// committing later (see cancel.lua).
func Cancel() string { return cancel }

// Single returns the script that decides one check of the algorithm named
// algorithm ("gcra", as algorithms.Algorithm.String names it, or
// "calendar" for a calendar quota, see calendar.lua): the
// prelude, that algorithm alone and the entry point of one.lua. A script's
// cost in Redis grows with its size (each call creates every function it
// defines), so one check runs only the code it needs, and every
// algorithm's but the sliding log's starts with a flat fast path
// (gcra_one.lua, ...) that decides the common case without defining any
// function. It returns "" for an unknown name.
func Single(algorithm string) string { return single[algorithm] }

// Lean returns the lean script of the algorithm named algorithm:
// "fixed_window" (fixed_window_lean.lua) or "gcra" (gcra_lean.lua), "" for
// any other. A lean script decides one check on the server's clock with no
// marker keys, as the algorithm's [Single] script decides it, with only
// the numbers its flat path reads (every ARGV costs Redis on every call);
// it replies empty, having written nothing, for a key state it leaves to
// [Single]. Each file's header says when the Go side sends it, its ARGV
// and its reply.
func Lean(algorithm string) string { return lean[algorithm] }

// Batch returns the script that decides several calls whose checks are
// all of the algorithm named algorithm, one after another, each as its own
// script ([Single] for one check, [Multi] for several) would decide it
// alone (see batch.lua). It returns "" for an unknown name.
func Batch(algorithm string) string { return batch[algorithm] }

// BatchAll returns the script that decides several calls of any
// algorithms, as [Batch] does: it holds all five, so that a queue of
// mixed calls costs one script.
func BatchAll() string { return batchAll }

// Scripts lists every script redlimit runs, for SCRIPT LOAD ahead of
// traffic; preloading is optional, since a NOSCRIPT answer makes go-redis
// send the script itself.
func Scripts() []string {
	s := []string{multi, block, refund, cancel, batchAll, release, renew}
	for _, name := range algorithmNames {
		s = append(s, single[name], batch[name])
	}
	s = append(s, single["calendar"])
	for _, name := range algorithmNames {
		if lean[name] != "" {
			s = append(s, lean[name])
		}
	}
	return s
}
