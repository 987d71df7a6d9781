package chaos

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// Violation kinds.
const (
	VOverAdmission = "over-admission" // more admitted than the algorithm allows, Redis deciding
	VLockout       = "lockout"        // a key still denied past the ResetAfter it was told, faults over
	VResetIgnored  = "reset-ignored"  // an instance still denied on a key's old epoch well after a reset
	VConcurrency   = "concurrency"    // more slots held at once than the limit
	VRefundTwice   = "refund-twice"   // one reservation given back twice
	VLiveness      = "liveness"       // a decision or peek answered later than Timeout + slack
	VGoroutines    = "goroutines"     // goroutines left running after the run
	VConns         = "connections"    // client connections left open after the run
)

// CheckOptions tune the checker.
type CheckOptions struct {
	// Timeout is the engines' Timeout; Slack what a call may take beyond it
	// (scheduling) before it is a liveness violation.
	Timeout, Slack time.Duration
	// Margin is the uncertainty of a recorded instant against the server's
	// clock (the same machine's clock, read a little before or after).
	Margin time.Duration
	// Settle is how long after a key's told reset (and after the faults
	// stopped) the lockout check waits before a denial counts: a script
	// that was sent before it may still run on the server.
	Settle time.Duration
	// GoroutineSlack is how many goroutines above the baseline are left
	// to the runtime and the world.
	GoroutineSlack int
	// Instances is how many instances share the limits (the engines'
	// Config.Instances): each fallback's admissions are checked against
	// its share (see fallbackAdmissions). 0: unknown, the whole limit.
	Instances int
}

func (o CheckOptions) withDefaults() CheckOptions {
	if o.Timeout == 0 {
		o.Timeout = 50 * time.Millisecond
	}
	if o.Slack == 0 {
		o.Slack = 20 * time.Millisecond
	}
	if o.Margin == 0 {
		o.Margin = 2 * time.Millisecond
	}
	if o.Settle == 0 {
		o.Settle = 300 * time.Millisecond
	}
	if o.GoroutineSlack == 0 {
		o.GoroutineSlack = 10
	}
	return o
}

// Violation is one broken promise, with the records that show it.
type Violation struct {
	Kind    string
	Key     string
	Msg     string
	Excess  int64 // units over the limit (over-admission, concurrency)
	Excerpt []Record
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", v.Kind)
	if v.Key != "" {
		fmt.Fprintf(&b, " key=%s", v.Key)
	}
	fmt.Fprintf(&b, ": %s", v.Msg)
	const most = 24
	for i, r := range v.Excerpt {
		if i == most {
			fmt.Fprintf(&b, "\n    ... %d more", len(v.Excerpt)-most)
			break
		}
		fmt.Fprintf(&b, "\n    %s", r.Line())
	}
	return b.String()
}

// Line formats a record for an excerpt.
func (r Record) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%9.3fms %9.3fms] ", float64(r.Start)/1e3, float64(r.End)/1e3)
	switch r.Kind {
	case KindFault:
		fmt.Fprintf(&b, "FAULT #%d %s %s %s", r.Fault.Seq, r.Fault.Kind, r.Fault.Target, r.Fault.Detail)
		if r.Fault.Err != "" {
			fmt.Fprintf(&b, " err=%q", r.Fault.Err)
		}
		return b.String()
	case KindRefund, KindRelease:
		fmt.Fprintf(&b, "inst %d %s of #%d units=%v: %s", r.Inst, r.Kind, r.Ref, r.Units, r.Result)
	case KindRefundError:
		fmt.Fprintf(&b, "inst %d REFUND ERROR reported by the store (OnRefundError)", r.Inst)
	case KindReset:
		fmt.Fprintf(&b, "inst %d #%d reset %v: %s", r.Inst, r.ID, r.Keys, r.Result)
	case KindStall:
		fmt.Fprintf(&b, "STALL inst %d: a %v timer fired %v late", r.Inst, stallTick, us(r.End-r.Start-stallTick.Microseconds()))
	case KindRunqueue:
		fmt.Fprintf(&b, "RUNQUEUE inst %d: the process's threads waited %v per GOMAXPROCS for a CPU", r.Inst, us(r.Wait))
	default:
		fmt.Fprintf(&b, "inst %d #%d %s %s %s", r.Inst, r.ID, r.Kind, r.Op, r.Outcome)
		for _, rr := range r.Rules {
			fmt.Fprintf(&b, " | %s %s cost=%d", rr.Rule, rr.Key, rr.Cost)
			if rr.Evaluated {
				fmt.Fprintf(&b, " allowed=%v rem=%d retry=%dµs reset=%dµs", rr.Allowed, rr.Remaining, rr.Retry, rr.ResetIn)
			}
		}
	}
	if r.Err != "" {
		fmt.Fprintf(&b, " err=%q", r.Err)
	}
	return b.String()
}

