package redisstore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// The previous release's store, as its instances run during a rolling
// deploy (instances of both releases deciding on the same keys) or a
// rollback: the scripts of the fixture testdata/compat/<version>/scripts,
// docs/scripts/ as that release shipped it, called with KEYS and ARGV laid
// out as those files' headers document them.
//
// oldStore is written against that layout alone. It shares no code with
// the current store's argument builders (args.go, lean.go, calendar.go,
// the marker names of cluster.go) nor with package calc: its numbers
// (a bucket's r and u, a calendar quota's boundaries) are computed here,
// so that no change to the current Go side can change what the old side
// sends. Where a header leaves a choice open (which of the scripts that
// decide a call it goes to; the numbers of a calendar check's refund), it
// draws among the choices the header allows, the one the release's own Go
// code made among them. From the current code it uses the model's types
// (a Check, a Result, the errors) and hashslot.Of, which is Redis
// Cluster's CRC16 rule, not the release's format.

// oldLayouts lists the fixture versions whose scripts oldStore can call. A
// release whose scripts keep the KEYS and ARGV of v0.1.0 is added here; a
// release that changed them needs an old store of its own, written from
// its scripts' headers.
var oldLayouts = map[string]bool{"v0.1.0": true}

// compatDir holds the fixtures: compatDir/<version>/scripts/*.lua.
const compatDir = "testdata/compat"

// bodyMark ends the header of a file of docs/scripts: what follows is the
// script byte for byte as the release sent it (see lua/scripts_test.go).
const bodyMark = "-- ---- the script, as sent ----\n"

// oldScriptNames are the fixture's scripts that oldStore calls.
var oldScriptNames = []string{
	"one_fixed_window", "one_sliding_log", "one_sliding_window", "one_token_bucket", "one_gcra",
	"one_concurrency", "one_calendar", "lean_fixed_window", "lean_gcra", "multi",
	"batch_fixed_window", "batch_sliding_log", "batch_sliding_window", "batch_token_bucket",
	"batch_gcra", "batch_concurrency", "batch_all", "refund", "cancel", "release", "renew", "block",
}

// fixture is the previous release's scripts.
type fixture struct {
	version string
	scripts map[string]*redis.Script // by file name, without .lua
}

var (
	versionDir = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)
	shaLine    = regexp.MustCompile(`(?m)^-- SHA1 ([0-9a-f]{40}) `)
)

// loadFixture loads the scripts of the newest release under compatDir:
// the previous release, which the release's tooling copies there from
// docs/scripts. Each file's body must hash to the SHA1 its header names
// (a file edited by hand would not), and every script oldStore calls must
// be there.
func loadFixture(t *testing.T) *fixture {
	t.Helper()
	entries, err := os.ReadDir(compatDir)
	if err != nil {
		t.Fatalf("no fixture of the previous release's scripts: %v", err)
	}
	var newest string
	var best [3]int
	for _, e := range entries {
		m := versionDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		if newest == "" || v[0] > best[0] || v[0] == best[0] && (v[1] > best[1] || v[1] == best[1] && v[2] > best[2]) {
			newest, best = e.Name(), v
		}
	}
	if newest == "" {
		t.Fatalf("%s holds no release (a directory named vX.Y.Z)", compatDir)
	}
	if !oldLayouts[newest] {
		t.Fatalf("%s/%s: no old store calls this release's scripts: if their KEYS and ARGV are those of a release in oldLayouts, add it there; else write one from its headers", compatDir, newest)
	}
	fx := &fixture{version: newest, scripts: map[string]*redis.Script{}}
	dir := filepath.Join(compatDir, newest, "scripts")
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no scripts (%v)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header, body, ok := strings.Cut(string(b), bodyMark)
		m := shaLine.FindStringSubmatch(header)
		if !ok || m == nil {
			t.Fatalf("%s: not a file of docs/scripts (no SHA1 line, or no %q)", f, strings.TrimSpace(bodyMark))
		}
		if sum := sha1.Sum([]byte(body)); hex.EncodeToString(sum[:]) != m[1] {
			t.Fatalf("%s: its script does not hash to the SHA1 its header names (%s): the fixture must be the release's docs/scripts, unedited", f, m[1])
		}
		fx.scripts[strings.TrimSuffix(filepath.Base(f), ".lua")] = redis.NewScript(body)
	}
	for _, name := range oldScriptNames {
		if fx.scripts[name] == nil {
			t.Fatalf("%s: no %s.lua", dir, name)
		}
	}
	return fx
}

