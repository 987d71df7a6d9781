// Package receipt groups refunds by the commit they give back to, for the
// backends that implement algorithms.Refunder.
package receipt

import (
	"iter"

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
