package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// health tracks whether the primary backend is down under the Fallback
// policy. The first failure switches to the fallback and starts one probe
// goroutine; the probe runs a harmless check against the primary every
// ProbeInterval and switches back at the first success, then exits.
type health struct {
	s      *shared
	down   atomic.Bool
	mu     sync.Mutex
	stop   chan struct{}
	closed bool
}

func newHealth(s *shared) *health { return &health{s: s} }

// failed records a primary failure: the first one switches to the fallback
// and starts the probe. After Close, failures no longer switch (there would
// be no probe to switch back); each such request uses the fallback once.
func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.down.CompareAndSwap(false, true) {
		return
	}
	h.s.logger.Warn("redlimit: backend failing, deciding with the fallback", "err", err, "probe_interval", h.s.probeInterval)
	h.stop = make(chan struct{})
	go h.probe(h.stop)
}

func (h *health) probe(stop chan struct{}) {
	t := time.NewTicker(h.s.probeInterval)
	defer t.Stop()
	down := time.Now()
	check := []algorithms.Check{{
		Key:       h.s.prefix + ":_probe:{redlimit}",
		Algorithm: algorithms.GCRA,
		Limit:     algorithms.Limit{Rate: 1 << 30, Period: time.Second},
	}}
	res := make([]algorithms.Result, 1)
	for {
		select {
		case <-stop:
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
		// Unusable state under the probe's key is an answer too.
		if err == nil || errors.Is(err, algorithms.ErrKeyState) {
			h.mu.Lock()
			h.down.Store(false)
			h.stop = nil
			h.mu.Unlock()
			h.s.logger.Info("redlimit: backend answers again, fallback off", "down_for", time.Since(down).Round(time.Millisecond))
			return
		}
	}
}

func (h *health) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
}
