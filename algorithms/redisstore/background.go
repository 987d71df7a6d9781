package redisstore

import (
	"fmt"

	"github.com/redlimit/redlimit/algorithms"
)

// maxDetached bounds the refunds and cancels a Store runs in the
// background at once, on a cluster or a Ring: those of the parts of calls
// spanning slots that failed (see compensate), each trying for up to
// refundTimeout. A Redis in trouble fails calls faster than it settles
// them; past the bound, a refund or cancel is not started: it is counted
// (dropped) and reported to Config.OnRefundError, and the units its part
// may have taken stay charged until its keys' state expires, as when a
// refund fails.
const maxDetached = 256

// errDetached is the error OnRefundError hears for a refund or cancel not
// started, past maxDetached.
var errDetached = fmt.Errorf("redlimit: %d refunds and cancels already in flight: one more not sent, its units stay charged until its keys' state expires", maxDetached)

// detach runs settle, a refund or cancel for a call that has returned, in
// a goroutine of its own, if fewer than maxDetached run; otherwise it
// counts it and reports it to OnRefundError.
func (b *Store) detach(settle func()) {
	if b.settling.Add(1) > maxDetached {
		b.settling.Add(-1)
		b.dropped.Add(1)
		if b.onRefundError != nil {
			b.onRefundError(&algorithms.BackendError{Backend: "redis", Err: errDetached})
		}
		return
	}
	go func() {
		defer b.settling.Add(-1)
		settle()
	}()
}
