package admin

import (
	"context"
	"errors"
	"math/bits"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

// Source is what the admin page knows of one limiter (a Middleware and
// those derived from it with With, or an Engine): the decisions it
// hears through its hooks, and the Engines it asks for rules, state,
// lookups and resets. Get one from [Handler.Source], pass its OnHTTP (or
// OnDecision) as the limiter's decision hook, then Attach the limiter's
// Engines.
//
// The hooks count every rule's outcome, feed each rule's heavy-hitters
// sketches and the latency histogram, and note the last error: a few
// atomic additions and, per evaluated rule, one O(1) update of a fixed
// size summary under a mutex. They allocate nothing (a failed decision
// allocates at most once a second, to keep its error). Decisions of
// rules not attached yet are ignored.
type Source struct {
	name string
	h    *Handler
	tab  atomic.Pointer[table]
	lat  latency

	lastErr atomic.Pointer[errorAt]
}

// errorAt is an error and when it happened.
type errorAt struct {
	err error
	at  time.Time
}

// table is a Source's rules, immutable once published.
type table struct {
	byPos  []*ruleState // rule i of the first Engine attached, for a cheap guess
	byName map[string]*ruleState
	rules  []*ruleState // in the order attached
}

// counters of one rule's outcomes.
const (
	cAllowed = iota
	cDenied
	cDeniedLocal
	cShadowDenied
	cMissingKey
	cExempt
	cSkipped
	cUnevaluated
	cErrors
	cFallback // decided by the fallback backend (also counted above)
	nCounts
)

var counterNames = [nCounts]string{"allowed", "denied", "denied_local", "shadow_denied", "missing_key", "exempt", "skipped", "unevaluated", "errors", "fallback"}

// counterOf maps a rule's Outcome to its counter.
var counterOf = [...]int{
	redlimit.OutcomeAllowed:      cAllowed,
	redlimit.OutcomeDenied:       cDenied,
	redlimit.OutcomeShadowDenied: cShadowDenied,
	redlimit.OutcomeError:        cErrors,
	redlimit.OutcomeMissingKey:   cMissingKey,
	redlimit.OutcomeInvalidCost:  cErrors,
	redlimit.OutcomeExempt:       cExempt,
	redlimit.OutcomeSkipped:      cSkipped,
	redlimit.OutcomeUnevaluated:  cUnevaluated,
}

// ruleState is what a Source keeps of one rule.
type ruleState struct {
	rule    redlimit.Rule
	key     string            // what its key is, for the page (DescribeKeys)
	eng     *redlimit.Limiter // the first Engine attached that has the rule
	pos     int               // its index there
	counts  [nCounts]atomic.Uint64
	hot     *heavy // every evaluated key
	denied  *heavy // keys denied (shadow denials included)
	history [ringLen][nCounts]uint64
}

// OnHTTP is the hook for middleware.Config.OnDecision.
func (s *Source) OnHTTP(_ *http.Request, d *redlimit.Decision) { s.observe(d) }

// OnDecision is the hook for redlimit.Config.OnDecision.
func (s *Source) OnDecision(_ context.Context, d *redlimit.Decision) { s.observe(d) }

func (s *Source) observe(d *redlimit.Decision) {
	t := s.tab.Load()
	if t == nil {
		return
	}
	local := false
	for i := range d.Rules {
		rd := &d.Rules[i]
		var st *ruleState
		if i < len(t.byPos) && t.byPos[i].rule.Name == rd.Name {
			st = t.byPos[i]
		} else if st = t.byName[rd.Name]; st == nil {
			continue
		}
		o := d.RuleOutcome(i)
		c := counterOf[o]
		if rd.Result.Local {
			local = true
			if o == redlimit.OutcomeDenied {
				c = cDeniedLocal
			}
		}
		st.counts[c].Add(1)
		if rd.Evaluated && rd.Key != "" {
			if d.Source == redlimit.SourceFallback {
				st.counts[cFallback].Add(1)
			}
			st.hot.add(rd.Key)
			if o == redlimit.OutcomeDenied || o == redlimit.OutcomeShadowDenied {
				st.denied.add(rd.Key)
			}
		}
	}
	if d.Latency > 0 && (d.Source != redlimit.SourceNone && !local || d.Err != nil) {
		s.lat.record(d.Latency, s.h.tick.Load())
	}
	if d.Err != nil {
		s.noteErr(d.Err)
	}
}

// noteErr keeps err as the last error, at most once a second.
func (s *Source) noteErr(err error) {
	now := s.h.now()
	if last := s.lastErr.Load(); last != nil && now.Sub(last.at) < time.Second {
		return
	}
	s.lastErr.Store(&errorAt{err: err, at: now})
}

// Attach gives s the Limiters whose rules it shows, looks up and resets:
// a Middleware's (middleware.Middleware.Limiter) and those derived from
// it with With, whose rules then appear once each. A rule is looked up
// and reset through the first Limiter attached that has it. Attach may be
// called again with more Limiters; the counts of rules already attached
// carry on.
func (s *Source) Attach(engines ...*redlimit.Limiter) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	old := s.tab.Load()
	t := &table{byName: map[string]*ruleState{}}
	if old != nil {
		t.byPos = old.byPos
		t.rules = append(t.rules, old.rules...)
		for k, v := range old.byName {
			t.byName[k] = v
		}
	}
	for _, e := range engines {
		if e == nil {
			continue
		}
		rules := e.Rules()
		for i, r := range rules {
			if _, ok := t.byName[r.Name]; ok {
				continue
			}
			st := &ruleState{
				rule:   r,
				eng:    e,
				pos:    i,
				hot:    newHeavy(s.h.sketchSize, s.h.seed),
				denied: newHeavy(s.h.sketchSize, s.h.seed),
			}
			t.byName[r.Name] = st
			t.rules = append(t.rules, st)
		}
		if t.byPos == nil {
			for _, r := range rules {
				t.byPos = append(t.byPos, t.byName[r.Name])
			}
		}
	}
	s.tab.Store(t)
}