// Summary is what the checker found in one history.
type Summary struct {
	Decisions  int // decisions (Decide calls, Wait's and acquire's attempts, probes)
	Faults     int // faults injected
	Observed   int // promotions seen that no injected fault explains (or does)
	FaultKinds map[string]int
	Outcomes   map[string]int // decisions by outcome (allowed, denied, fallback, open, failed)
	FromBlocks int            // decisions with a rule answered from a quota block
	Violations []Violation
	// Lost are over-admissions in windows that overlap a fault that loses
	// Redis's writes (kill, kill-master, failover, a clock fault): counted
	// apart from Violations; LostUnits sums their excess.
	Lost      []Violation
	LostUnits int64
	// CapacityLost is, per fault kind active in the window ("none" for
	// none), the units of fixed-window capacity denied to requests while
	// less than the limit was admitted: charged to calls that were denied
	// or failed, and never given back.
	CapacityLost map[string]int64
	// RefundsFailed is, per fault kind active at the time, the units of
	// refunds that failed (given back or not: unknown).
	RefundsFailed map[string]int64
	// Stalled counts the calls over the liveness bound that the machine
	// explains: the harness's own timer fired that late (the process was
	// not scheduled), or the process's threads waited that long on the
	// OS run queue (a loaded machine) while the call ran.
	Stalled int
	// GiveBackPeeks counts the peeks of fixed window keys (without quota
	// blocks); GiveBackChecked those the refund-lost check could read
	// (decided by Redis, inside one window, no fault that may lose writes
	// in it: see lostGiveBacks).
	GiveBackPeeks, GiveBackChecked int
	// MaxLatency is the longest decision or peek.
	MaxLatency time.Duration
	// SlowAfter counts the refunds and releases (made after the answer)
	// that took longer than the liveness bound; MaxAfter is the longest.
	SlowAfter int
	MaxAfter  time.Duration
	// FallbackUnits is what the instances' fallbacks admitted, and
	// FallbackBound the sum of what each could per the stated bound
	// (VFallbackShare when one went over).
	FallbackUnits, FallbackBound int64
}

// admission is an allowed check, as the checker counts it.
type admission struct {
	s, e  int64 // µs since the base
	units int64 // the cost, less what a refund may have given back
	rec   int   // index in the records
	block bool  // answered from a quota block
}

// keyInfo gathers one key's history.
type keyInfo struct {
	alg    string
	rate   int64
	period int64 // µs
	burst  int64
	adm    []admission
	resets [][3]int64 // start, end, and the hold of the key's quota blocks (µs)
}

