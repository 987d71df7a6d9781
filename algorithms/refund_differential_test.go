package algorithms_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestRefundDifferential plays random workloads of refundable calls and
// late refunds (every algorithm, 1 to 3 checks a call, time going back
// sometimes, refunds of calls refunded already or denied) against the
// memory backend and miniredis, whose clock follows the workload's, and,
// scaled to milliseconds, against a real redis-server and a frozen
// miniredis: every Result (Provisional and the receipt's time included),
// every refund's outcome and every later Result must be identical.
func TestRefundDifferential(t *testing.T) {
	var real *redis.Client
	if redistest.Shared != nil {
		real = redistest.Shared.Client(t)
	}
	var mu sync.Mutex
	outcomes := map[backendtest.RefundOutcome]int{}
	t.Cleanup(func() {
		t.Logf("refund outcomes: %v", outcomes)
		if !t.Failed() && (outcomes["refunded"] < 300 || outcomes["none"] < 15) {
			t.Errorf("refund outcomes %v: the workload no longer exercises refunds", outcomes)
		}
	})
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			work := backendtest.RandomRefundWorkload(seed, 120)
			d := newDifferential(t, work[0].At, real)
			mem, mc, mini, rc := d.mem, d.mc, d.mini, d.rc
			onReal, realClock, miniFrozen, frozenClock, prefix := d.onReal, d.realClock, d.miniFrozen, d.frozenClock, d.prefix
			var wants, gots, reals, frozens [][]algorithms.Result
			for i, st := range work {
				d.advance(st.At)
				want, wo := backendtest.PlayRefund(t, mem, mc, "", st, wants)
				got, gotO := backendtest.PlayRefund(t, mini.(algorithms.Refunder), rc, "", st, gots)
				wants, gots = append(wants, want), append(gots, got)
				if gotO != wo {
					t.Fatalf("step %d: refund of step %d %v at t0+%v: miniredis %s, memory %s", i, st.Of, st.Units, st.At.Sub(backendtest.T0), gotO, wo)
				}
				if st.Of >= 0 {
					mu.Lock()
					outcomes[wo]++
					mu.Unlock()
				}
				for j := range got {
					if !backendtest.SameResult(got[j], want[j]) {
						t.Fatalf("step %d check %d (%v %v cost %d at t0+%v): miniredis %+v, memory %+v", i, j, st.Checks[j].Algorithm, st.Checks[j].Limit, st.Checks[j].Cost, st.At.Sub(backendtest.T0), got[j], want[j])
					}
				}
				if real == nil {
					continue
				}
				slow := backendtest.ScaledRefund(st, 1000)
				gotReal, ro := backendtest.PlayRefund(t, onReal.(algorithms.Refunder), realClock, prefix, slow, reals)
				wantFrozen, fo := backendtest.PlayRefund(t, miniFrozen.(algorithms.Refunder), frozenClock, "", slow, frozens)
				reals, frozens = append(reals, gotReal), append(frozens, wantFrozen)
				if ro != fo {
					t.Fatalf("step %d: refund: redis-server %s, miniredis %s", i, ro, fo)
				}
				for j := range gotReal {
					if !backendtest.SameResult(gotReal[j], wantFrozen[j]) {
						t.Fatalf("step %d check %d (%v %v cost %d): redis-server %+v, miniredis %+v", i, j, st.Checks[j].Algorithm, st.Checks[j].Limit, st.Checks[j].Cost, gotReal[j], wantFrozen[j])
					}
				}
			}
		})
	}
}