// DescribeKeys says, per rule name, what the rule's key is ("client IP",
// "X-API-Key header"), for the rules table: an Engine knows its rules'
// limits but not where their key material comes from. Call it after
// Attach.
func (s *Source) DescribeKeys(descriptions map[string]string) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if t := s.tab.Load(); t != nil {
		for name, d := range descriptions {
			if st := t.byName[name]; st != nil {
				st.key = d
			}
		}
	}
}

// rule finds a rule of s by name.
func (s *Source) rule(name string) *ruleState {
	if t := s.tab.Load(); t != nil {
		return t.byName[name]
	}
	return nil
}

// rules returns s's rules in order.
func (s *Source) rules() []*ruleState {
	if t := s.tab.Load(); t != nil {
		return t.rules
	}
	return nil
}

// errNoRules is a lookup on a Source without Engines.
var errNoRules = errors.New("no Engine attached")

// latency is a histogram of decision latencies, log-linear: four buckets
// per power of two of nanoseconds (each at most 19% wide), cumulative,
// and the largest latency per tick.
type latency struct {
	buckets [latBuckets]atomic.Uint64
	max     [ringLen]atomic.Int64
	history [ringLen][latBuckets]uint64
}

const latBuckets = 4 * 40 // up to 2^40 ns (18 minutes)

// latBucket returns the bucket of d ns: values below 4 have their own;
// above, bits.Len64 picks the power of two and the next two bits the
// quarter.
func latBucket(d int64) int {
	v := uint64(max(d, 0))
	if v < 4 {
		return int(v)
	}
	e := bits.Len64(v) - 1 // 2^e <= v < 2^(e+1), e >= 2
	b := (e-1)*4 + int(v>>(e-2)&3)
	return min(b, latBuckets-1)
}

// latUpper returns the largest value of bucket b.
func latUpper(b int) int64 {
	if b < 4 {
		return int64(b)
	}
	e := b/4 + 1
	q := int64(b % 4)
	return (4+q+1)<<(e-2) - 1
}

func (l *latency) record(d time.Duration, tick int64) {
	l.buckets[latBucket(int64(d))].Add(1)
	m := &l.max[tick%ringLen]
	for {
		old := m.Load()
		if int64(d) <= old || m.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}