// Check reads h alone and reports what it finds.
func Check(h *History, opts CheckOptions) Summary {
	opts = opts.withDefaults()
	recs := h.Records()
	sum := Summary{FaultKinds: map[string]int{}, Outcomes: map[string]int{}, CapacityLost: map[string]int64{}, RefundsFailed: map[string]int64{}}
	var faults []Record
	killed := map[int]int64{} // instances killed (SIGKILL), and when
	for _, r := range recs {
		if r.Kind == KindFault && r.Fault.Killed {
			killed[r.Fault.Inst] = r.Start
		}
	}
	refunds := map[ref][]int{}
	releases := map[ref][]int{}
	for i, r := range recs {
		switch r.Kind {
		case KindFault:
			faults = append(faults, r)
			if r.Fault.Observed {
				sum.Observed++
				continue
			}
			sum.Faults++
			sum.FaultKinds[r.Fault.Kind]++
		case KindRefund:
			refunds[ref{r.Inst, r.Ref}] = append(refunds[ref{r.Inst, r.Ref}], i)
		case KindRelease:
			releases[ref{r.Inst, r.Ref}] = append(releases[ref{r.Inst, r.Ref}], i)
		case KindDecision:
			sum.Decisions++
			sum.Outcomes[r.Outcome]++
			for _, rr := range r.Rules {
				if rr.Block {
					sum.FromBlocks++
					break
				}
			}
		}
	}

	// Liveness: every bounded call within Timeout + Slack, unless the
	// process was not running for as long as the call took too long.
	bound := (opts.Timeout + opts.Slack).Microseconds()
	var stalls []Record
	queued := map[int][]Record{} // runqueue records by the process's instance (-1: the harness's own)
	for _, r := range recs {
		switch r.Kind {
		case KindStall:
			stalls = append(stalls, r)
		case KindRunqueue:
			queued[r.Inst] = append(queued[r.Inst], r)
		}
	}
	for _, r := range recs {
		d := r.End - r.Start
		switch r.Kind {
		case KindDecision, KindPeek:
		case KindRefund, KindRelease:
			// After the answer: reported, not a liveness violation.
			sum.MaxAfter = max(sum.MaxAfter, us(d))
			if d > bound {
				sum.SlowAfter++
			}
			continue
		default:
			continue
		}
		sum.MaxLatency = max(sum.MaxLatency, us(d))
		if d > bound {
			var late int64
			var ex []Record
			for _, st := range stalls {
				if st.Start < r.End && st.End > r.Start {
					late += st.End - st.Start - stallTick.Microseconds()
					ex = append(ex, st)
				}
			}
			// The run queue: what the threads of the call's process
			// waited for a CPU while it ran, per GOMAXPROCS (a worker
			// process records its own; instances in the harness's
			// process share its records), each record prorated by its
			// overlap.
			qs := queued[r.Inst]
			if len(qs) == 0 {
				qs = queued[-1]
			}
			var waited int64
			for _, q := range qs {
				if o := min(q.End, r.End) - max(q.Start, r.Start); o > 0 && q.End > q.Start {
					waited += q.Wait * o / (q.End - q.Start)
					ex = append(ex, q)
				}
			}
			if max(late, waited) >= d-bound {
				sum.Stalled++
				continue
			}
			sum.Violations = append(sum.Violations, Violation{Kind: VLiveness,
				Msg:     fmt.Sprintf("a %s took %v, above Timeout %v + %v (the process stalled %v meanwhile, its threads waited %v per GOMAXPROCS for a CPU)", r.Kind, us(d), opts.Timeout, opts.Slack, us(late), us(waited)),
				Excerpt: append([]Record{r}, ex...)})
		}
	}

	// Refunds at most once, of reservations that carried a receipt (a
	// decision without one has nothing to give back: Settle returns nil).
	receipts := map[ref]bool{}
	for _, r := range recs {
		if r.Kind == KindDecision {
			for _, rr := range r.Rules {
				if rr.Refund {
					receipts[ref{r.Inst, r.ID}] = true
				}
			}
		}
	}
	for k, idx := range refunds {
		if !receipts[k] {
			continue
		}
		ok := 0
		for _, i := range idx {
			if recs[i].Result == ResOK {
				ok++
			}
		}
		if ok > 1 {
			var ex []Record
			for _, i := range idx {
				ex = append(ex, recs[i])
			}
			sum.Violations = append(sum.Violations, Violation{Kind: VRefundTwice,
				Msg: fmt.Sprintf("decision #%d of instance %d given back %d times", k.id, k.inst, ok), Excerpt: ex})
		}
	}

	for _, r := range recs {
		if r.Kind == KindRefund && r.Result == ResError {
			var u int64
			for _, x := range r.Units {
				u += x
			}
			sum.RefundsFailed[activeKinds(faults, r.Start-opts.Timeout.Microseconds(), r.End)] += u
		}
	}

	// Goroutines back to the baseline.
	for _, r := range recs {
		if r.Kind == KindGoroutines && r.After > r.Before+opts.GoroutineSlack {
			sum.Violations = append(sum.Violations, Violation{Kind: VGoroutines,
				Msg: fmt.Sprintf("%d goroutines after the run, %d before (slack %d)", r.After, r.Before, opts.GoroutineSlack), Excerpt: []Record{r}})
		}
	}

	// Connections back to the baseline.
	for _, r := range recs {
		if r.Kind == KindConns && r.After > r.Before+2 {
			sum.Violations = append(sum.Violations, Violation{Kind: VConns,
				Msg: fmt.Sprintf("%d client connections on the data nodes after the run, %d before", r.After, r.Before), Excerpt: []Record{r}})
		}
	}

	// Per key: admissions decided by Redis, less refunds.
	keys := map[string]*keyInfo{}
	info := func(rr RuleRec) *keyInfo {
		k := keys[rr.Key]
		if k == nil {
			k = &keyInfo{alg: rr.Alg, rate: rr.Rate, period: rr.Period, burst: rr.Burst}
			keys[rr.Key] = k
		}
		return k
	}
	for i, r := range recs {
		switch r.Kind {
		case KindReset:
			for _, key := range r.Keys {
				cut := [3]int64{r.Start, r.End, r.Hold}
				if k := keys[key]; k != nil {
					k.resets = append(k.resets, cut)
				} else {
					keys[key] = &keyInfo{resets: [][3]int64{cut}}
				}
			}
		case KindDecision:
			for j, rr := range r.Rules {
				k := info(rr)
				if k.alg == "" {
					k.alg, k.rate, k.period, k.burst = rr.Alg, rr.Rate, rr.Period, rr.Burst
				}
				if r.Outcome != OutAllowed {
					continue
				}
				units := rr.Cost
				if _, ok := killed[r.Inst]; ok && rr.Refund && len(refunds[ref{r.Inst, r.ID}]) == 0 {
					units = 0 // its refund may have been made, its record lost
				}
				for _, ri := range refunds[ref{r.Inst, r.ID}] {
					if rf := recs[ri]; rf.Result != ResNotRefunded && j < len(rf.Units) {
						units -= rf.Units[j]
					}
				}
				k.adm = append(k.adm, admission{s: r.Start, e: r.End, units: max(units, 0), rec: i, block: rr.Block})
			}
		}
	}

	margin := opts.Margin.Microseconds()
	var end int64
	for _, r := range recs {
		end = max(end, r.End)
	}
	lossFaults := append(slices.Clip(faults), splitBrains(faults, end)...)
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		k := keys[key]
		for _, seg := range k.segments() {
			var found []overage
			switch k.alg {
			case "fixed_window":
				found = fixedWindow(h.Base, k, seg, margin)
			case "sliding_log":
				found = slidingLog(k, seg, margin)
			case "sliding_window":
				found = slidingWindow(h.Base, k, seg, margin)
			case "token_bucket", "gcra":
				found = bucket(k, seg, margin)
			case "concurrency":
				found = inFlight(k, seg, recs, func(a admission) int64 {
					end := a.s + k.period - margin
					rels := releases[ref{recs[a.rec].Inst, recs[a.rec].ID}]
					for _, ri := range rels {
						end = min(end, recs[ri].Start)
					}
					if at, ok := killed[recs[a.rec].Inst]; ok && len(rels) == 0 {
						end = min(end, at) // its release may have been made, its record lost
					}
					return end
				})
			}
			for _, o := range found {
				v := Violation{Kind: VOverAdmission, Key: key, Msg: o.msg, Excess: o.excess}
				if k.alg == "concurrency" {
					v.Kind = VConcurrency
				}
				for _, i := range o.recs {
					v.Excerpt = append(v.Excerpt, recs[i])
				}
				if fs := losesWrites(lossFaults, o.from-k.refill(), o.to); len(fs) > 0 {
					var lossBound int64
					var names []string
					for _, f := range fs {
						v.Excerpt = append(v.Excerpt, f)
						lossBound += k.lossBound(f)
						if f.Fault.Kind == SplitBrain {
							names = append(names, fmt.Sprintf("a split brain of %v (%d master(s) too many)", us(f.End-f.Start).Round(time.Millisecond), f.Fault.Masters))
							continue
						}
						names = append(names, fmt.Sprintf("#%d %s", f.Fault.Seq, f.Fault.Kind))
					}
					if v.Excess <= lossBound {
						v.Msg += fmt.Sprintf(" (lost to %s: within the bound of %d)", strings.Join(names, ", "), lossBound)
						sum.Lost = append(sum.Lost, v)
						sum.LostUnits += v.Excess
						continue
					}
					v.Msg += fmt.Sprintf(" (%s may lose writes, but %d units is beyond their bound of %d)", strings.Join(names, ", "), v.Excess, lossBound)
				}
				sum.Violations = append(sum.Violations, v)
			}
		}
		if k.alg == "fixed_window" {
			capacityLost(h.Base, key, k, recs, faults, margin, sum.CapacityLost)
		}
	}

	var fallbackOver []Violation
	sum.FallbackUnits, sum.FallbackBound, fallbackOver = fallbackAdmissions(recs, opts.Instances, opts.Margin.Microseconds())
	sum.Violations = append(sum.Violations, fallbackOver...)
	lost, peeks, checked := lostGiveBacks(h.Base, recs, faults, lossFaults, killed, refunds, opts)
	sum.Violations = append(sum.Violations, lost...)
	sum.GiveBackPeeks, sum.GiveBackChecked = peeks, checked
	sum.Violations = append(sum.Violations, lockouts(recs, keys, faults, opts)...)
	sum.Violations = append(sum.Violations, staleEpochs(h.Base, recs, faults, opts)...)
	return sum
}

