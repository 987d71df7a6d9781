package chaos

import (
	"fmt"
	"maps"
	"slices"
)

// VFallbackShare is a violation kind: an instance's fallback admitted
// more of a key than docs/failure-policies.md says it can.
const VFallbackShare = "fallback-share"

// fallbackAdmissions compares what each instance's fallback admitted of
// each key with the bound docs/failure-policies.md states: with instances
// sharing the limit (engine.Config.Instances; 0, unknown, counts as 1),
// the fallback enforces its share, the rate and the burst divided by
// instances, rounded down, at least 1. Over the span from its first to
// its last admission of a key it admits at most, for a bucket (token
// bucket, GCRA), the share's capacity plus the share's refill over the
// span, rounded up; for a window (fixed, sliding, sliding log), the
// share's rate for each window the span touches. Refunds given back count off.
// Concurrency slots and calendar quotas are left out. It returns the
// units the fallbacks admitted, the sum of their bounds, and the
// violations.
func fallbackAdmissions(recs []Record, instances int) (units, bound int64, out []Violation) {
	n := int64(max(instances, 1))
	type ik struct {
		inst int
		key  string
	}
	type use struct {
		rr       RuleRec
		from, to int64 // µs
		units    int64
		recs     []int
	}
	refunded := map[[2]int64][]int64{} // (inst, decision id): units given back per rule
	for _, r := range recs {
		if r.Kind == KindRefund && r.Result != ResNotRefunded && r.Result != ResError {
			k := [2]int64{int64(r.Inst), r.Ref}
			refunded[k] = append(refunded[k], r.Units...)
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
				u = &use{rr: rr, from: r.Start}
				uses[ik{r.Inst, rr.Key}] = u
			}
			u.to = max(u.to, r.End)
			u.units += rr.Cost
			if j < len(back) {
				u.units -= back[j]
			}
			u.recs = append(u.recs, i)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(uses), func(a, b ik) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return a.inst - b.inst
	}) {
		u := uses[k]
		rate := max(u.rr.Rate/n, 1)
		capacity := rate
		if u.rr.Burst > 0 && (u.rr.Alg == "token_bucket" || u.rr.Alg == "gcra") {
			capacity = max(u.rr.Burst/n, 1)
		}
		span := u.to - u.from
		var b int64
		if u.rr.Alg == "token_bucket" || u.rr.Alg == "gcra" {
			b = capacity + (rate*span+u.rr.Period-1)/u.rr.Period // continuous refill
		} else {
			b = rate * ((span+u.rr.Period-1)/u.rr.Period + 1) // the windows it touched
		}
		units += u.units
		bound += b
		if u.units > b {
			v := Violation{Kind: VFallbackShare, Key: k.key, Excess: u.units - b,
				Msg: fmt.Sprintf("inst %d's fallback admitted %d units over %v, above its bound of %d (share %d/%v of %d/%v, %d instances)",
					k.inst, u.units, us(u.to-u.from), b, rate, us(u.rr.Period), u.rr.Rate, us(u.rr.Period), n)}
			for _, i := range u.recs[:min(len(u.recs), 24)] {
				v.Excerpt = append(v.Excerpt, recs[i])
			}
			out = append(out, v)
		}
	}
	return units, bound, out
}
