package redlimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// health tracks, under the Fallback policy, whether the primary backend
// is down, with hysteresis: one failed call does not switch the instance
// to its fallback; a primary that failed every call for fallbackAfter
// does.
//
// The first failure after a success starts a run of failures (since) and
// the probe goroutine, which checks the primary every fallbackAfter/4 (at
// least every probeInterval, at most every 10ms) with a harmless call on a key of its own. A
// call the primary answers (not the deny cache in front of it: a local
// denial says nothing of the primary), or a probe that succeeds, ends the
// run. A failure at least fallbackAfter after the run began switches to
// the fallback (down); the probe then checks every probeInterval,
// switches back at its first success, and exits.
type health struct {
	s       *shared
	after   time.Duration // Config.FallbackAfter
	base    time.Time     // the origin of since
	since   atomic.Int64  // ns after base of the run's first failure (at least 1); 0: no run
	down    atomic.Bool
	mu      sync.Mutex
	downAt  time.Time     // when down was last set
	probing bool          // a probe goroutine runs
	stop    chan struct{} // closed by close
	closed  bool
}

func newHealth(s *shared, after time.Duration) *health {
	// base is 1ns in the past: now is never 0, which means no run
	return &health{s: s, after: after, base: time.Now().Add(-1), stop: make(chan struct{})}
}

// now returns the time since h.base: at least 1ns.
func (h *health) now() int64 { return int64(time.Since(h.base)) }

// answered records the results of a call the primary answered: unless
// the deny cache answered it locally (its Results Local or not
// evaluated), the primary did, and the run of failures, if any, is over.
// One atomic load when there is no run.
func (h *health) answered(results []algorithms.Result) {
	if h.since.Load() == 0 {
		return
	}
	for i := range results {
		if results[i].Limit != 0 && !results[i].Local {
			h.since.Store(0)
			return
		}
	}
}

// failed records a failure of the primary (not one about a key's state,
// nor one of a caller that gave up) and reports whether the call is to be
// decided by the fallback: the instance is down, or switches to down now
// because the run of failures has lasted fallbackAfter. The first failure
// of a run starts the probe. After Close nothing switches (no probe would
// switch back); a failure past fallbackAfter is still decided by the
// fallback, for its request alone.
func (h *health) failed(err error) bool {
	if h.down.Load() {
		return true
	}
	now := h.now()
	first := h.since.Load()
	if first == 0 && h.since.CompareAndSwap(0, now) {
		h.startProbe()
		return false
	}
	if first == 0 {
		first = h.since.Load()
	}
	if first == 0 || time.Duration(now-first) < h.after {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.down.CompareAndSwap(false, true) {
		return true
	}
	h.downAt = time.Now()
	h.s.logger.Warn("redlimit: backend failing, deciding with the fallback", "err", err,
		"failing_for", time.Duration(now-first).Round(time.Millisecond), "probe_interval", h.s.probeInterval)
	h.startProbeLocked()
	return true
}

func (h *health) startProbe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startProbeLocked()
}

func (h *health) startProbeLocked() {
	if h.closed || h.probing {
		return
	}
	h.probing = true
	go h.probe()
}

// probe checks the primary while a run of failures lasts or the instance
// is down, and exits once neither is the case.
func (h *health) probe() {
	// at least 10ms apart: each probe of a dead server is a dial, and
	// go-redis stops dialling for a second after PoolSize failed dials
	suspect := min(max(h.after/4, 10*time.Millisecond), h.s.probeInterval)
	t := time.NewTimer(suspect)
	defer t.Stop()
	check := []algorithms.Check{{
		Key:       h.s.prefix + ":_probe:{redlimit}",
		Algorithm: algorithms.GCRA,
		Limit:     algorithms.Limit{Rate: 1 << 30, Period: time.Second},
	}}
	res := make([]algorithms.Result, 1)
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		timeout := h.s.configTimeout
		if timeout <= 0 {
			timeout = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := h.s.bounded(ctx, h.s.backend, check, res)
		cancel()
		h.mu.Lock()
		isDown, downAt := h.down.Load(), h.downAt
		// Unusable state under the probe's key is an answer too.
		if err == nil || errors.Is(err, algorithms.ErrKeyState) {
			h.since.Store(0)
			h.down.Store(false)
			h.probing = false
			h.mu.Unlock()
			if isDown {
				h.s.logger.Info("redlimit: backend answers again, fallback off", "down_for", time.Since(downAt).Round(time.Millisecond))
			}
			return
		}
		if !isDown && h.since.Load() == 0 {
			// a call the primary allowed ended the run
			h.probing = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		next := suspect
		if isDown {
			next = h.s.probeInterval
		}
		t.Reset(next)
	}
}

func (h *health) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
}

// share returns the part of l that one of n instances enforces on its
// fallback: the rate and the burst divided by n, rounded down, at least 1.
// n instances together hold at most max(capacity, n) units and refill at
// most the rate.
func share(l algorithms.Limit, n int64) algorithms.Limit {
	l.Rate = max(l.Rate/n, 1)
	if l.Burst > 0 {
		l.Burst = max(l.Burst/n, 1)
	}
	return l
}

// onFallback asks the fallback about checks. With Config.Instances > 1,
// each check's Limit becomes this instance's share of it first (in place:
// the checks are the request's, and go to no other backend after this).
func (s *shared) onFallback(ctx context.Context, checks []algorithms.Check, results []algorithms.Result) error {
	if s.instances > 1 {
		for i := range checks {
			checks[i].Limit = share(checks[i].Limit, s.instances)
		}
	}
	return s.fallback.Allow(ctx, checks, results)
}
