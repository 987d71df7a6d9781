package redlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Concurrency rules. A rule whose Algorithm is algorithms.Concurrency
// takes slots (Input.Cost of them, usually one) when its request is
// allowed, and holds them until the Decision is settled:
//
//	d := e.Allow(ctx, user)
//	if !d.Allowed {
//		return errBusy
//	}
//	defer e.Settle(ctx, d)
//	d.KeepAlive(ctx) // for work that may outlive the slot's period
//
// Each slot is held for the rule's Limit.Period (algorithms.InFlight) at
// a time: the slots of a process that dies come back by themselves when
// their period ends, and KeepAlive renews the slots of a request that
// runs longer. The HTTP middleware does both around its next handler.

// hold is what a Decision that took slots holds: its leases, the backend
// that took them, and the renewal, if one runs.
type hold struct {
	s       *shared
	backend algorithms.Backend
	leases  []algorithms.Lease
	every   time.Duration // renewal interval: the shortest lease / 3

	mu       sync.Mutex
	released bool
	timer    *time.Timer // KeepAlive's, nil until it is called
}

// holdLeases records in d the leases of the concurrency checks of sc that
// the call allowed.
func (s *shared) holdLeases(sc *scratch, d *Decision) {
	var h *hold
	for j, i := range sc.index {
		c := &sc.checks[j]
		if c.Algorithm != algorithms.Concurrency || !d.Rules[i].Evaluated || !d.Rules[i].Result.Allowed {
			continue
		}
		if d.WouldDeny && d.Rules[i].Shadow {
			// a shadow rule denied: only the live rules were charged
			// (chargeLive), and this shadow rule's slot was not taken
			continue
		}
		if h == nil {
			h = &hold{s: s, backend: s.backend}
			if d.Source == SourceFallback {
				h.backend = s.fallback
			}
		}
		h.leases = append(h.leases, leaseOf(c))
		if every := c.Limit.Period / 3; h.every == 0 || every < h.every {
			h.every = every
		}
	}
	d.hold = h
}

// leaseOf is the lease that the concurrency check c takes.
func leaseOf(c *algorithms.Check) algorithms.Lease {
	return algorithms.Lease{Key: c.Key, ID: c.Lease, Cost: max(c.Cost, 1), Period: c.Limit.Period}
}

// leases returns the leases of the slots d holds: one per concurrency rule
// that took slots for an allowed request, until d is settled; nil
// otherwise.
func (d *Decision) leases() []algorithms.Lease {
	h := d.hold
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	return append([]algorithms.Lease(nil), h.leases...)
}

// release frees the slots d's concurrency rules took, and stops the
// renewal KeepAlive started (see Limiter.Settle). It does nothing (and
// returns nil) for a Decision that holds no slots, and the second time,
// from any goroutine; a clone (Decision.Clone) shares its slots. It runs
// under Config.Timeout, and a ctx that is canceled does not stop it (a
// request whose client went away still frees its slots); what it could
// not free (an error) comes back when the slots' periods end.
func (d *Decision) release(ctx context.Context) error {
	h := d.hold
	if h == nil {
		return nil
	}
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return nil
	}
	h.released = true
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	l, ok := h.backend.(algorithms.Leaser)
	if !ok {
		return engineErr(fmt.Errorf("%w: the backend (%T) cannot release leases", errors.ErrUnsupported, h.backend))
	}
	ctx, cancel := h.s.leaseContext(ctx)
	defer cancel()
	err := h.s.sideCall(ctx, h.backend, func(ctx context.Context) error { return l.Release(ctx, h.leases) })
	if err != nil {
		h.s.logError(err)
	}
	return err
}

// KeepAlive renews the slots d holds (those of its concurrency rules)
// every third of the shortest rule's Limit.Period, until d is settled
// ([Limiter.Settle]) or ctx ends, so that a request that runs longer than
// that period keeps its slots. When ctx ends, the renewal stops and the
// slots stay taken until settled or until their period ends. It does
// nothing for a Decision that holds no slots, once it is settled, or when
// it renews already. A lease found expired (its slots may have gone to
// others: the renewals were late by more than two thirds of a lease) is
// not renewed again, and is logged.
//
// The renewal is a timer: no goroutine runs between renewals.
func (d *Decision) KeepAlive(ctx context.Context) {
	h := d.hold
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.timer != nil || h.every <= 0 {
		return
	}
	h.timer = time.AfterFunc(h.every, func() { h.renew(ctx) })
}