// oldStore is a previous release's store: see the top of this file.
type oldStore struct {
	c        redis.Scripter
	fx       *fixture
	now      func() time.Time // nil: the server's clock decides (ARGV now 0)
	calendar func() time.Time // on the server's clock: the clock calendar windows are computed around
	sharded  bool             // a Redis Cluster client: pending markers, parts, compensation
	rng      *rand.Rand       // draws among the scripts a call may go to
	lift     *ttlLift         // nil, or the bucket keys whose TTLs the test raises after each script (see ttlLift)
}

// The algorithm numbers of the fixture's ARGV (multi.lua's header).
const (
	oldFixedWindow = iota + 1
	oldSlidingLog
	oldSlidingWindow
	oldTokenBucket
	oldGCRA
	oldConcurrency
	oldCalendar
)

// oldFiles names each algorithm's scripts (one_<name>, batch_<name>).
var oldFiles = [...]string{
	oldFixedWindow: "fixed_window", oldSlidingLog: "sliding_log", oldSlidingWindow: "sliding_window",
	oldTokenBucket: "token_bucket", oldGCRA: "gcra", oldConcurrency: "concurrency", oldCalendar: "calendar",
}

// oldNums are a check's six numbers in the fixture's ARGV: algorithm,
// capacity, period µs, r, u, cost. prelude.lua (in every script) defines
// them: "cap is the capacity in units, period the window or refill period
// in µs; token_bucket and gcra refill r scaled units per µs, one unit being
// u scaled units, so every refill is an exact integer"; lean_gcra.lua's
// header names u "the emission interval in µs" when r is 1: r/u is rate
// per period µs in lowest terms. A concurrency check sends its lease in
// r; a calendar check its windows' boundaries s0, s1, s2 in period, r, u
// (multi.lua, one_calendar.lua).
type oldNums struct{ alg, cap, period, r, u, cost int64 }

func (n *oldNums) argv() []any { return []any{n.alg, n.cap, n.period, n.r, n.u, n.cost} }

// oldCheckNums returns c's numbers, a calendar check's windows around at.
func oldCheckNums(c *algorithms.Check, at time.Time) oldNums {
	l := c.Limit
	n := oldNums{cap: l.Rate, period: int64(l.Period / time.Microsecond), cost: max(c.Cost, 1)}
	switch c.Algorithm {
	case algorithms.FixedWindow:
		n.alg = oldFixedWindow
		if l.Calendar != 0 {
			n.alg = oldCalendar
			n.period, n.r, n.u = oldCalendarBounds(l.Calendar, l.Location, at)
		}
	case algorithms.SlidingLog:
		n.alg = oldSlidingLog
	case algorithms.SlidingWindow:
		n.alg = oldSlidingWindow
	case algorithms.TokenBucket, algorithms.GCRA:
		n.alg = oldTokenBucket
		if c.Algorithm == algorithms.GCRA {
			n.alg = oldGCRA
		}
		if l.Burst > 0 {
			n.cap = l.Burst
		}
		a, b := l.Rate, n.period
		for b != 0 {
			a, b = b, a%b
		}
		n.r, n.u = l.Rate/a, n.period/a
	case algorithms.Concurrency:
		n.alg = oldConcurrency
		n.r = int64(c.Lease)
	}
	return n
}