// epochOf splits the storage key of a fixed window rule with quota blocks
// into the key of its epoch 0 and its epoch: "<key>:e<n>" is epoch n of
// "<key>" (see epoch.go); any other key is epoch 0.
func epochOf(key string) (string, int64) {
	i := strings.LastIndex(key, ":e")
	if i < 0 || !strings.HasSuffix(key[:i], "}") {
		return key, 0
	}
	n, err := strconv.ParseInt(key[i+2:], 10, 64)
	if err != nil || n <= 0 {
		return key, 0
	}
	return key[:i], n
}

// staleEpochs: a reset of a fixed window key with quota blocks moves every
// instance to the key's next epoch ("<key>:e<n>"), the resetting one at
// once, the others with their next block call or, when they take no
// blocks (the key exhausted), with the first check the store denies them
// (package redlimit, askEpoch). So once a newer epoch of a key has been
// used in a window, an instance denied on an older epoch of it (stale)
// must not be denied on an old epoch again more than a grace after its
// first stale denial: it would deny the key until the window ends, the
// reset ignored (TestBlocksResetExhausted). The grace is two of the
// blocks' Holds (a quarter Hold of local denials, a quarter between two
// questions, scheduling) plus Timeout and Slack (the question itself).
// Calls that overlap a window's boundary prove nothing, and a fault
// active from FailoverWindow before the first stale denial to the last
// excuses them: a failover may lose the reset's write, a question may
// fail.
func staleEpochs(base int64, recs []Record, faults []Record, opts CheckOptions) []Violation {
	var hold int64
	for _, r := range recs {
		if r.Kind == KindReset {
			hold = max(hold, r.Hold)
		}
	}
	if hold == 0 {
		return nil // no reset of a key with quota blocks
	}
	grace := 2*hold + opts.Timeout.Microseconds() + opts.Slack.Microseconds()
	margin := opts.Margin.Microseconds()
	type use struct {
		s, e, n int64
		per     int64 // the rule's period, µs
		inst    int
		denied  bool
		rec     int
	}
	type wkey struct {
		key string
		w   int64
	}
	uses := map[wkey][]use{}
	for i, r := range recs {
		if r.Kind != KindDecision || r.Outcome == OutFallback || r.Outcome == OutOpen || r.Outcome == OutFailed {
			continue
		}
		for _, rr := range r.Rules {
			if rr.Alg != "fixed_window" || !rr.Evaluated || rr.Period <= 0 {
				continue
			}
			k, n := epochOf(rr.Key)
			w := floorDiv(base+r.Start-margin, rr.Period)
			if w != floorDiv(base+r.End+margin, rr.Period) {
				continue
			}
			uses[wkey{k, w}] = append(uses[wkey{k, w}], use{s: r.Start, e: r.End, n: n, per: rr.Period, inst: r.Inst, denied: !rr.Allowed && !rr.Block, rec: i})
		}
	}
	faulty := func(from, to, period int64) bool {
		for _, f := range faults {
			if f.Start <= to && f.End+clockLinger(f, period) >= from {
				return true
			}
		}
		return false
	}
	var out []Violation
	for _, wk := range slices.SortedFunc(maps.Keys(uses), func(a, b wkey) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmpInt(a.w, b.w)
	}) {
		list := uses[wk]
		slices.SortFunc(list, func(a, b use) int { return cmpInt(a.s, b.s) })
		first := map[int]*use{} // per instance: its first stale denial
		newest := func(before int64) *use {
			var ev *use
			for j := range list {
				if list[j].e < before && (ev == nil || list[j].n > ev.n) {
					ev = &list[j]
				}
			}
			return ev
		}
		for i := range list {
			u := &list[i]
			if f := first[u.inst]; f != nil && u.n > f.n {
				delete(first, u.inst) // it learned of a newer epoch
			}
			if !u.denied {
				continue
			}
			ev := newest(u.s)
			if ev == nil || ev.n <= u.n {
				continue // not stale: no newer epoch used before it
			}
			f := first[u.inst]
			if f == nil {
				first[u.inst] = u
				continue
			}
			if u.s <= f.s+grace || faulty(f.s-FailoverWindow.Microseconds(), u.e, u.per) {
				continue
			}
			out = append(out, Violation{Kind: VResetIgnored, Key: wk.key,
				Msg: fmt.Sprintf("inst %d denied on epoch %d at %v, %v after its first denial on an old epoch (grace %v), while epoch %d was in use",
					u.inst, u.n, us(u.s), us(u.s-f.s), us(grace), ev.n),
				Excerpt: []Record{recs[ev.rec], recs[f.rec], recs[u.rec]}})
			break // one per key and window
		}
	}
	return out
}

