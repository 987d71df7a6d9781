package calc

import "strings"

// Refund gives back p.Cost units that a commit at at (µs), which replied
// reset µs as its reset_after, took from s, at now: the late refund of
// lua/refund.lua, operation for operation. exists says whether s holds
// stored state; since is the µs that refunds of earlier commits gave back
// after the commit (RefundRecord.Since: the token bucket and GCRA take it
// off the commit's horizon). It reports what became of s: Gone (the key reads as
// full capacity: drop it), else TTL, the µs from now after which s
// expires, when the refund set it (0: unchanged); and Gave, the µs to add
// to the key's refund record.
func (s *State) Refund(p *Params, at, reset, since, now int64, exists bool) RefundOutcome {
	if !exists {
		return RefundOutcome{}
	}
	switch p.Alg {
	case FixedWindow, Calendar: // one state: the window's start, end and count
		return s.fixedWindowRefund(p, at, reset)
	case SlidingLog:
		return s.slidingLogRefund(p, at, reset, now)
	case SlidingWindow:
		return s.slidingWindowRefund(p, at, reset, now)
	case TokenBucket:
		return s.tokenBucketRefund(p, at, reset-since, now)
	default:
		return s.gcraRefund(p, at, reset-since, now)
	}
}

// RefundOutcome is what a refund did to a key's state.
type RefundOutcome struct {
	Gone bool  // the state is empty: the key is deleted
	TTL  int64 // when > 0, the state's new time to live, µs from now
	Gave int64 // µs of debt given back (token bucket, GCRA), for the key's refund record
}

// RefundRecord is a key's refund record (see refund_since in
// lua/prelude.lua, of which this is the twin): R µs of debt given back by
// late refunds since G, the µs at which the record was created, and the
// runs of refunds it keeps, sorted by V. Live says it exists.
type RefundRecord struct {
	G, R int64
	Live bool
	Kept []KeptRefunds
}

// KeptRefunds is a run of refunds a record keeps: of the commits whose V
// (at + reset + the R they noted) is from Lo to Hi, what they gave back
// (µs), and the horizon H (at + reset) of the lowest.
type KeptRefunds struct{ Lo, Hi, Give, H int64 }

// RefundKeep bounds the runs a record keeps (refund_keep).
const RefundKeep = 32

// RefundMark is the "<g>,<R>" a commit notes of a record.
type RefundMark struct {
	G, R int64
	Live bool
}

// Mark returns what a commit notes of rec.
func (rec *RefundRecord) Mark() RefundMark { return RefundMark{G: rec.G, R: rec.R, Live: rec.Live} }

// Since returns the µs that refunds of earlier commits gave back after the
// commit at at that replied reset and noted mark, and that commit's V.
// refund_since's one case with no twin here: a commit marker of a release
// before the record, which noted no mark at all (Lua's nil, not "-"),
// counts every refund the record holds as earlier; memory never outlives
// a redeploy.
func (rec *RefundRecord) Since(mark RefundMark, at, reset int64) (since, v int64) {
	v = at + reset
	if !rec.Live {
		return 0, v
	}
	since = rec.R
	if mark.Live && mark.G == rec.G {
		since -= mark.R
		v += mark.R
	}
	for _, e := range rec.Kept {
		if e.Lo > v {
			since -= e.Give
		}
	}
	return max(since, 0), v
}

// Add records in rec a refund at now of the commit whose V and horizon are
// v and h, that gave back us µs (nothing when us is 0).
func (rec *RefundRecord) Add(v, h, us, now int64) {
	if us <= 0 {
		return
	}
	if !rec.Live {
		*rec = RefundRecord{G: now, Live: true}
	}
	rec.R += us
	old := rec.Kept
	keep := make([]KeptRefunds, 0, len(old)+1)
	added := false
	for _, e := range old {
		if !added && e.Lo > v {
			keep = append(keep, KeptRefunds{Lo: v, Hi: v, Give: us, H: h})
			added = true
		}
		if e.H > now {
			keep = append(keep, e)
		}
	}
	if !added {
		keep = append(keep, KeptRefunds{Lo: v, Hi: v, Give: us, H: h})
	}
	if len(keep) > RefundKeep {
		// the two neighbours closest in V become one run: the commits
		// below both still count both as later, those between, if any,
		// neither
		j := 0
		for i := 1; i < len(keep)-1; i++ {
			if keep[i+1].Lo-keep[i].Hi < keep[j+1].Lo-keep[j].Hi {
				j = i
			}
		}
		a, b := keep[j], keep[j+1]
		keep[j] = KeptRefunds{Lo: a.Lo, Hi: max(a.Hi, b.Hi), Give: a.Give + b.Give, H: a.H}
		keep = append(keep[:j+1], keep[j+2:]...)
	}
	rec.Kept = keep
}

// RecordsRefunds reports whether key has a refund record: lua/prelude.lua's
// refunded_key names one for a key with a hash tag, and for a key without
// braces; one with braces but no tag has none.
func RecordsRefunds(key string) bool {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		j := strings.IndexByte(key[i+1:], '}')
		return j > 0
	}
	return key != "" && strings.IndexByte(key, '}') < 0
}
