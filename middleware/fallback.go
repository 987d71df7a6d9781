package middleware

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
	m      *Middleware
	down   atomic.Bool
	mu     sync.Mutex
	stop   chan struct{}
	closed bool
}

func newHealth(m *Middleware) *health { return &health{m: m} }

// failed records a primary failure: the first one switches to the fallback
// and starts the probe. After Close, failures no longer switch (there would
// be no probe to switch back); each such request uses the fallback once.
func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.down.CompareAndSwap(false, true) {
		return
	}
	h.m.logger.Warn("redlimit: backend failing, deciding with the fallback", "err", err, "probe_interval", h.m.cfg.ProbeInterval)
	h.stop = make(chan struct{})
	go h.probe(h.stop)
}

func (h *health) probe(stop chan struct{}) {
	t := time.NewTicker(h.m.cfg.ProbeInterval)
	defer t.Stop()
	down := time.Now()
	check := []algorithms.Check{{
		Key:       h.m.cfg.Prefix + ":_probe:{redlimit}",
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
		timeout := h.m.cfg.Timeout
		if timeout <= 0 {
			timeout = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := h.m.bounded(ctx, h.m.backend, check, res)
		cancel()
		// Unusable state under the probe's key is an answer too.
		if err == nil || errors.Is(err, algorithms.ErrKeyState) {
			h.mu.Lock()
			h.down.Store(false)
			h.stop = nil
			h.mu.Unlock()
			h.m.logger.Info("redlimit: backend answers again, fallback off", "down_for", time.Since(down).Round(time.Millisecond))
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
