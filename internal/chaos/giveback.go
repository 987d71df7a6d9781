package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// VRefundLost is a refund, a cancel or a compensation that was sent without
// error and gave nothing back: a peek of a fixed window key counted more
// units than the history explains.
const VRefundLost = "refund-lost"

// GiveBackBound is how long after a call ended the store may still be
// giving back, in the background, what a part of it committed, or a call
// that failed may still commit: on a cluster, the compensations of a call
// that failed or ran out of its Timeout are retried for 2 s
// (redisstore's refundTimeout) after a read of up to twice the Timeout,
// and a request held by a stalled proxy (a stall lasts 1.5 s at most)
// reaches its node when the stall ends. Until then a failed call's units
// may be charged; after it, they must be given back, unless the store
// reported the compensation as failed (OnRefundError: a refund-error
// record).
const GiveBackBound = 3 * time.Second

// How long before a fault that may lose writes a write may be lost by it:
// what a replica had not yet received when it was promoted (tens of µs on
// loopback, more for a replica just resumed from a pause), what the
// append-only file had not yet written when its node was killed
// (appendfsync everysec: up to a second).
const (
	replicationLag = int64(250 * time.Millisecond / time.Microsecond)
	fsyncLag       = int64(1100 * time.Millisecond / time.Microsecond)
)

