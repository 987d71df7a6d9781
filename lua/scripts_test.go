package lua_test

import (
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/lua"
	"github.com/redlimit/redlimit/lua/internal/gen"
)

var update = flag.Bool("update", false, "rewrite docs/scripts/*.lua from the scripts the code sends")

// scriptsDir holds the scripts as Redis runs them, for reading: outside
// lua/, whose sources each piece of logic is written in once.
const scriptsDir = "../docs/scripts"

// script is one script Redis runs, as a checked-in file under scripts/:
// its name, what it is for and its calling convention.
type script struct {
	name, purpose, keys, argv, reply string
}

const (
	oneKeys = `KEYS[1]  the storage key
KEYS[2]  sharded clients (Cluster, Ring): the key's pending marker
KEYS[3]  one part of a call spanning slots: the call's commit marker`
	oneArgv = `ARGV[1]     now in µs; 0: the server's clock (TIME)
ARGV[2..6]  capacity, period µs, r, u, cost (see prelude.lua)
ARGV[7]     with KEYS[3]: the refund window in ms`
	oneReply = `allowed (0 denied, 1 allowed, 2 denied while a refund may
still undo it), remaining, retry_after µs, reset_after µs, and the now
in µs (left out by a fast path for a call without KEYS[3])`
	batchKeys = `for each call in turn: its n storage keys; on a sharded client their
pending markers; for a part of a call spanning slots, its commit marker`
	batchArgv = `for each call in turn: n (0: one check with the numbers of the last
call of one check), now (0: TIME), mode (0 one server, 2 sharded, 3 a
part of a call spanning slots), 6 numbers per check (algorithm,
capacity, period µs, r, u, cost), and in mode 3 the refund window in ms`
	batchReply = `for each call in turn, 4 integers per check as one.lua/dispatch.lua
reply them (-1 and zeros: the call raised an error and is run alone),
then the now for a call of several checks or in mode 3`
)

