package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// VFallbackShare is a violation kind: an instance's fallback admitted
// more of a key than docs/failure-policies.md says it can.
const VFallbackShare = "fallback-share"

// fallbackAdmissions compares what each instance's fallback admitted of
// each key with the bound docs/failure-policies.md states: with instances
// sharing the limit (redlimit.Config.Instances; 0, unknown, counts as 1),
// the fallback enforces its share, the rate and the burst divided by
// instances, rounded down, at least 1. Any set of its admissions of a key
// whose calls lie within an interval of t (plus margin either side) holds
// at most, for a bucket (token bucket, GCRA), the share's capacity plus
// the share's refill over t, rounded up; for a window (fixed, sliding,
// sliding log), the share's rate for each window t can touch. Refunds
// given back count off (all of a decision's, whenever made: that only
// lowers a count). Concurrency slots and calendar quotas are left out.
//
// A reset of the key on the instance (a reset of its keys) resets its
// fallback's state too, whatever the reset returned: the engine resets
// the fallback before the primary, so a reset that failed on Redis has
// often emptied the fallback's key. Each such reset starts the key's count
// afresh on that instance, and an admission whose call overlaps the reset
// counts on neither side (its order against the reset is not known).
//
// It returns the units the fallbacks admitted, the sum of their bounds
// (each instance's and key's, per stretch between resets, over the
// stretch, plus the units that overlap a reset), and the violations: at
// most one per instance and key, the set of its admissions furthest over.
func fallbackAdmissions(recs []Record, instances int, margin int64) (units, bound int64, out []Violation) {
	n := int64(max(instances, 1))
	type ik struct {
		inst int
		key  string
	}
	type adm struct {
		s, e, units int64
		rec         int
	}
	type use struct {
		rr   RuleRec
		adms []adm
	}
	refunded := map[[2]int64][]int64{} // (inst, decision id): units given back per rule
	resets := map[ik][]int{}           // the resets of a key on an instance: record indices
	for i, r := range recs {
		switch {
		case r.Kind == KindRefund && r.Result != ResNotRefunded && r.Result != ResError:
			k := [2]int64{int64(r.Inst), r.Ref}
			refunded[k] = append(refunded[k], r.Units...)
		case r.Kind == KindReset:
			for _, key := range r.Keys {
				resets[ik{r.Inst, key}] = append(resets[ik{r.Inst, key}], i)
			}
		}
	}
	uses := map[ik]*use{}
	for i, r := range recs {
		if r.Kind != KindDecision || r.Outcome != OutFallback || !r.Allowed {
			continue
		}
		back := refunded[[2]int64{int64(r.Inst), r.ID}]
		for j, rr := range r.Rules {
			if !rr.Evaluated || !rr.Allowed || rr.Block || rr.Alg == "concurrency" || rr.Period <= 0 || rr.Rate <= 0 {
				continue
			}
			u := uses[ik{r.Inst, rr.Key}]
			if u == nil {
				u = &use{rr: rr}
				uses[ik{r.Inst, rr.Key}] = u
			}
			a := adm{s: r.Start, e: r.End, units: rr.Cost, rec: i}
			if j < len(back) {
				a.units = max(a.units-back[j], 0)
			}
			u.adms = append(u.adms, a)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(uses), func(a, b ik) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.inst, b.inst))
	}) {
		u := uses[k]
		rate := max(u.rr.Rate/n, 1)
		capacity := rate
		isBucket := u.rr.Alg == "token_bucket" || u.rr.Alg == "gcra"
		if u.rr.Burst > 0 && isBucket {
			capacity = max(u.rr.Burst/n, 1)
		}
		// most is the bound over an interval of span µs
		most := func(span int64) int64 {
			span += 2 * margin
			if isBucket {
				return capacity + (rate*span+u.rr.Period-1)/u.rr.Period // continuous refill
			}
			return rate * ((span+u.rr.Period-1)/u.rr.Period + 1) // the windows it can touch
		}
		// the stretches between resets; an admission overlapping one is in none
		cuts := resets[k]
		slices.SortFunc(cuts, func(a, b int) int { return cmp.Compare(recs[a].End, recs[b].End) })
		stretches := [][]adm{nil}
		slices.SortFunc(u.adms, func(a, b adm) int { return cmp.Compare(a.s, b.s) })
		next := 0 // the first cut that does not end before the admission starts
		for _, a := range u.adms {
			units += a.units
			before := next
			for next < len(cuts) && recs[cuts[next]].End < a.s {
				next++
			}
			if next > before {
				stretches = append(stretches, nil)
			}
			if slices.ContainsFunc(cuts[next:], func(c int) bool { return recs[c].Start <= a.e }) {
				bound += a.units // overlaps a reset: counted nowhere
				continue
			}
			stretches[len(stretches)-1] = append(stretches[len(stretches)-1], a)
		}
		var worst *Violation
		for _, st := range stretches {
			if len(st) == 0 {
				continue
			}
			from, to := st[0].s, st[0].e
			for _, a := range st {
				to = max(to, a.e)
			}
			bound += most(to - from)
			// every set of the admissions within [st[i].s, an end]: by
			// start, then those starting there or later by end
			byEnd := slices.Clone(st)
			slices.SortFunc(byEnd, func(a, b adm) int { return cmp.Compare(a.e, b.e) })
			var over, sum, lo, hi int64
			for i := range st {
				sum = 0
				for _, a := range byEnd {
					if a.s < st[i].s {
						continue
					}
					sum += a.units
					if x := sum - most(a.e-st[i].s); x > over {
						over, lo, hi = x, st[i].s, a.e
					}
				}
			}
			if over == 0 || (worst != nil && over <= worst.Excess) {
				continue
			}
			var got int64
			v := Violation{Kind: VFallbackShare, Key: k.key, Excess: over}
			for _, a := range st {
				if a.s >= lo && a.e <= hi {
					got += a.units
					v.Excerpt = append(v.Excerpt, recs[a.rec])
				}
			}
			v.Msg = fmt.Sprintf("inst %d's fallback admitted %d units within %v, above its bound of %d (share %d/%v of %d/%v, %d instances)",
				k.inst, got, us(hi-lo), got-over, rate, us(u.rr.Period), u.rr.Rate, us(u.rr.Period), n)
			// the resets of the key on the instance in the period before
			for _, c := range cuts {
				if r := recs[c]; r.End >= lo-u.rr.Period && r.Start <= hi {
					v.Excerpt = append(v.Excerpt, r)
				}
			}
			slices.SortStableFunc(v.Excerpt, func(a, b Record) int { return cmp.Compare(a.Start, b.Start) })
			worst = &v
		}
		if worst != nil {
			out = append(out, *worst)
		}
	}
	return units, bound, out
}