// oldCalendarBounds returns the start of the calendar window of unit in
// loc that holds at, its end, and the next window's end, in µs: days from
// midnight, ISO weeks from Monday, months from the 1st, years from January
// 1st (the quotas of docs/calendar-quotas.md). It does not handle a day
// whose midnight a change of clocks skips: the test's zones change at
// 02:00 or 03:00.
func oldCalendarBounds(unit algorithms.CalendarUnit, loc *time.Location, at time.Time) (s0, s1, s2 int64) {
	if loc == nil {
		loc = time.UTC
	}
	t := at.In(loc)
	y, m, d := t.Date()
	start := func(k int) int64 {
		switch unit {
		case algorithms.Week:
			return time.Date(y, m, d-(int(t.Weekday())+6)%7+7*k, 0, 0, 0, 0, loc).UnixMicro()
		case algorithms.Month:
			return time.Date(y, m+time.Month(k), 1, 0, 0, 0, 0, loc).UnixMicro()
		case algorithms.Year:
			return time.Date(y+k, time.January, 1, 0, 0, 0, 0, loc).UnixMicro()
		}
		return time.Date(y, m, d+k, 0, 0, 0, 0, loc).UnixMicro()
	}
	return start(0), start(1), start(2)
}

// clock returns the now a call sends (0: the server's clock) and the
// instant calendar windows are computed around.
func (o *oldStore) clock() (int64, time.Time) {
	if o.now == nil {
		return 0, o.calendar()
	}
	t := o.now()
	return t.UnixMicro(), t
}

// run runs the fixture's script name: EVALSHA, then EVAL on NOSCRIPT.
func (o *oldStore) run(ctx context.Context, name string, keys []string, args []any) ([]int64, error) {
	if o.lift == nil {
		return o.fx.scripts[name].Run(ctx, o.c, keys, args...).Int64Slice()
	}
	held, err := o.lift.hold(ctx, keys)
	if err != nil {
		return nil, err
	}
	vals, err := o.fx.scripts[name].Run(ctx, o.c, keys, args...).Int64Slice()
	if err := o.lift.raise(ctx, held); err != nil {
		return nil, err
	}
	return vals, err
}

// oldSibling names a marker of key in key's hash slot, as the release
// did for a key with a hash tag (the test's keys all have one): key and
// the suffix. The pending marker is ":pending", a commit marker
// ":commit:<id>" (docs/redis-cluster.md).
func oldSibling(key, suffix string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + suffix
		}
	}
	panic("oldStore: a key without a hash tag: " + key)
}

// markers are the marker keys a decide call passes (one.lua, multi.lua):
// none on one server; the pending markers on a sharded client; and a
// commit marker, with its TTL in ms, for a refundable call or a part of a
// call spanning slots.
type oldMarkers struct {
	sharded bool
	commit  string
	window  int64
}

// windowMs is a refund window in whole ms, rounded up.
func windowMs(w time.Duration) int64 { return int64((w + time.Millisecond - 1) / time.Millisecond) }

// refundWindow is the longest RefundWindow of checks.
func refundWindow(checks []algorithms.Check) time.Duration {
	var w time.Duration
	for i := range checks {
		w = max(w, checks[i].RefundWindow)
	}
	return w
}

func (o *oldStore) commitKey(key string) string {
	return oldSibling(key, ":commit:"+strconv.FormatUint(o.rng.Uint64(), 36))
}

// Allow decides checks as the release's Store.Allow: one script on one
// server (a refundable call with its commit and pending markers); on a
// cluster, one per hash slot, and the refunds of the slots that committed
// when another denied.
func (o *oldStore) Allow(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	w := refundWindow(checks)
	if o.sharded {
		return o.allowSharded(ctx, checks, results, w)
	}
	var m oldMarkers
	if w > 0 {
		m = oldMarkers{sharded: true, commit: o.commitKey(checks[0].Key), window: windowMs(w)}
	}
	now, _, err := o.decide(ctx, checks, results, m)
	if err == nil && w > 0 {
		oldReceipts(results[:len(checks)], m.commit, now)
	}
	return err
}