// scripts documents every script the code sends, by name. TestScriptFiles
// checks that it covers every script the sources build.
func scripts() []script {
	algs := []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "gcra", "concurrency"}
	var s []script
	for _, a := range algs {
		s = append(s, script{
			name:    "one_" + a,
			purpose: "Decides one " + a + " check: the common call, a script of its own holding only this algorithm.",
			keys:    oneKeys, argv: oneArgv, reply: oneReply,
		})
	}
	s = append(s, script{
		name: "one_calendar",
		purpose: `Decides one calendar quota (a fixed window over calendar days, weeks,
months or years in a time zone). Lua knows no time zones: the Go side
sends the boundaries of the window around its clock and of the next.`,
		keys: oneKeys,
		argv: `ARGV[1]  now in µs; 0: the server's clock (TIME)
ARGV[2]  capacity
ARGV[3..5] the boundaries s0, s1, s2 of the two windows, in µs
ARGV[6]  cost
ARGV[7]  with KEYS[3]: the refund window in ms`,
		reply: oneReply + `; allowed 3 and the now when the
server's now lies outside both windows (nothing decided, nothing written:
the Go side sends again with windows around that now)`,
	})
	s = append(s,
		script{
			name: "lean_fixed_window",
			purpose: `Decides one fixed_window check on the server's clock with no marker
keys, a period of whole ms and a cost within the capacity, as one_fixed_window
decides it, sent with only the numbers its flat path reads.`,
			keys: "KEYS[1]  the storage key",
			argv: `ARGV[1]  capacity
ARGV[2]  period µs (whole ms)
ARGV[3]  cost, when it is not 1`,
			reply: `{count, reset_after µs}: the key's count with the cost added (allowed
if and only if it is at most the capacity; a denial took the cost back);
empty, nothing written, for a state one_fixed_window decides`,
		},
		script{
			name: "lean_gcra",
			purpose: `Decides one gcra check on the server's clock with no marker keys, for a
limit whose emission interval is a whole number of µs, as one_gcra decides it,
sent with only the numbers its flat path reads.`,
			keys: "KEYS[1]  the storage key",
			argv: `ARGV[1]  capacity (burst)
ARGV[2]  u: the emission interval in µs
ARGV[3]  the stored value's suffix, '/' .. capacity*u
ARGV[4]  cost, when it is not 1`,
			reply: `allowed (0 or 1), remaining, retry_after µs, reset_after µs;
empty, nothing written, for a value one_gcra decides`,
		},
	)
	for _, a := range algs {
		s = append(s, script{
			name: "batch_" + a,
			purpose: `Decides several queued calls whose checks are all ` + a + `, one after
another, each exactly as its own script would alone, in one EVALSHA.`,
			keys: batchKeys, argv: batchArgv, reply: batchReply,
		})
	}
	s = append(s,
		script{
			name: "batch_all",
			purpose: `Decides several queued calls of any algorithms, as batch_<algorithm>
does: it holds all of them, so a queue of mixed calls costs one script.`,
			keys: batchKeys, argv: batchArgv, reply: batchReply,
		},
		script{
			name: "multi",
			purpose: `Decides several checks of one call all-or-nothing (layered rules), or
refunds the checks a part of a call spanning slots committed when
another slot denied (Redis Cluster, Ring).`,
			keys: `KEYS[1..n]  the storage keys
KEYS[n+i]   modes 2 and 3: check i's pending marker
KEYS[2n+1]  mode 3: the call's commit marker in this slot
KEYS[n+1]   mode 1: the commit marker of the decide call refunded`,
			argv: `ARGV[1]  now in µs; 0: the server's clock (TIME)
ARGV[2]  mode: 0 decide, 1 refund, 2 decide on a sharded client, 3 decide
         one part of a call spanning slots
ARGV[3+6(i-1)...]  per check: algorithm (1 fixed_window, 2 sliding_log,
         3 sliding_window, 4 token_bucket, 5 gcra, 6 concurrency,
         7 calendar), capacity, period µs, r, u, cost
then, mode 3: the refund window in ms; mode 1: per check the
reset_after µs its commit replied, then the now its commit replied
(the refund gives back what the commit took as it stands at ARGV[1])`,
			reply: `4 integers per check (allowed, remaining, retry_after µs,
reset_after µs), then the now in µs; allowed 3 for every check when a
calendar check's windows do not hold the server's now; mode 1 then
lists the positions of the checks that found a count they could not
tell as the commit's (nothing given back to them)`,
		},
		script{
			name: "block",
			purpose: `Takes a quota block of a token bucket or GCRA key: k units its caller
may use until a hold has passed, checked at now and stored as if they
arrived at the hold's end (Rule.Blocks, docs/leasing.md). Never refunded.`,
			keys: `KEYS[1]  the storage key`,
			argv: `ARGV[1]  now in µs; 0: the server's clock (TIME)
ARGV[2..6]  capacity, period µs, r, u, k (as one check of one_<algorithm>)
ARGV[7]  the algorithm: 4 token_bucket, 5 gcra
ARGV[8]  the hold in µs`,
			reply: `allowed, remaining (after the block), retry_after µs, reset_after µs,
now µs`,
		},
		script{
			name: "refund",
			purpose: `Gives back, after the response, the units a refundable decide call
reserved and the work did not use ("count only failed logins"), at most
once: only if it deletes the call's commit marker.`,
			keys: `KEYS[1..n]  the storage keys
KEYS[n+1]   the decide call's commit marker in this slot`,
			argv: `ARGV[1]  now in µs; 0: the server's clock (TIME)
ARGV[2]  the now the decide call replied
ARGV[3+7(i-1)...]  per check: algorithm, capacity, period µs, r, u, the
         units to give back, the reset_after µs the commit replied`,
			reply: `1 if the commit marker existed (the units were given back), else 0;
then the now in µs. 2 when the marker existed but some checks found a
count they could not tell as the commit's: the now, then their positions
(nothing given back to them)`,
		},
		script{
			name: "cancel",
			purpose: `Settles one part of a call spanning slots whose caller never learned
whether it committed (its deadline ended, its connection broke): gives back
what it took if it committed, and otherwise stops it from committing later.`,
			keys: `KEYS[1..n]  the storage keys
KEYS[n+1]   the part's commit marker`,
			argv: `ARGV[1]  now in µs; 0: the server's clock (TIME)
ARGV[2]  the commit marker's TTL in ms
ARGV[3+6(i-1)...]  per check, as the part sent it: algorithm, capacity,
         period µs, r (a concurrency check: its lease), u, cost`,
			reply: `0 the part had not run (now it never commits), 1 it had committed and
its units are given back, 2 cancelled already; then the now in µs. 3 it
had committed, but some checks found a count they could not tell as its
commit's: the now, then their positions (nothing given back to them)`,
		},
		script{
			name:    "release",
			purpose: `Frees the slots of concurrency leases before they expire; releasing twice frees nothing the second time.`,
			keys:    `KEYS[i]  the storage key of lease i (one hash slot per call)`,
			argv: `ARGV[1]         now in µs; 0: the server's clock (TIME)
ARGV[2i, 2i+1]  lease i's id and cost (slots)`,
			reply: `per lease, the slots that were held and are now free; then the now in µs`,
		},
		script{
			name:    "renew",
			purpose: `Extends the concurrency leases still held, while long work runs.`,
			keys:    `KEYS[i]  the storage key of lease i (one hash slot per call)`,
			argv: `ARGV[1]            now in µs; 0: the server's clock (TIME)
ARGV[3i-1..3i+1]   lease i's id, cost (slots) and period (µs)`,
			reply: `per lease, 1 if it was held (now expiring at now+period), else 0;
then the now in µs`,
		},
	)
	return s
}