// FailoverWindow bounds how long a failover (forced or by a master's
// death), a slot migration or a clock fault (a failover to a skewed node
// and back) lets writes be lost: those a promoted replica had not
// received, and those the old master accepted after the promotion, until
// the clients and sentinels moved (Sentinel's switch takes about 0.8 s).
const FailoverWindow = time.Second

// AOFLossWindow is how much of the last writes a node restarted from its
// append-only file (appendfsync everysec) may have lost.
const AOFLossWindow = 2 * time.Second

// lossBound is the over-admission a fault of kind may cause on k by
// losing writes: a restart (kill) forgets up to everything, two full
// limits (the current and the previous window); a restart from the
// append-only file (kill-aof) the admissions of AOFLossWindow, at least
// as much; a failover-like fault
// the admissions of FailoverWindow plus a full limit. A clock fault is two
// failovers (to the skewed node, and back) and one step of the clock
// forward (onto the node ahead, or back from the node behind), which
// refills at most a full capacity once: a step back creates none (the
// buckets keep their debt, the windows hold at the later window).
//
// A split brain (SplitBrain, seen as more masters at once than the run
// started with) lets each master too many admit a full capacity and the
// key's rate for as long as it lasts plus FailoverWindow: the instances
// that missed the switch decide on it until the sentinels or the cluster
// convert it, and replication then discards what it admitted.
func (k *keyInfo) lossBound(f Record) int64 {
	c := k.rate
	if k.burst > 0 {
		c = k.burst
	}
	failover := c + k.rate*FailoverWindow.Microseconds()/k.period
	switch f.Fault.Kind {
	case SplitBrain:
		return int64(f.Fault.Masters) * (c + k.rate*(f.End-f.Start+FailoverWindow.Microseconds())/k.period)
	case world.Kill:
		return 2 * c
	case world.KillAOF:
		// appendfsync everysec loses up to two seconds of writes (Redis's
		// persistence docs): a bucket forgets what it admitted then
		return max(2*c, c+k.rate*AOFLossWindow.Microseconds()/k.period)
	case world.ClockAhead, world.ClockBehind:
		return 2*failover + c
	}
	return failover
}

// refill is how long a key takes from empty to full capacity with no
// traffic.
func (k *keyInfo) refill() int64 {
	switch k.alg {
	case "sliding_window":
		return 2 * k.period
	case "token_bucket", "gcra":
		c := k.burst
		if c == 0 {
			c = k.rate
		}
		return c * k.period / max(k.rate, 1)
	}
	return k.period
}

// segments splits a key's admissions at its resets: no bound holds across a
// reset, and an admission that may have run during one counts nowhere, nor
// does one answered from a quota block within the block's hold after the
// reset (the block may have been taken before it: docs/leasing.md, Reset).
func (k *keyInfo) segments() [][]admission {
	adm := slices.Clone(k.adm)
	slices.SortFunc(adm, func(a, b admission) int { return cmpInt(a.s, b.s) })
	if len(k.resets) == 0 {
		return [][]admission{adm}
	}
	cuts := slices.Clone(k.resets)
	slices.SortFunc(cuts, func(a, b [3]int64) int { return cmpInt(a[0], b[0]) })
	var segs [][]admission
	var cur []admission
	c := 0
	for _, a := range adm {
		for c < len(cuts) && cuts[c][1] <= a.s {
			segs, cur = append(segs, cur), nil
			c++
		}
		if c < len(cuts) && a.e >= cuts[c][0] {
			continue // overlaps the reset: before or after it, unknown
		}
		if a.block && c > 0 && a.s < cuts[c-1][1]+cuts[c-1][2] {
			continue // maybe from a block taken before the reset
		}
		cur = append(cur, a)
	}
	return append(segs, cur)
}

// overage is one finding: excess units between from and to.
type overage struct {
	from, to int64
	excess   int64
	msg      string
	recs     []int
}

func recsOf(as []admission) []int {
	r := make([]int, len(as))
	for i, a := range as {
		r[i] = a.rec
	}
	return r
}

func us(x int64) time.Duration { return time.Duration(x) * time.Microsecond }

// window is the admissions certainly inside one window of Period aligned
// to the Unix epoch, and their units.
type window struct {
	units int64
	as    []admission
}