// oldReceipts gives the Results of an allowed refundable call the Receipt
// its refund needs: the commit marker and the now the script replied.
func oldReceipts(results []algorithms.Result, marker string, now int64) {
	for i := range results {
		if !results[i].Allowed {
			return
		}
	}
	for i := range results {
		results[i].Receipt = algorithms.Receipt{Marker: marker, At: now}
	}
}

// decide runs the script that decides checks with markers m, and returns
// the now the script replied (0 when a fast path left it out) and the
// numbers it sent. A call of one check on the server's clock without
// markers goes, one time in two, to the algorithm's lean script when it
// has one that takes the check (lean_fixed_window.lua, lean_gcra.lua).
// A reply of allowed 3 (a calendar check whose windows do not hold the
// server's now) is sent again around that now.
func (o *oldStore) decide(ctx context.Context, checks []algorithms.Check, results []algorithms.Result, m oldMarkers) (int64, []oldNums, error) {
	arg, at := o.clock()
	ns := make([]oldNums, len(checks))
	for i := range checks {
		ns[i] = oldCheckNums(&checks[i], at)
	}
	if len(checks) == 1 && arg == 0 && m == (oldMarkers{}) && o.rng.IntN(2) == 0 {
		if done, err := o.lean(ctx, checks[0].Key, &ns[0], &results[0]); done || err != nil {
			return 0, ns, err
		}
	}
	for try := 0; ; try++ {
		name, keys, args := o.request(checks, ns, arg, m)
		vals, err := o.run(ctx, name, keys, args)
		if err != nil {
			return 0, ns, err
		}
		if try == 0 && len(vals) == 4*len(ns)+1 && vals[0] == 3 {
			at = time.UnixMicro(vals[len(vals)-1])
			for i := range checks {
				if ns[i].alg == oldCalendar {
					ns[i] = oldCheckNums(&checks[i], at)
				}
			}
			continue
		}
		now, err := oldResults(vals, ns, results)
		return now, ns, err
	}
}

// request lays out the call of checks: one_<algorithm>.lua for one check
// (KEYS: the key, its pending marker, the commit marker; ARGV: now, the
// five numbers after the algorithm, the window), multi.lua for several
// (mode 0 on one server, 2 on a sharded client, 3 with a commit marker;
// KEYS: the keys, their pending markers, the commit marker; ARGV: now,
// mode, six numbers per check, the window).
func (o *oldStore) request(checks []algorithms.Check, ns []oldNums, arg int64, m oldMarkers) (string, []string, []any) {
	keys := make([]string, 0, 2*len(checks)+1)
	for i := range checks {
		keys = append(keys, checks[i].Key)
	}
	if m.sharded {
		for i := range checks {
			keys = append(keys, oldSibling(checks[i].Key, ":pending"))
		}
	}
	if m.commit != "" {
		keys = append(keys, m.commit)
	}
	var args []any
	name := "multi"
	// the previous release's one_fixed_window.lua fails on the server's
	// clock for a period of no whole ms ("attempt to perform arithmetic
	// on local 'now'"): an instance of it decides such a check only in a
	// call of several checks or in a batch, which multi.lua stands for
	oddPeriod := ns[0].alg == oldFixedWindow && arg == 0 && ns[0].period%1000 != 0
	if len(checks) == 1 && !oddPeriod {
		name = "one_" + oldFiles[ns[0].alg]
		args = append([]any{arg}, ns[0].argv()[1:]...)
	} else {
		mode := 0
		switch {
		case m.commit != "":
			mode = 3
		case m.sharded:
			mode = 2
		}
		args = []any{arg, mode}
		for i := range ns {
			args = append(args, ns[i].argv()...)
		}
	}
	if m.commit != "" {
		args = append(args, m.window)
	}
	return name, keys, args
}

