// Package receipt holds what the backends that implement
// algorithms.Refunder share: the refund window of a call, and refunds
// grouped by the commit they give back to.
package receipt

import (
	"iter"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Groups yields, in the order of their first refund, the indexes of the
// refunds that share a commit marker (one decide call, or its part in one
// hash slot: one atomic refund), and whether any of them gives back units.
func Groups(refunds []algorithms.Refund) iter.Seq2[[]int, bool] {
	return func(yield func([]int, bool) bool) {
		done := make([]bool, len(refunds))
		for i := range refunds {
			if done[i] {
				continue
			}
			marker := refunds[i].Result.Receipt.Marker
			var group []int
			units := false
			for j := i; j < len(refunds); j++ {
				if !done[j] && refunds[j].Result.Receipt.Marker == marker {
					done[j] = true
					group = append(group, j)
					units = units || refunds[j].Units > 0
				}
			}
			if !yield(group, units) {
				return
			}
		}
	}
}

// Window is the refund window of a call: the longest RefundWindow of its
// checks. A call with one (> 0) is refundable as a whole: it marks every
// key it commits pending, and a denial of any of its keys while marked is
// provisional.
func Window(checks []algorithms.Check) time.Duration {
	var w time.Duration
	for i := range checks {
		w = max(w, checks[i].RefundWindow)
	}
	return w
}