// renew renews the leases still held and schedules the next renewal.
func (h *hold) renew(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	leases := h.leases
	done := h.released
	h.mu.Unlock()
	if done || len(leases) == 0 {
		return
	}
	if l, ok := h.backend.(algorithms.Leaser); ok {
		held := make([]bool, len(leases))
		rctx, cancel := h.s.leaseContext(ctx)
		err := l.Renew(rctx, leases, held)
		cancel()
		if err != nil {
			h.s.logError(err)
		} else {
			kept := leases[:0:0]
			for i, ok := range held {
				if ok {
					kept = append(kept, leases[i])
				} else {
					h.s.logger.Warn("redlimit: concurrency lease expired before its renewal: its slots may be taken by others", "key", leases[i].Key)
				}
			}
			leases = kept
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released {
		h.leases = leases
		if len(leases) > 0 && ctx.Err() == nil {
			h.timer.Reset(h.every)
		}
	}
}

// leaseContext is the context of a release or renewal: ctx without its
// cancellation, under the timeout.
func (s *shared) leaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithoutCancel(ctx)
	if s.configTimeout > 0 {
		return context.WithTimeout(ctx, s.configTimeout)
	}
	return ctx, func() {}
}

// noLeases returns a *ConfigError when e has a concurrency rule: what
// (Wait) would take slots that nobody could release.
func (e *Limiter) noLeases(what string) error {
	for i := range e.rules {
		if e.rules[i].Algorithm == algorithms.Concurrency {
			return &algorithms.ConfigError{Rule: e.rules[i].Name, Field: what, Reason: "would hold the slots of a concurrency rule with no Decision to settle: use Allow, then Settle"}
		}
	}
	return nil
}

// supports reports whether the backend given to New, and the fallback if
// there is one, pass has: a capability a rule needs from both.
func (s *shared) supports(has func(algorithms.Backend) bool) bool {
	return has(s.primary) && (s.fallback == nil || has(s.fallback))
}

// checkLeaser returns a *ConfigError when r is a concurrency rule and the
// backend given to New, or the fallback, cannot release leases.
func (s *shared) checkLeaser(r Rule) error {
	if r.Algorithm != algorithms.Concurrency {
		return nil
	}
	if s.supports(func(b algorithms.Backend) bool { _, ok := b.(algorithms.Leaser); return ok }) {
		return nil
	}
	return &algorithms.ConfigError{Rule: r.Name, Field: "Algorithm", Reason: "concurrency needs a backend (and a fallback) that can release leases: an algorithms.Leaser"}
}

// maxAbandoned bounds the releases releaseAbandoned runs at once; past
// it, the slots of a failed call that did commit come back when their
// lease expires.
const maxAbandoned = 64

// waitAbandoned waits until the releases releaseAbandoned runs are done,
// for at most Config.Timeout (the bound of each) and a second more, and
// logs how many still run after that: their slots come back when their
// leases expire. Close calls it.
func (s *shared) waitAbandoned() {
	deadline := time.Now().Add(max(s.configTimeout, 0) + time.Second)
	for s.abandoned.Load() > 0 {
		if time.Now().After(deadline) {
			s.logger.Warn("redlimit: Close: releases of failed calls still running: their slots come back when their leases expire", "releases", s.abandoned.Load())
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// releaseAbandoned frees, in the background, the slots that a failed call
// to the primary may have taken anyway (a timeout after the server had
// committed): it releases the call's concurrency leases on the primary,
// which frees nothing if the call took nothing. Slots that a call commits
// after the release (a backend still running past the timeout) come back
// when their lease expires.
func (s *shared) releaseAbandoned(checks []algorithms.Check) {
	var leases []algorithms.Lease
	for i := range checks {
		if c := &checks[i]; c.Algorithm == algorithms.Concurrency && c.Lease != 0 {
			leases = append(leases, leaseOf(c))
		}
	}
	l, ok := s.backend.(algorithms.Leaser)
	if leases == nil || !ok {
		return
	}
	if s.abandoned.Add(1) > maxAbandoned {
		s.abandoned.Add(-1)
		return
	}
	go func() {
		defer s.abandoned.Add(-1)
		ctx, cancel := s.leaseContext(context.Background())
		defer cancel()
		_ = l.Release(ctx, leases) // the primary just failed: its error is reported already
	}()
}