// lean decides a check with the algorithm's lean script, if it has one
// that takes the check: the fixed window's for a period of whole ms and a
// cost within the capacity (ARGV: capacity, period, the cost unless 1;
// reply: the count with the cost added, allowed if at most the capacity,
// a denial having taken the cost back, and reset_after), GCRA's for a
// whole µs emission interval, r = 1 (ARGV: capacity, u, "/" capacity*u,
// the cost unless 1; reply: one.lua's four). An empty reply leaves the
// check to one_<algorithm>.lua; lean reports whether it decided.
func (o *oldStore) lean(ctx context.Context, key string, n *oldNums, r *algorithms.Result) (bool, error) {
	var args []any
	switch {
	case n.alg == oldFixedWindow && n.period%1000 == 0 && n.cost <= n.cap:
		args = []any{n.cap, n.period}
	case n.alg == oldGCRA && n.r == 1:
		args = []any{n.cap, n.u, "/" + strconv.FormatInt(n.cap*n.u, 10)}
	default:
		return false, nil
	}
	if n.cost != 1 {
		args = append(args, n.cost)
	}
	vals, err := o.run(ctx, "lean_"+oldFiles[n.alg], []string{key}, args)
	if err != nil || len(vals) == 0 {
		return false, err
	}
	if n.alg == oldGCRA {
		var res [1]algorithms.Result
		_, err := oldResults(vals, []oldNums{*n}, res[:])
		*r = res[0]
		return err == nil, err
	}
	if len(vals) != 2 || vals[1] < 0 {
		return false, fmt.Errorf("lean_fixed_window replied %v", vals)
	}
	count, reset := vals[0], time.Duration(vals[1])*time.Microsecond
	*r = algorithms.Result{Allowed: count <= n.cap, Limit: n.cap, Remaining: max(n.cap-count, 0), ResetAfter: reset}
	if !r.Allowed {
		// the count without this check, which the window's end lets in
		r.Remaining, r.RetryAfter = max(n.cap-count+n.cost, 0), reset
	}
	return true, nil
}

// oldResults turns a decide reply (4 integers per check: allowed 0, 1 or 2
// (denied while a refund may undo it), remaining, retry_after µs,
// reset_after µs; then the now, which a one-check fast path leaves out)
// into Results, and returns the now.
func oldResults(vals []int64, ns []oldNums, results []algorithms.Result) (int64, error) {
	var now int64
	switch {
	case len(vals) == 4*len(ns)+1:
		now = vals[len(vals)-1]
	case len(vals) == 4 && len(ns) == 1:
	default:
		return 0, fmt.Errorf("reply %v for %d checks", vals, len(ns))
	}
	for i := range ns {
		v := vals[4*i : 4*i+4]
		if v[0] < 0 || v[0] > 2 || v[2] < 0 || v[3] < 0 {
			return 0, fmt.Errorf("reply %v: check %d malformed", vals, i)
		}
		results[i] = algorithms.Result{
			Allowed:     v[0] == 1,
			Limit:       ns[i].cap,
			Remaining:   max(v[1], 0),
			RetryAfter:  time.Duration(v[2]) * time.Microsecond,
			ResetAfter:  time.Duration(v[3]) * time.Microsecond,
			Provisional: v[0] == 2,
		}
	}
	return now, nil
}