// touches reports whether the fault f can touch the state of the keys of
// hash slot slot: any key when f names no slots (a single node, Sentinel,
// a promotion seen, a split brain).
func touches(f Record, slot int) bool {
	if len(f.Fault.Slots) == 0 {
		return true
	}
	for _, r := range f.Fault.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// scoped returns loss with each promotion seen and split brain given the
// slots of the injected faults that kill, stop or promote nodes and
// overlap it (a pause or a failover of a cluster master promotes within
// its shard): none (every key) when no such fault overlaps it, or when one
// of them names no slots.
func scoped(loss, faults []Record) []Record {
	out := make([]Record, 0, len(loss))
	for _, f := range loss {
		if k := f.Fault.Kind; k == Promotion || k == SplitBrain {
			var slots [][2]int
			all := false
			for _, g := range faults {
				if g.Fault.Observed || !roleKinds[g.Fault.Kind] || g.Start > f.End || (g.End != 0 && g.End < f.Start) {
					continue
				}
				if len(g.Fault.Slots) == 0 {
					all = true
				}
				slots = append(slots, g.Fault.Slots...)
			}
			if !all && len(slots) > 0 {
				fr := *f.Fault
				fr.Slots = slots
				f.Fault = &fr
			}
		}
		out = append(out, f)
	}
	return out
}

// pastDeadline reports whether the call r ended when or after its
// caller's context did (Record.Deadline): the store may then have sent its
// compensations in the background, however short the call. A call without
// a deadline, or that ended before it, compensated before it returned.
func pastDeadline(r Record) bool {
	return r.Deadline != 0 && r.End >= r.Deadline
}

// ref names a decision: its instance and its id there.
type ref struct {
	inst int
	id   int64
}

// fwKey gathers, for one fixed window key, the calls that may have charged
// it and the peeks that read it.
type fwKey struct {
	rate, period int64
	calls        []recRule // decisions, by start
	peeks        []recRule
	insts        map[int]bool // instances with a record of the key
	blocks       bool         // its rule takes quota blocks
}

// recRule is one rule (index j in Rules) of record i.
type recRule struct{ i, j int }

// lostGiveBacks checks that each peek of a fixed window key counts no more
// than the history explains (see VRefundLost). The count of a fixed window
// is exact: the units of the calls that committed in the window, less
// what was given back. A peek (decided by Redis) reads it as
// Rate − Remaining at one instant of the peek. The history explains, at
// most, the units of:
//
//   - every call Redis allowed that may have committed in the window
//     before the peek, less the units of its refunds (Settle) that
//     returned without error before the peek started, when it carried a
//     receipt (Settle of a decision without one returns nil and gives
//     nothing back);
//   - every call Redis denied while this rule of it allowed (on a
//     cluster, its part committed and had to be compensated), while its
//     compensation may be under way: until the call ended; or until
//     GiveBackBound after it when it took Timeout or more, or ran until
//     its caller's context ended (Deadline: either way its compensation
//     went on in the background), or overlapped a fault that
//     kills, stops, promotes or migrates a node (the store retries a
//     compensation the cluster did not run, in the background); or to the
//     end of the window when its instance's store reported a refund error
//     meanwhile;
//   - every call that failed after asking Redis (outcome open or failed,
//     or fallback with the primary's error), that may have committed in
//     the window: until GiveBackBound after its end when it spans hash
//     slots on a cluster (Parts; the store compensates its parts in the
//     background), unless a refund error was reported; otherwise to the
//     end of the window (a call in one slot that timed out after Redis
//     committed it stays charged, by design).
//
// On a cluster a fault counts only for the keys of the slots it names
// (FaultRec.Slots: the shard of its target), and a promotion seen or a
// split brain only for those of the injected faults that kill, stop or
// promote nodes and overlap it (every key when none does); except that a
// master's failure (kill-master, kill-aof, a promotion seen during a pause
// or that no injected fault explains) may put the whole cluster down
// (CLUSTERDOWN), which sends the compensations of every slot to the
// background.
//
// A peek that counts more is a give-back that replied success and gave
// nothing back. Not violations, by construction: a refund that reached
// the key after its window ended (its units are in the old window, which
// the peek does not read), a refund after the refund window or a second
// refund of one reservation (ErrNotRefunded: not a success), a refund
// after a Reset (a reset only lowers the count), a refund or compensation
// that failed (an error, or a refund-error record). A compensation is over
// within GiveBackBound of its call, well inside the 5 s for which its
// commit marker lives (redisstore.RefundWindow): one that came later would
// give nothing back without an error, and is never expected to.
//
// A give-back that a fault may have lost (made from replicationLag before
// a failover, a promotion, a migration or a split brain of the key's
// shard to its end, or from fsyncLag before a kill-aof) counts as not
// given back. Not read: a peek whose window overlaps a clock fault of the
// key's shard or its aftermath (clockLinger: the server's windows move
// with its clock); a key whose rule takes quota blocks (a block charges
// units that no call records), or any epoch key of one; a peek after a
// killed worker process (whose last records may be lost) that had a
// record of the key; a peek not certainly inside one window (2 ms
// margin); a peek the fallback answered.
//
// Each fixed window of a key with such peeks is one violation: its
// Excess, the most units over, and the excerpt of its first peek over.
//
// It returns the violations, and how many peeks of fixed window keys it
// read and how many of them it could check.
func lostGiveBacks(base int64, recs []Record, faults, lossFaults []Record, killed map[int]int64, refunds map[ref][]int, opts CheckOptions) (out []Violation, peeks, checked int) {
	keys := map[string]*fwKey{}
	blockRules := map[string]bool{}
	for i, r := range recs {
		if r.Kind != KindDecision && r.Kind != KindPeek {
			continue
		}
		for j, rr := range r.Rules {
			if rr.Block || rr.Blocks {
				blockRules[rr.Rule] = true
			}
			if rr.Alg != "fixed_window" || rr.Period <= 0 {
				continue
			}
			k := keys[rr.Key]
			if k == nil {
				k = &fwKey{rate: rr.Rate, period: rr.Period, insts: map[int]bool{}}
				keys[rr.Key] = k
			}
			k.insts[r.Inst] = true
			k.blocks = k.blocks || rr.Block || rr.Blocks
			if r.Kind == KindDecision {
				k.calls = append(k.calls, recRule{i, j})
			} else {
				k.peeks = append(k.peeks, recRule{i, j})
			}
		}
	}
	refundErrs := map[int][]int{} // per instance, the refund errors its store reported
	for i, r := range recs {
		if r.Kind == KindRefundError {
			refundErrs[r.Inst] = append(refundErrs[r.Inst], i)
		}
	}
	errIn := func(inst int, from, to int64) bool {
		for _, i := range refundErrs[inst] {
			if t := recs[i].Start; t >= from && t <= to {
				return true
			}
		}
		return false
	}
	// A fault under which the cluster may answer a compensation of a key
	// of slot that it did not run it (CLUSTERDOWN, TRYAGAIN, LOADING,
	// READONLY): the store then sends it again in the background. A
	// master that fails (killed, or stopped until the cluster fails it
	// over: a promotion seen during a pause, or that no injected fault
	// explains) leaves slots without a master, and the whole cluster
	// down, until its replica is promoted; the faults that promote in
	// order (failover, clock) or migrate touch their shard's slots. (A
	// replica's restart, kill on a cluster, touches no master.)
	promotions := scoped(faults, faults)
	clusterWide := func(f Record) bool {
		switch f.Fault.Kind {
		case world.KillMaster, world.KillAOF:
			return true
		case Promotion:
			orderly := false
			for _, g := range faults {
				if g.Fault.Observed || g.Start > f.End || (g.End != 0 && g.End < f.Start) {
					continue
				}
				switch g.Fault.Kind {
				case world.Failover, world.ClockBehind, world.ClockAhead, world.Migrate:
					orderly = true
				case world.Pause, world.KillMaster, world.KillAOF:
					return true
				}
			}
			return !orderly
		}
		return false
	}
	roleFault := func(slot int, from, to int64) bool {
		for _, f := range promotions {
			end := f.End
			if end == 0 {
				end = 1 << 62
			}
			k := f.Fault.Kind
			if f.Start > to || end < from || k == world.Kill || !roleKinds[k] && k != Promotion {
				continue
			}
			if clusterWide(f) || touches(f, slot) {
				return true
			}
		}
		return false
	}

	lossFaults = scoped(lossFaults, faults)
	margin := opts.Margin.Microseconds()
	timeout := opts.Timeout.Microseconds()
	bound := GiveBackBound.Microseconds()
	const forever = int64(1) << 62
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		k := keys[key]
		if _, epoch := epochOf(key); k.blocks || epoch > 0 || len(k.peeks) == 0 {
			continue
		}
		rule := recs[k.peeks[0].i].Rules[k.peeks[0].j].Rule
		if blockRules[rule] {
			continue
		}
		// A clock fault moves the server's windows (and a key's expiry)
		// for its skew and a period past its heal: no peek of a window
		// it overlaps is read. The other faults that may lose writes (a
		// restart, a failover, a promotion, a migration, a split brain)
		// may lose a give-back made from a little before them to their
		// end (not yet replicated, or not yet in the append-only file):
		// such a give-back is not counted as given back.
		slot := hashslot.Of(key)
		var clocks []Record
		for _, f := range lossFaults {
			if !touches(f, slot) {
				continue
			}
			if l := clockLinger(f, k.period); l > 0 {
				if f.End != 0 {
					f.End += l
				}
				clocks = append(clocks, f)
			}
		}
		atRisk := func(from, to int64) bool {
			for _, f := range lossFaults {
				if !touches(f, slot) {
					continue
				}
				switch f.Fault.Kind {
				case world.KillAOF, world.KillMaster, world.Failover, world.Migrate, SplitBrain, Promotion:
				default:
					continue
				}
				end := f.End
				if end == 0 {
					end = forever
				}
				lag := replicationLag
				if f.Fault.Kind == world.KillAOF {
					lag = fsyncLag
				}
				if f.Start-lag <= to && end >= from {
					return true
				}
			}
			return false
		}
		// What each call may hold of the key, and until when (see above).
		type charge struct {
			units     int64
			until     int64      // certainly given back from then on
			commitEnd int64      // the call committed by then, or never
			refunds   [][2]int64 // its refunds that returned success, not at risk: end, units
		}
		charges := make([]charge, len(k.calls))
		for n, c := range k.calls {
			cr := recs[c.i]
			crr := cr.Rules[c.j]
			ch := charge{commitEnd: cr.End}
			switch cr.Outcome {
			case OutAllowed:
				if !crr.Evaluated || !crr.Allowed {
					break
				}
				ch.units, ch.until = crr.Cost, forever
				if !crr.Refund {
					break // no receipt: Settle has nothing to give back, and returns nil
				}
				for _, ri := range refunds[ref{cr.Inst, cr.ID}] {
					if rf := recs[ri]; rf.Result == ResOK && c.j < len(rf.Units) && !atRisk(rf.Start, rf.End) {
						ch.refunds = append(ch.refunds, [2]int64{rf.End, rf.Units[c.j]})
					}
				}
			case OutDenied:
				if !crr.Evaluated || !crr.Allowed {
					break // its part did not commit
				}
				// compensated before the call returned, or else in the
				// background
				ch.units, ch.until = crr.Cost, cr.End
				if cr.End-cr.Start+margin >= timeout || pastDeadline(cr) || roleFault(slot, cr.Start-margin, cr.End+margin) {
					ch.until = cr.End + bound
				}
				if errIn(cr.Inst, cr.Start, ch.until+margin) || atRisk(cr.Start, ch.until) {
					ch.until = forever
				}
			default:
				if cr.Outcome == OutFallback && cr.Err == "" {
					break // the fallback decided alone: Redis was not asked
				}
				ch.units, ch.until, ch.commitEnd = crr.Cost, forever, cr.End+bound
				if cr.Parts >= 2 && !errIn(cr.Inst, cr.Start, cr.End+bound) && !atRisk(cr.Start, cr.End+bound) {
					ch.until = cr.End + bound
				}
			}
			charges[n] = ch
		}
		type finding struct {
			v      Violation
			excess int64
			over   int
		}
		found := map[int64]*finding{}
		var order []int64
		for _, p := range k.peeks {
			o := recs[p.i]
			rr := o.Rules[p.j]
			peeks++
			if (o.Outcome != OutAllowed && o.Outcome != OutDenied) || !rr.Evaluated {
				continue
			}
			w := floorDiv(base+o.Start-margin, k.period)
			if w != floorDiv(base+o.End+margin, k.period) {
				continue
			}
			wStart := w*k.period - base
			wEnd := wStart + k.period
			if len(losesWrites(clocks, wStart-margin, o.End+margin)) > 0 {
				continue
			}
			lost := false
			for inst, at := range killed {
				lost = lost || k.insts[inst] && at >= wStart-bound && at <= o.End
			}
			if lost {
				continue
			}
			checked++
			// The calls that may have committed in the window before the
			// peek read it (no call lasts 10 s), and what they may hold.
			first, _ := slices.BinarySearchFunc(k.calls, wStart-bound-10_000_000, func(c recRule, t int64) int { return cmpInt(recs[c.i].Start, t) })
			inWindow := func(n int) bool {
				cr := recs[k.calls[n].i]
				return cr.Start-margin < wEnd && charges[n].commitEnd+margin >= wStart
			}
			var explained int64
			last := first
			for n := first; n < len(k.calls) && recs[k.calls[n].i].Start-margin <= o.End+margin; n++ {
				last = n + 1
				ch := charges[n]
				if !inWindow(n) || ch.units == 0 || ch.until <= o.Start {
					continue
				}
				units := ch.units
				for _, rf := range ch.refunds {
					if rf[0] <= o.Start {
						units -= rf[1]
					}
				}
				explained += max(units, 0)
			}
			counted := rr.Rate - rr.Remaining
			if counted <= explained {
				continue
			}
			f := found[w]
			if f == nil {
				var ex []Record
				for n := first; n < last; n++ {
					if inWindow(n) {
						cr := recs[k.calls[n].i]
						ex = append(ex, cr)
						for _, ri := range refunds[ref{cr.Inst, cr.ID}] {
							ex = append(ex, recs[ri])
						}
					}
				}
				for inst := range k.insts {
					for _, i := range refundErrs[inst] {
						if t := recs[i].Start; t >= wStart-bound && t <= o.End {
							ex = append(ex, recs[i])
						}
					}
				}
				slices.SortStableFunc(ex, func(a, b Record) int { return cmpInt(a.Start, b.Start) })
				if len(ex) > 40 {
					ex = ex[len(ex)-40:]
				}
				f = &finding{v: Violation{Kind: VRefundLost, Key: key, Excerpt: append(ex, o),
					Msg: fmt.Sprintf("the peek at %v counted %d units in the fixed window [%v, %v) of %d/%v, where the history explains at most %d: a refund, cancel or compensation that returned without error gave nothing back",
						us(o.Start), counted, us(wStart), us(wEnd), k.rate, us(k.period), explained)}}
				found[w] = f
				order = append(order, w)
			}
			f.over++
			f.excess = max(f.excess, counted-explained)
		}
		for _, w := range order {
			f := found[w]
			f.v.Excess = f.excess
			if f.over > 1 {
				f.v.Msg += fmt.Sprintf(" (%d peeks of the window over, by up to %d units)", f.over, f.excess)
			}
			out = append(out, f.v)
		}
	}
	return out, peeks, checked
}