// windows groups adm by the epoch-aligned window of k.period each call
// certainly lay in (its start and end, widened by margin, in one window);
// a call that may straddle a boundary counts in none.
func windows(base int64, k *keyInfo, adm []admission, margin int64) map[int64]*window {
	wins := map[int64]*window{}
	for _, a := range adm {
		w := floorDiv(base+a.s-margin, k.period)
		if w != floorDiv(base+a.e+margin, k.period) {
			continue
		}
		x := wins[w]
		if x == nil {
			x = &window{}
			wins[w] = x
		}
		x.units += a.units
		x.as = append(x.as, a)
	}
	return wins
}

// fixedWindow: at most Rate units in each window of Period aligned to the
// Unix epoch, counting the admissions certainly inside the window.
func fixedWindow(base int64, k *keyInfo, adm []admission, margin int64) []overage {
	wins := windows(base, k, adm, margin)
	var out []overage
	for _, w := range slices.Sorted(maps.Keys(wins)) {
		if x := wins[w]; x.units > k.rate {
			from := w*k.period - base
			out = append(out, overage{from: from, to: from + k.period, excess: x.units - k.rate, recs: recsOf(x.as),
				msg: fmt.Sprintf("%d units admitted in the fixed window [%v, %v) of %d/%v", x.units, us(from), us(from+k.period), k.rate, us(k.period))})
		}
	}
	return out
}

// slidingLog: at most Rate units in any interval shorter than Period,
// counting sets of admissions whose calls all lie inside one such interval.
func slidingLog(k *keyInfo, adm []admission, margin int64) []overage {
	var out []overage
	for i := 0; i < len(adm); i++ {
		var units int64
		var set []admission
		for j := i; j < len(adm) && adm[j].s < adm[i].s+k.period; j++ {
			if adm[j].e+margin >= adm[i].s-margin+k.period {
				continue
			}
			units += adm[j].units
			set = append(set, adm[j])
		}
		if units > k.rate {
			to := set[len(set)-1].e
			out = append(out, overage{from: adm[i].s, to: to, excess: units - k.rate, recs: recsOf(set),
				msg: fmt.Sprintf("%d units admitted within %v, sliding log %d/%v", units, us(to-adm[i].s), k.rate, us(k.period))})
			// Skip past this episode: one finding per burst.
			for i+1 < len(adm) && adm[i+1].s <= to {
				i++
			}
		}
	}
	return out
}

// slidingWindow: the sliding window counter's own definition. A check in
// window w at elapsed e passed only if prev·(P−e)/P + cur + cost ≤ Rate,
// prev the units of window w−1 and cur those of w before it; the checker
// evaluates it with what it knows for sure (admissions certainly in each
// window, certainly before the check; e at its latest), a lower bound of
// the estimate the server computed.
func slidingWindow(base int64, k *keyInfo, adm []admission, margin int64) []overage {
	wins := windows(base, k, adm, margin)
	var out []overage
	for _, w := range slices.Sorted(maps.Keys(wins)) {
		x := wins[w]
		var prev int64
		var prevAs []admission
		if p := wins[w-1]; p != nil {
			prev, prevAs = p.units, p.as
		}
		wStart := w * k.period
		for _, a := range x.as {
			var cur int64
			var before []admission
			for _, b := range x.as {
				if b.e+margin < a.s-margin {
					cur += b.units
					before = append(before, b)
				}
			}
			e := min(base+a.e+margin-wStart, k.period)
			est := swEstimate(prev, k.period, e) + float64(cur+a.units)
			if est > float64(k.rate)+1e-9 {
				from := wStart - base
				set := append(append(slices.Clone(prevAs), before...), a)
				out = append(out, overage{from: from - k.period, to: a.e, excess: int64(math.Ceil(est - float64(k.rate) - 1e-9)), recs: recsOf(set),
					msg: fmt.Sprintf("the check at %v passed with an estimate of at least %.3f (previous window %d units, this one %d before it, cost %d), sliding window %d/%v",
						us(a.s), est, prev, cur, a.units, k.rate, us(k.period))})
				break // one finding per window
			}
		}
	}
	return out
}

// swEstimate is the previous window's weight, as calc computes it.
func swEstimate(prev, period, e int64) float64 {
	x := float64(float64(prev) * float64(period-e))
	return float64(x / float64(period))
}

// bucket: the token bucket and GCRA admit at most Burst + Rate·t/Period
// units over any interval of length t; a set of admissions spans at most
// from its earliest start to its latest end.
func bucket(k *keyInfo, adm []admission, margin int64) []overage {
	capacity := k.burst
	if capacity == 0 {
		capacity = k.rate
	}
	var out []overage
	for i := 0; i < len(adm); i++ {
		var units, maxE int64
		var worst *overage
		for j := i; j < len(adm); j++ {
			units += adm[j].units
			maxE = max(maxE, adm[j].e)
			span := maxE - adm[i].s + 2*margin
			allowed := capacity + (k.rate*span)/k.period
			if units > allowed && (worst == nil || units-allowed > worst.excess) {
				worst = &overage{from: adm[i].s, to: maxE, excess: units - allowed, recs: recsOf(adm[i : j+1]),
					msg: fmt.Sprintf("%d units admitted within %v, at most %d for a bucket of %d refilled at %d/%v", units, us(span), allowed, capacity, k.rate, us(k.period))}
			}
		}
		if worst != nil {
			out = append(out, *worst)
			for i+1 < len(adm) && adm[i+1].s <= worst.to {
				i++
			}
		}
	}
	return out
}