// AllowBatch decides calls, on one server at one now, with one batch
// script, as the release's pipeline did when they queued:
// batch_<algorithm>.lua when every check is of one algorithm, else
// batch_all.lua (batch.lua's header: per call n, now, mode, six numbers
// per check, the window in mode 3; a call of one check whose numbers are
// those of the last call of one check sends n = 0 and not its numbers;
// KEYS per call: its keys, their pending markers and its commit marker in
// mode 3, a refundable call). Calendar quotas are never batched.
func (o *oldStore) AllowBatch(ctx context.Context, calls [][]algorithms.Check, results [][]algorithms.Result) error {
	arg, at := o.clock()
	var keys []string
	var args []any
	var last *oldNums
	kind := int64(-1)
	nss := make([][]oldNums, len(calls))
	modes := make([]int, len(calls))
	marks := make([]string, len(calls))
	for i, checks := range calls {
		ns := make([]oldNums, len(checks))
		for j := range checks {
			ns[j] = oldCheckNums(&checks[j], at)
			switch {
			case ns[j].alg == oldCalendar:
				return errors.New("oldStore: calendar quotas are not batched")
			case kind == -1:
				kind = ns[j].alg
			case kind != ns[j].alg:
				kind = 0
			}
		}
		nss[i] = ns
		if w := refundWindow(checks); w > 0 {
			modes[i], marks[i] = 3, o.commitKey(checks[0].Key)
		}
		for j := range checks {
			keys = append(keys, checks[j].Key)
		}
		if modes[i] == 3 {
			for j := range checks {
				keys = append(keys, oldSibling(checks[j].Key, ":pending"))
			}
			keys = append(keys, marks[i])
		}
		if len(ns) == 1 && modes[i] != 3 && last != nil && *last == ns[0] {
			args = append(args, 0, arg, modes[i])
			continue
		}
		if len(ns) == 1 {
			last = &ns[0]
		}
		args = append(args, len(ns), arg, modes[i])
		for j := range ns {
			args = append(args, ns[j].argv()...)
		}
		if modes[i] == 3 {
			args = append(args, windowMs(refundWindow(checks)))
		}
	}
	name := "batch_all"
	if kind > 0 {
		name = "batch_" + oldFiles[kind]
	}
	vals, err := o.run(ctx, name, keys, args)
	if err != nil {
		return err
	}
	off := 0
	for i, ns := range nss {
		n := 4 * len(ns)
		if len(ns) > 1 || modes[i] == 3 {
			n++
		}
		if off+n > len(vals) {
			return fmt.Errorf("%s replied %d values: too few", name, len(vals))
		}
		v := vals[off : off+n]
		off += n
		if v[0] == -1 {
			return fmt.Errorf("%s: call %d raised an error", name, i)
		}
		now, err := oldResults(v, ns, results[i])
		if err != nil {
			return err
		}
		if modes[i] == 3 {
			oldReceipts(results[i][:len(ns)], marks[i], now)
		}
	}
	if off != len(vals) {
		return fmt.Errorf("%s replied %d values, want %d", name, len(vals), off)
	}
	return nil
}

// Refund gives back refunds as the release's Store.Refund: one refund.lua
// per commit marker (KEYS: the keys, the marker; ARGV: now, the commit's
// now, then per check its algorithm, capacity, period, r, u, the units and
// the reset_after its commit replied; reply 1 if it gave back, else 0).
// A calendar check goes as algorithm 7 with its windows, or, as the
// release's Go code sent it, as a fixed window of period 0: refund.lua
// reads either from the key.
func (o *oldStore) Refund(ctx context.Context, refunds []algorithms.Refund) error {
	arg, _ := o.clock()
	var order []string
	groups := map[string][]int{}
	for i := range refunds {
		m := refunds[i].Result.Receipt.Marker
		if groups[m] == nil {
			order = append(order, m)
		}
		groups[m] = append(groups[m], i)
	}
	var first error
	for _, marker := range order {
		g := groups[marker]
		units := false
		for _, i := range g {
			units = units || refunds[i].Units > 0
		}
		if !units {
			continue
		}
		at := refunds[g[0]].Result.Receipt.At
		keys := make([]string, 0, len(g)+1)
		args := []any{arg, at}
		for _, i := range g {
			r := &refunds[i]
			n := oldCheckNums(&r.Check, time.UnixMicro(at))
			if n.alg == oldCalendar && o.rng.IntN(2) == 0 {
				n = oldNums{alg: oldFixedWindow, cap: n.cap}
			}
			n.cost = r.Units
			keys = append(keys, r.Check.Key)
			args = append(append(args, n.argv()...), int64(r.Result.ResetAfter/time.Microsecond))
		}
		keys = append(keys, marker)
		vals, err := o.run(ctx, "refund", keys, args)
		switch {
		case err == nil && (len(vals) != 2 || vals[0] < 0 || vals[0] > 1):
			err = fmt.Errorf("refund replied %v", vals)
		case err == nil && vals[0] == 0:
			err = fmt.Errorf("%w (commit %s)", algorithms.ErrNotRefunded, marker)
		}
		if err != nil && (first == nil || errors.Is(first, algorithms.ErrNotRefunded)) {
			first = err
		}
	}
	return first
}

