package middleware

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/after"
)

// Middleware limits HTTP requests by the rules of a [redlimit.Limiter].
// Build it with [New] (or a shortcut: [PerIP], ...); it is safe for
// concurrent use. Close it when done to finish the work queued after
// responses.
type Middleware struct {
	lim     *redlimit.Limiter
	own     bool   // built by a shortcut: Close closes lim
	cfg     Config // after defaults
	rules   []rule // cfg.Rules in lim's rule order
	pool    sync.Pool
	now     func() time.Time // lim's clock, for the epoch reset header
	wallNow bool             // now is time.Now: reuse the time decide read
	log     *slog.Logger     // lim's Logger
	timed   bool             // something besides debug logging reads Decision.Latency
	settles bool             // a rule has a ResponseCost: requests are settled after the response (settle.go)
	holds   bool             // a rule is a concurrency rule: an allowed request holds slots until settled

	after         *after.Queue[job] // the work after responses (after.go), shared with With
	localPrimary  bool              // the backend runs in process: no work after a response is queued
	localFallback bool              // so does the fallback
}

// With returns a new Middleware on lim, a Limiter with more rules than
// m's (typically derived from m's with redlimit.Limiter.With), with m's
// Config and the given Rules added to m's: per-route rules layered on
// shared ones, decided together in one call. Every rule of lim needs a
// Rule, from m or from rules. It shares m's queue of work after
// responses (Close of either closes it). Like [New], it does not own lim.
func (m *Middleware) With(lim *redlimit.Limiter, rules ...Rule) (*Middleware, error) {
	cfg := m.cfg
	cfg.Rules = append(slices.Clone(m.cfg.Rules), rules...)
	return build(lim, cfg, m.after)
}

// Limiter returns the Limiter m decides with: code outside a handler can
// Allow, Wait, Peek or Reset the same buckets by key material
// (redlimit.Limiter.Allow). Config.OnDecision hears of HTTP requests
// only: decisions made through the Limiter directly reach no hook of m.
func (m *Middleware) Limiter() *redlimit.Limiter { return m.lim }

// Close waits until the work queued after the responses of m and the
// Middlewares derived from it with With is done: every slot of a
// concurrency rule released, every ResponseCost rule settled (or its
// error given to Config.OnSettleError). That takes at most the time of
// the queued calls, each bounded by redlimit.Config.Timeout (see Handler;
// with the Timeout disabled, as long as the backend takes). They keep
// working: after Close, a request makes its own release and settle after
// its handler. Close a Middleware after the server that runs it has shut
// down (http.Server.Shutdown), so that every request's work is done.
//
// Close does not close a Limiter given to New or With: close it after
// the Middleware. A Middleware built by a shortcut ([PerIP], [PerHeader],
// [PerUser], [PerKey]) owns its Limiter, and Close closes it too.
func (m *Middleware) Close() error {
	m.after.Close()
	if m.own {
		return m.lim.Close()
	}
	return nil
}

// scratch is the per-request working memory, pooled.
type scratch struct {
	in       []redlimit.Input
	policies []headers.Policy
	dec      redlimit.Decision
	now      time.Time       // when decide finished: the wall clock for headers when the Limiter's clock is time.Now
	costs    []redlimit.Cost // what the response cost, per ResponseCost rule, when settle
	settle   bool            // the ResponseCost rules of dec are to be settled with costs (after.go)
}

// Handler returns next wrapped by the limiter. Use it as a method value:
// r.With(mw.Handler), mw.Handler(mux).
//
// The slots of concurrency rules are held while next runs. Once next has
// returned (or panicked), the slots are released and the ResponseCost
// rules settled after the response, off the response's path: Handler
// returns at once, so net/http sends the response without waiting for
// either round trip, and a worker makes them. At most 16 workers run
// (per Middleware and those derived with With), and at most 1024
// requests' work waits for one; when the queue is full, or after Close,
// the request makes its own after next returns (its client then waits
// for them, at most redlimit.Config.Timeout each), so nothing is dropped. On a
// backend that runs in process (memstore) they are made at once. A
// release or settle that fails goes to Config.OnSettleError and the
// Limiter's Logger.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := m.pool.Get().(*scratch)
		m.decide(r, s, m.timed)
		switch d := &s.dec; {
		case d.Allowed:
			release, settle := m.owes(d)
			if release {
				d.KeepAlive(context.WithoutCancel(r.Context()))
			}
			m.writeHeaders(w.Header(), s)
			if m.cfg.DecisionInContext {
				r = r.WithContext(withDecision(r.Context(), d.Clone()))
			}
			if release || settle {
				// s is the work's from here on (after.go)
				m.serveOwing(w, r, next, s, settle)
				return
			}
			next.ServeHTTP(w, r)
		case d.Failed:
			m.cfg.ErrorHandler.ServeHTTP(w, r.WithContext(withDecision(r.Context(), d.Clone())))
		default:
			m.writeHeaders(w.Header(), s)
			denied := m.cfg.Denied
			if m.cfg.MissingKeyDenied != nil && missingKey(d) {
				denied = m.cfg.MissingKeyDenied
			}
			denied.ServeHTTP(w, r.WithContext(withDecision(r.Context(), d.Clone())))
		}
		m.pool.Put(s)
	})
}

// Check decides r without writing anything: for code that decides inside a
// handler. The returned Decision is the caller's. A non-nil error is the
// one the error policy handled, or the negative cost that denied the
// request (also in Decision.Err); the Decision still says whether to
// proceed (Allowed). An allowed Decision of a Middleware with a
// concurrency rule holds its slots until settled: call Settle once the
// work is done.
func (m *Middleware) Check(r *http.Request) (*redlimit.Decision, error) {
	s := m.pool.Get().(*scratch)
	defer m.pool.Put(s)
	m.decide(r, s, true)
	d := s.dec.Clone()
	return d, d.Err
}

// WriteHeaders writes the rate-limit headers of a Decision returned by
// Check (the Handler writes them itself). The policy window of the IETF
// fields comes from each RuleDecision's Algorithm and Limit: a
// RuleDecision built by the caller without a Limit gets none.
func (m *Middleware) WriteHeaders(h http.Header, d *redlimit.Decision) {
	if m.cfg.Headers.Style != headers.None {
		m.write(h, m.now(), d, nil)
	}
}

// write writes the headers of d's evaluated rules, collecting their
// policies in buf (reused by the Handler), and returns buf.
func (m *Middleware) write(h http.Header, now time.Time, d *redlimit.Decision, buf []headers.Policy) []headers.Policy {
	buf = buf[:0]
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.Evaluated {
			buf = append(buf, headers.Policy{Name: rd.Name, Window: rd.Window(), Result: rd.Result})
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

func (m *Middleware) writeHeaders(h http.Header, s *scratch) {
	if m.cfg.Headers.Style == headers.None {
		return
	}
	now := s.now
	if !m.wallNow || now.IsZero() {
		now = m.now()
	}
	s.policies = m.write(h, now, &s.dec, s.policies)
}

// missingKey reports whether the denied decision d was denied because a
// rule not in shadow mode found no key: the Limiter stopped there, before
// any backend call, and no other rule denied the request.
func missingKey(d *redlimit.Decision) bool {
	if d.Failed {
		return false
	}
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.MissingKey && !rd.Shadow {
			return true
		}
	}
	return false
}
