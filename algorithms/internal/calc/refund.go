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

// fixedWindowRefund takes cost back from the window the commit wrote, named
// by its end (at + reset), while the key holds that window; once another
// window has replaced it, the units no longer count. The TTL stays: the
// window still ends when it did.
func (s *State) fixedWindowRefund(p *Params, at, reset int64) RefundOutcome {
	if s.c != at+reset {
		return RefundOutcome{}
	}
	s.b -= p.Cost
	if s.b <= 0 {
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{}
}

// slidingLogRefund removes cost entries of the stamp the commit used
// (at + reset − period), while they are in the window at now; entries of
// one stamp are all alike. The key then lives as long as its newest entry
// counts.
func (s *State) slidingLogRefund(p *Params, at, reset, now int64) RefundOutcome {
	stamp := at + reset - p.Period
	if s.set == nil || stamp <= now-p.Period {
		return RefundOutcome{}
	}
	l := &s.set.log
	l.removeAt(stamp, p.Cost)
	newest, any := l.newest()
	if !any || newest+p.Period-now <= 0 {
		// no entry left, or none that counts: the TTL ends at once
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{TTL: newest + p.Period - now}
}

// removeAt removes up to n entries stamped t.
func (l *timeLog) removeAt(t, n int64) {
	hi := l.countAtMost(t)
	lo := max(l.countAtMost(t-1), hi-n)
	if lo >= hi {
		return
	}
	i, j := l.head+int(lo), l.head+int(hi)
	l.buf = append(l.buf[:i], l.buf[j:]...)
}

// slidingWindowRefund takes cost back from the window the commit counted
// in (it started at at + reset − 2·period): the current count while the
// key is at that window, the previous count once it has moved to the
// next, nothing after that or once the period has changed. The key then
// lives until its counts no longer count at now.
func (s *State) slidingWindowRefund(p *Params, at, reset, now int64) RefundOutcome {
	start := at + reset - 2*p.Period
	if s.d-s.a != p.Period {
		return RefundOutcome{}
	}
	switch s.a {
	case start:
		s.b = max(s.b-p.Cost, 0)
	case start + p.Period:
		s.c = max(s.c-p.Cost, 0)
	default:
		return RefundOutcome{}
	}
	r := swReset(s.a, p.Period, now, s.b, s.c)
	if r <= 0 {
		return RefundOutcome{Gone: true}
	}
	return RefundOutcome{TTL: r}
}

// refundDebt is the time-debt (scaled by r, as bucketDebt's) that a late
// refund of a bucket's units takes back at now: their own, costDebt, but
// no more than what is left at now of the debt that the commit at at left
// (it replied reset µs to full): units the bucket refilled since are not
// given back again (that would create capacity). As token_bucket_refund
// and gcra_refund in lua/ compute it.
func refundDebt(costDebt, at, reset, now, r int64) int64 {
	left := (at + reset - now) * r
	if left <= 0 {
		return 0
	}
	return min(left, costDebt)
}

// tokenBucketRefund puts cost tokens back at now (reset: the commit's
// horizon less what refunds gave back since): the time-debt at now less
// what refundDebt gives back, at least nothing (a full bucket: the key is
// deleted).
func (s *State) tokenBucketRefund(p *Params, at, reset, now int64) RefundOutcome {
	if s.b <= 0 {
		return RefundOutcome{}
	}
	tau := Tau(p)
	diff, _ := bucketDebt(s.c+s.a/s.b, s.a%s.b, s.b, now, p.R, p.Cap*p.U, s.d == tau)
	give := refundDebt(p.Cost*p.U, at, reset, now, p.R)
	diff -= give
	if diff <= 0 {
		return RefundOutcome{Gone: true, Gave: CeilDiv(give, p.R)}
	}
	s.a, s.b, s.c, s.d = diff, p.R, now, tau
	return RefundOutcome{TTL: CeilDiv(diff, p.R), Gave: CeilDiv(give, p.R)}
}

// gcraRefund moves the TAT back by cost's emission time (at most what
// refundDebt gives back), from its value at now; a TAT at or before now is
// a full bucket: the key is deleted.
func (s *State) gcraRefund(p *Params, at, reset, now int64) RefundOutcome {
	tau := Tau(p)
	diff, _ := bucketDebt(s.a, s.b, s.c, now, p.R, p.Cap*p.U, s.d == tau)
	give := refundDebt(p.Cost*p.U, at, reset, now, p.R)
	diff -= give
	if diff <= 0 {
		return RefundOutcome{Gone: true, Gave: CeilDiv(give, p.R)}
	}
	s.gcraSet(now, diff, p.R, tau)
	return RefundOutcome{TTL: CeilDiv(diff, p.R), Gave: CeilDiv(give, p.R)}
}