// Cancel settles a commit whose caller gives up on it (cancel.lua; the
// release sent it for a part of a call spanning slots whose reply it never
// had): KEYS: the keys, the commit marker; ARGV: now, the marker's TTL in
// ms, six numbers per check as the part sent them. It returns the reply:
// 0 the part had not run, 1 its units are given back, 2 cancelled already.
func (o *oldStore) Cancel(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) (int64, error) {
	arg, _ := o.clock()
	r := results[0].Receipt
	keys := make([]string, 0, len(checks)+1)
	args := []any{arg, windowMs(refundWindow(checks))}
	for i := range checks {
		n := oldCheckNums(&checks[i], time.UnixMicro(r.At))
		keys = append(keys, checks[i].Key)
		args = append(args, n.argv()...)
	}
	vals, err := o.run(ctx, "cancel", append(keys, r.Marker), args)
	if err == nil && (len(vals) != 2 || vals[0] < 0 || vals[0] > 2) {
		err = fmt.Errorf("cancel replied %v", vals)
	}
	if err != nil {
		return 0, err
	}
	return vals[0], nil
}

// Release frees leases (release.lua: KEYS the leases' keys; ARGV now, then
// each lease's id and cost), in one call on one server, one per lease on
// a cluster.
func (o *oldStore) Release(ctx context.Context, leases []algorithms.Lease) error {
	return o.leases(ctx, "release", leases, func(l *algorithms.Lease) []any { return []any{l.ID, max(l.Cost, 1)} }, nil)
}

// Renew extends leases (renew.lua: ARGV now, then each lease's id, cost
// and period µs; reply 1 per lease held).
func (o *oldStore) Renew(ctx context.Context, leases []algorithms.Lease, held []bool) error {
	return o.leases(ctx, "renew", leases, func(l *algorithms.Lease) []any {
		return []any{l.ID, max(l.Cost, 1), int64(l.Period / time.Microsecond)}
	}, held)
}

func (o *oldStore) leases(ctx context.Context, name string, leases []algorithms.Lease, argv func(*algorithms.Lease) []any, held []bool) error {
	arg, _ := o.clock()
	run := func(ls []algorithms.Lease, out []bool) error {
		keys := make([]string, len(ls))
		args := []any{arg}
		for i := range ls {
			keys[i] = ls[i].Key
			args = append(args, argv(&ls[i])...)
		}
		vals, err := o.run(ctx, name, keys, args)
		if err == nil && len(vals) != len(ls)+1 {
			err = fmt.Errorf("%s replied %v for %d leases", name, vals, len(ls))
		}
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = vals[i] == 1
		}
		return nil
	}
	part := func(i, j int) []bool {
		if held == nil {
			return nil
		}
		return held[i:j]
	}
	if !o.sharded {
		return run(leases, part(0, len(leases)))
	}
	for i := range leases {
		if err := run(leases[i:i+1], part(i, i+1)); err != nil {
			return err
		}
	}
	return nil
}

// TakeBlock takes a quota block (block.lua: KEYS the key; ARGV now, the
// five numbers after the algorithm with the block's units as cost, the
// algorithm, the hold in µs; reply: one.lua's four and the now).
func (o *oldStore) TakeBlock(ctx context.Context, c algorithms.Check, hold time.Duration) (algorithms.Result, error) {
	arg, at := o.clock()
	n := oldCheckNums(&c, at)
	args := append(append([]any{arg}, n.argv()[1:]...), n.alg, int64(hold/time.Microsecond))
	vals, err := o.run(ctx, "block", []string{c.Key}, args)
	if err != nil {
		return algorithms.Result{}, err
	}
	var r [1]algorithms.Result
	_, err = oldResults(vals, []oldNums{n}, r[:])
	return r[0], err
}

