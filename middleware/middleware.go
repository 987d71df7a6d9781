package middleware

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/headers"
)

// Middleware limits requests by its rules. Build it with [New]; it is safe
// for concurrent use. Close it when done to stop a fallback probe.
type Middleware struct {
	backend  algorithms.Backend
	fallback algorithms.Backend
	cfg      Config
	raw      Config // cfg as given, before defaults: With starts from it
	rules    []compiled
	timeout  time.Duration
	logger   *slog.Logger
	pool     sync.Pool
	health   *health
	errors   atomic.Int64 // errors not yet logged
	lastLog  atomic.Int64 // unix ns of the last error line
	stalled  atomic.Int64 // abandoned backend calls still running (see bounded)
	inline   bool         // the backend honours deadlines: no goroutine per call
	wallNow  bool         // cfg.Now is time.Now: reuse the time decide read
	timed    bool         // something besides debug logging reads Decision.Latency
}

// LocalDenials returns how many requests the deny cache answered without a
// backend call (0 without a deny cache).
func (m *Middleware) LocalDenials() uint64 {
	if dc, ok := m.backend.(*denycache.Cache); ok {
		return dc.LocalDenials()
	}
	return 0
}

// Close stops the fallback probe, if one runs. The Middleware keeps working.
func (m *Middleware) Close() error {
	if m.health != nil {
		m.health.close()
	}
	return nil
}

// scratch is the per-request working memory, pooled.
type scratch struct {
	checks   []algorithms.Check
	results  []algorithms.Result
	index    []int // rule index of each check
	policies []headers.Policy
	dec      Decision
	now      time.Time // when decide finished: the wall clock for headers when Config.Now is time.Now
}

type outcome uint8

const (
	pass outcome = iota
	deny
	fail // FailClosed
)

// Handler returns next wrapped by the limiter. Use it as a method value:
// r.With(mw.Handler), mw.Handler(mux).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := m.pool.Get().(*scratch)
		defer m.pool.Put(s)
		out := m.decide(r, s, m.timed)
		switch out {
		case pass:
			m.writeHeaders(w.Header(), s)
			if m.cfg.DecisionInContext {
				r = r.WithContext(withDecision(r.Context(), s.dec.clone()))
			}
			next.ServeHTTP(w, r)
		case deny:
			m.writeHeaders(w.Header(), s)
			m.cfg.Denied.ServeHTTP(w, r.WithContext(withDecision(r.Context(), s.dec.clone())))
		case fail:
			m.cfg.ErrorHandler.ServeHTTP(w, r.WithContext(withDecision(r.Context(), s.dec.clone())))
		}
	})
}

// Check decides r without writing anything: for code that decides inside a
// handler. The returned Decision is the caller's. A non-nil error is the
// one the error policy handled, or the negative cost that denied the
// request (also in Decision.Err); the Decision still says whether to
// proceed (Allowed).
func (m *Middleware) Check(r *http.Request) (*Decision, error) {
	s := m.pool.Get().(*scratch)
	defer m.pool.Put(s)
	m.decide(r, s, true)
	d := s.dec.clone()
	return d, d.Err
}

// WriteHeaders writes the rate-limit headers of a Decision returned by
// Check (the Handler writes them itself).
func (m *Middleware) WriteHeaders(h http.Header, d *Decision) {
	if m.cfg.Headers.Style != headers.None {
		m.write(h, m.cfg.Now(), d, nil)
	}
}

// write writes the headers of d's evaluated rules, collecting their
// policies in buf (reused by the Handler), and returns buf.
func (m *Middleware) write(h http.Header, now time.Time, d *Decision, buf []headers.Policy) []headers.Policy {
	buf = buf[:0]
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.Evaluated {
			buf = append(buf, m.policy(i, rd))
		}
	}
	if len(buf) == 0 {
		return buf
	}
	m.cfg.Headers.Write(h, now, buf)
	if d.Allowed && d.WouldDeny {
		h.Del("Retry-After") // shadow denials: the response is not a 429
	}
	return buf
}

func (m *Middleware) policy(i int, rd *RuleDecision) headers.Policy {
	l := rd.limit
	if l.Rate <= 0 {
		l = m.limitOf(i, rd)
	}
	return headers.Policy{Name: rd.Name, Window: window(m.rules[i].Algorithm, l), Result: rd.Result}
}

// limitOf recovers the limit a rule used from its result's capacity, for a
// RuleDecision that does not record it (one built by the caller): the tier
// whose capacity matches, else the rule's Limit.
func (m *Middleware) limitOf(i int, rd *RuleDecision) algorithms.Limit {
	r := &m.rules[i]
	if r.Limit.Capacity(r.Algorithm) == rd.Result.Limit {
		return r.Limit
	}
	for _, l := range r.Tiers {
		if l.Capacity(r.Algorithm) == rd.Result.Limit {
			return l
		}
	}
	return r.Limit
}

func (m *Middleware) writeHeaders(h http.Header, s *scratch) {
	if m.cfg.Headers.Style == headers.None {
		return
	}
	now := s.now
	if !m.wallNow || now.IsZero() {
		now = m.cfg.Now()
	}
	s.policies = m.write(h, now, &s.dec, s.policies)
}