// body marks where the header of a file under scripts/ ends: what follows
// is byte for byte the script the code sends.
const body = "-- ---- the script, as sent ----\n"

// built returns every script the code sends, as the generator builds
// them from the sources, each checked against lua.Script.
func built(t *testing.T) []gen.Script {
	t.Helper()
	all, err := gen.Build(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if got, ok := lua.Script(s.Name); !ok || got != s.Text {
			t.Errorf("lua.Script(%q) is not the script the sources build", s.Name)
		}
	}
	return all
}

// TestScriptFiles keeps docs/scripts/ true: every script the code sends
// is a file there, named after what it is for, whose header says its
// purpose, KEYS, ARGV, reply, SHA1 (as SCRIPT and SLOWLOG show it) and
// the sections it is built from, and whose body is the script itself. It
// fails when a file differs from what the code sends, or when a script
// has no file; go test ./lua -run TestScriptFiles -update rewrites them.
func TestScriptFiles(t *testing.T) {
	docs := map[string]script{}
	for _, s := range scripts() {
		docs[s.name] = s
	}
	want := map[string]string{}
	for _, b := range built(t) {
		d, ok := docs[b.Name]
		if !ok {
			t.Errorf("%s: no header for it in scripts()", b.Name)
			continue
		}
		want[b.Name+".lua"] = render(d, b)
		delete(docs, b.Name)
	}
	for name := range docs {
		t.Errorf("%s: the code builds no such script", name)
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join(scriptsDir, "*.lua"))
		for _, f := range old {
			if _, ok := want[filepath.Base(f)]; !ok {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, text := range want {
			if err := os.WriteFile(filepath.Join(scriptsDir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	names := slices.Sorted(maps.Keys(want))
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(scriptsDir, name))
		if err != nil {
			t.Errorf("docs/scripts/%s: %v (go test ./lua -run TestScriptFiles -update writes it)", name, err)
			continue
		}
		if g := string(got); g != want[name] {
			_, gb, _ := strings.Cut(g, body)
			_, wb, _ := strings.Cut(want[name], body)
			if gb != wb {
				t.Errorf("docs/scripts/%s differs from the script the code sends: go test ./lua -run TestScriptFiles -update", name)
			} else {
				t.Errorf("docs/scripts/%s: its header is out of date: go test ./lua -run TestScriptFiles -update", name)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(scriptsDir, "*.lua"))
	for _, f := range files {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s is no script the code sends: remove it (-update does)", f)
		}
	}
}

// render is the file of the script b, documented by d: a header, then
// the script.
func render(d script, b gen.Script) string {
	sum := sha1.Sum([]byte(b.Text))
	var out strings.Builder
	line := func(s string) {
		if s == "" {
			out.WriteString("--\n")
			return
		}
		out.WriteString("-- " + s + "\n")
	}
	block := func(title, text string) {
		line(title + ":")
		for l := range strings.SplitSeq(text, "\n") {
			line("  " + l)
		}
	}
	line(d.name + ".lua: generated from the sources in lua/ by")
	line("go test ./lua -run TestScriptFiles -update; do not edit.")
	line("")
	for l := range strings.SplitSeq(d.purpose, "\n") {
		line(l)
	}
	line("")
	block("KEYS", d.keys)
	block("ARGV", d.argv)
	block("Reply", d.reply)
	line("")
	line("SHA1 " + hex.EncodeToString(sum[:]) + " (EVALSHA, SCRIPT EXISTS, SLOWLOG)")
	line("Built from these sections of lua/, in order (<file>.<section>, or a")
	line("whole <file>), their formulas inlined where they say --@ inline:")
	for _, l := range wrap(strings.Join(b.Parts, ", "), 72) {
		line("  " + l)
	}
	out.WriteString(body)
	out.WriteString(b.Text)
	return out.String()
}

// wrap cuts s into lines of at most n bytes at spaces.
func wrap(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := strings.LastIndexByte(s[:n], ' ')
		if i <= 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return append(out, s)
}