// inFlight: never more than Rate slots held at once, counting each
// acquisition held from the end of its call until the earlier of its
// release's start and its lease's end (from the call's start).
func inFlight(k *keyInfo, adm []admission, recs []Record, end func(admission) int64) []overage {
	type ev struct {
		t     int64
		units int64
		a     admission
	}
	var evs []ev
	for _, a := range adm {
		if e := end(a); e > a.e {
			evs = append(evs, ev{a.e, a.units, a}, ev{e, -a.units, a})
		}
	}
	slices.SortFunc(evs, func(x, y ev) int {
		if c := cmpInt(x.t, y.t); c != 0 {
			return c
		}
		return cmpInt(x.units, y.units) // releases first
	})
	var out []overage
	var held int64
	var holding []admission
	for _, x := range evs {
		held += x.units
		if x.units > 0 {
			holding = append(holding, x.a)
		} else {
			holding = slices.DeleteFunc(holding, func(a admission) bool { return a.rec == x.a.rec })
		}
		if held > k.rate && x.units > 0 {
			out = append(out, overage{from: x.t, to: x.t, excess: held - k.rate, recs: recsOf(holding),
				msg: fmt.Sprintf("%d slots held at %v, limit %d", held, us(x.t), k.rate)})
		}
	}
	_ = recs
	return out
}

// losesWrites returns the faults that may lose Redis's writes (a restart
// without them, a promotion of a replica that lacked them, a clock moved)
// and overlap [from, to].
func losesWrites(faults []Record, from, to int64) []Record {
	var out []Record
	for _, f := range faults {
		switch f.Fault.Kind {
		case world.Kill, world.KillAOF, world.KillMaster, world.Failover, world.ClockBehind, world.ClockAhead, world.Migrate, SplitBrain:
		case Promotion:
			if injectedRole(faults, f) {
				continue // the injected fault accounts for it
			}
		default:
			continue
		}
		end := f.End
		if end == 0 {
			end = 1 << 62
		}
		if f.Start <= to && end >= from {
			out = append(out, f)
		}
	}
	return out
}

// clockLinger is how long after a clock fault's heal an instance may still
// act on what it learned from the skewed node, for a fixed window of
// period: a key the node behind kept (its expiry, an absolute time, set
// by the node ahead) replies a reset_after up to the skew longer than its
// window, and an instance holds the epoch of a key with quota blocks until
// then (cluster seed 901: an instance decided on epoch 1 for 0.5 s into the
// next window after a clock-behind of 3 s had failed back, the others on
// epoch 0, and their denials on epoch 0 read as a reset ignored). The
// skew is read from the fault's detail ("skew -3s: ..."); a period more
// for the window it lands in. 0 for any other fault.
func clockLinger(f Record, period int64) int64 {
	if f.Fault == nil || (f.Fault.Kind != world.ClockBehind && f.Fault.Kind != world.ClockAhead) {
		return 0
	}
	rest, ok := strings.CutPrefix(f.Fault.Detail, "skew ")
	if !ok {
		return 0
	}
	skew, err := time.ParseDuration(strings.TrimSuffix(strings.Fields(rest)[0], ":"))
	if err != nil {
		return 0
	}
	return max(skew, -skew).Microseconds() + period
}

// SplitBrain is the kind of a fault the checker derives from the
// promotions seen (Promotion): an interval in which more nodes answered as
// masters than when the run began. A Sentinel master that was failed over
// while paused, or whose failover the sentinels forced, stays a master
// until the sentinels convert it, and the instances whose sentinel had not
// yet told them of the switch decide on it (Sentinel seed 964: 2.6–4.2 s).
const SplitBrain = "split-brain"