// oldPart is the checks of a call that live in one hash slot.
type oldPart struct {
	idx    []int
	checks []algorithms.Check
	res    []algorithms.Result
	ns     []oldNums
	now    int64
	commit string
}

// oldRefundWindow is the release's RefundWindow: the least TTL of the
// markers of a call spanning slots, which serve its compensation.
const oldRefundWindow = 5 * time.Second

// allowSharded decides a call on a cluster as the release did: the checks
// of one hash slot as one script with their pending markers (mode 2; a
// refundable call with its commit marker, mode 3); a call spanning slots
// as one part per slot (mode 3, each with a commit marker), and when a
// part denies, the parts that committed are refunded at once by multi.lua
// in mode 1 (KEYS: the part's keys and commit marker; ARGV: now, 1, six
// numbers per check, the reset_after each commit replied, the commit's
// now), whose reply, the checks' state after the refund, replaces theirs.
func (o *oldStore) allowSharded(ctx context.Context, checks []algorithms.Check, results []algorithms.Result, w time.Duration) error {
	var parts []oldPart
	slots := map[int]int{}
	for i := range checks {
		s := hashslot.Of(checks[i].Key)
		j, ok := slots[s]
		if !ok {
			j = len(parts)
			slots[s] = j
			parts = append(parts, oldPart{})
		}
		parts[j].idx = append(parts[j].idx, i)
		parts[j].checks = append(parts[j].checks, checks[i])
	}
	if len(parts) == 1 {
		m := oldMarkers{sharded: true}
		if w > 0 {
			m.commit, m.window = o.commitKey(checks[0].Key), windowMs(w)
		}
		now, _, err := o.decide(ctx, checks, results, m)
		if err == nil && w > 0 {
			oldReceipts(results[:len(checks)], m.commit, now)
		}
		return err
	}
	id := strconv.FormatUint(o.rng.Uint64(), 36)
	window := max(windowMs(w), oldRefundWindow.Milliseconds())
	allowed := true
	for j := range parts {
		p := &parts[j]
		p.commit = oldSibling(p.checks[0].Key, ":commit:"+id)
		p.res = make([]algorithms.Result, len(p.checks))
		var err error
		if p.now, p.ns, err = o.decide(ctx, p.checks, p.res, oldMarkers{sharded: true, commit: p.commit, window: window}); err != nil {
			return err
		}
		for _, r := range p.res {
			allowed = allowed && r.Allowed
		}
	}
	for j := range parts {
		p := &parts[j]
		committed := true
		for _, r := range p.res {
			committed = committed && r.Allowed
		}
		switch {
		case !allowed && committed:
			if err := o.compensate(ctx, p); err != nil {
				return err
			}
		case allowed && w > 0:
			oldReceipts(p.res, p.commit, p.now)
		}
		for k, i := range p.idx {
			results[i] = p.res[k]
		}
	}
	return nil
}

// compensate refunds a part that committed in a call another part denied.
func (o *oldStore) compensate(ctx context.Context, p *oldPart) error {
	arg, _ := o.clock()
	keys := make([]string, 0, len(p.checks)+1)
	args := []any{arg, 1}
	for i := range p.checks {
		keys = append(keys, p.checks[i].Key)
		args = append(args, p.ns[i].argv()...)
	}
	for i := range p.checks {
		args = append(args, int64(p.res[i].ResetAfter/time.Microsecond))
	}
	args = append(args, p.now)
	vals, err := o.run(ctx, "multi", append(keys, p.commit), args)
	if err != nil {
		return err
	}
	_, err = oldResults(vals, p.ns, p.res)
	return err
}