// splitBrains returns the split brains the promotions among faults show,
// as observed faults of kind SplitBrain: each from the start of the
// promotion that raised the number of masters above the run's first set
// (the first promotion's "before") to the end of the one that brought it
// back, Masters the most masters too many in between. A split brain still
// open when the history ends lasts to its end, end.
func splitBrains(faults []Record, end int64) []Record {
	var out []Record
	base := -1
	var open *Record
	for _, f := range faults {
		if f.Fault.Kind != Promotion {
			continue
		}
		before, after, ok := strings.Cut(f.Fault.Detail, " → ")
		if !ok {
			continue
		}
		if base < 0 {
			base = len(strings.Split(before, ","))
		}
		n := len(strings.Split(after, ",")) - base
		switch {
		case n > 0 && open == nil:
			open = &Record{Kind: KindFault, Start: f.Start, Fault: &FaultRec{Kind: SplitBrain, Observed: true, Masters: n,
				Detail: "more masters than at the start: " + after}}
		case n > 0:
			open.Fault.Masters = max(open.Fault.Masters, n)
		case open != nil:
			open.End = f.End
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		open.End = max(end, open.Start)
		out = append(out, *open)
	}
	return out
}

// injectedRole reports whether an injected fault that kills or promotes
// nodes, and so loses writes by itself (each within its own bound),
// overlaps the observed promotion p and lasts until p ends, so that its
// own window covers what p loses. A pause does not: a master stopped
// longer than the sentinels' down-after (or the cluster's node timeout)
// is failed over, a failover of its own (Sentinel seed 805: a promotion
// during a pause of the master, 7 keys over in one window, each within a
// failover's bound, reported as violations while the pause excused it).
// Nor does a fault that ended while p went on (Sentinel seed 964: a
// kill-master whose old master had just restarted as a replica when the
// next fault paused the new master; the promotion that pause caused began
// before the kill-master's end and lasted 1.4 s past it, and the keys it
// put over were reported as violations, excused by a fault whose window
// had closed).
func injectedRole(faults []Record, p Record) bool {
	for _, f := range faults {
		if !f.Fault.Observed && roleKinds[f.Fault.Kind] && f.Fault.Kind != world.Pause && f.Start <= p.End && f.End >= p.End {
			return true
		}
	}
	return false
}

// activeKinds lists the kinds of the faults overlapping [from, to], or
// "none".
func activeKinds(faults []Record, from, to int64) string {
	var ks []string
	for _, f := range faults {
		end := f.End
		if end == 0 {
			end = 1 << 62
		}
		if f.Start <= to && end >= from {
			ks = append(ks, f.Fault.Kind)
		}
	}
	if len(ks) == 0 {
		return "none"
	}
	slices.Sort(ks)
	return strings.Join(slices.Compact(ks), "+")
}

// capacityLost adds, for each fixed window in which the key was denied by
// its own rule while fewer than Rate units could have been admitted in it,
// the units never used, to the kinds of the faults active then.
func capacityLost(base int64, key string, k *keyInfo, recs []Record, faults []Record, margin int64, lost map[string]int64) {
	possible := map[int64]int64{} // units of admissions possibly in each window
	for _, a := range k.adm {
		for w := floorDiv(base+a.s-margin, k.period); w <= floorDiv(base+a.e+margin, k.period); w++ {
			possible[w] += recs[a.rec].ruleCost(key)
		}
	}
	denied := map[int64]bool{}
	for _, r := range recs {
		if r.Kind != KindDecision || r.Outcome != OutDenied {
			continue
		}
		for _, rr := range r.Rules {
			if rr.Key != key || !rr.Evaluated || rr.Allowed || rr.Prov || rr.Cost > rr.Rate {
				continue
			}
			w := floorDiv(base+r.Start-margin, k.period)
			if w == floorDiv(base+r.End+margin, k.period) && possible[w]+rr.Cost <= k.rate {
				denied[w] = true
			}
		}
	}
	for w := range denied {
		from := w*k.period - base
		lost[activeKinds(faults, from-k.period, from+k.period)] += k.rate - possible[w]
	}
}

func (r Record) ruleCost(key string) int64 {
	for _, rr := range r.Rules {
		if rr.Key == key {
			return rr.Cost
		}
	}
	return 0
}

// lockouts: once faults stop, a probe of a key made after the key's
// deadline (the latest ResetAfter it was told, or a full refill after a
// call whose answer it never saw, or after the faults stopped) is allowed.
func lockouts(recs []Record, keys map[string]*keyInfo, faults []Record, opts CheckOptions) []Violation {
	deadline := Deadlines(recs, opts)
	probed := map[string]int64{} // units the probes took so far, per key
	var out []Violation
	for _, r := range recs {
		if r.Kind != KindDecision || r.Op != "probe" || r.Outcome == OutFallback || r.Outcome == OutOpen || r.Outcome == OutFailed {
			continue
		}
		for _, rr := range r.Rules {
			dl, ok := deadline[rr.Key]
			took := probed[rr.Key]
			if r.Allowed && rr.Alg != "concurrency" {
				probed[rr.Key] += rr.Cost
			}
			capacity := rr.Rate
			if rr.Burst > 0 {
				capacity = rr.Burst
			}
			if !ok || !rr.Evaluated || rr.Allowed || r.Start <= dl || took+rr.Cost > capacity {
				continue
			}
			var ex []Record
			for _, x := range recs {
				if x.Op != "probe" && x.Kind == KindDecision && x.ruleCost(rr.Key) > 0 && x.End >= dl-2*keys[rr.Key].refill() {
					ex = append(ex, x)
				}
			}
			if len(ex) > 12 {
				ex = ex[len(ex)-12:]
			}
			out = append(out, Violation{Kind: VLockout, Key: rr.Key,
				Msg:     fmt.Sprintf("denied at %v, past its deadline %v (told reset, faults stopped, + %v)", us(r.Start), us(dl), opts.Settle),
				Excerpt: append(ex, r)})
		}
	}
	_ = faults
	return out
}

// Deadlines returns, per key, the instant (µs since the base) by which
// it must be allowed again: the latest end of a call on it plus the
// ResetAfter the call was told (a full refill when it was told nothing),
// and the end of the faults plus a full refill, plus opts.Settle. Probes
// are not counted.
func Deadlines(recs []Record, opts CheckOptions) map[string]int64 {
	opts = opts.withDefaults()
	quiet := int64(0)
	for _, r := range recs {
		if r.Kind == KindFault {
			quiet = max(quiet, r.End)
		}
		if r.Kind == KindPhase && r.Phase == "quiet" {
			quiet = max(quiet, r.Start)
		}
	}
	dl := map[string]int64{}
	for _, r := range recs {
		if (r.Kind != KindDecision && r.Kind != KindPeek) || r.Op == "probe" || r.Op == OpLate || r.Op == OpLatePeek {
			continue // never probed: the late compensations' keys
		}
		for _, rr := range r.Rules {
			k := keyInfo{alg: rr.Alg, rate: rr.Rate, period: rr.Period, burst: rr.Burst}
			d := max(quiet, r.End) + k.refill()
			if rr.Evaluated {
				d = max(r.End+rr.ResetIn, quiet+k.refill())
			}
			dl[rr.Key] = max(dl[rr.Key], d+opts.Settle.Microseconds())
		}
	}
	return dl
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
