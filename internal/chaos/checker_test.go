package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// Hand-written histories: one key per algorithm, times in ms since a
// base on a whole second, so windows start at multiples of 1000 ms.

const testBase = 1_700_000_000_000_000

func ms(x float64) int64 { return int64(x * 1000) }

type rule struct {
	key, alg       string
	rate, burst    int64
	period         time.Duration
	cost           int64
	allowed        bool
	reset          time.Duration
	evaluatedFalse bool
	block          bool // answered from a quota block
	receipt        bool // carries a refund's receipt
}

func (r rule) rec() RuleRec {
	c := r.cost
	if c == 0 {
		c = 1
	}
	return RuleRec{Rule: r.alg, Key: r.key, Alg: r.alg, Rate: r.rate, Burst: r.burst, Period: r.period.Microseconds(),
		Cost: c, Evaluated: !r.evaluatedFalse, Allowed: r.allowed, ResetIn: r.reset.Microseconds(), Block: r.block, Refund: r.receipt}
}

type hist struct {
	h  *History
	id int64
}

func newHist() *hist { return &hist{h: &History{Base: testBase}} }

// dec records a decision by instance 0 over [s, e] ms; outcome follows the
// rules (allowed when all are) unless out is given.
func (b *hist) dec(s, e float64, out string, rules ...rule) int64 {
	b.id++
	r := Record{Kind: KindDecision, ID: b.id, Op: "decide", Start: ms(s), End: ms(e), Outcome: out, Allowed: true}
	for _, ru := range rules {
		r.Rules = append(r.Rules, ru.rec())
		r.Allowed = r.Allowed && ru.allowed
	}
	if r.Outcome == "" {
		r.Outcome = OutDenied
		if r.Allowed {
			r.Outcome = OutAllowed
		}
	}
	b.h.Add(r)
	return b.id
}

func (b *hist) probe(s float64, rules ...rule) {
	id := b.dec(s, s+1, "", rules...)
	rs := b.h.records
	for i := range rs {
		if rs[i].ID == id {
			rs[i].Op = "probe"
		}
	}
}

func (b *hist) fault(kind string, s, e float64) {
	b.h.Add(Record{Kind: KindFault, Start: ms(s), End: ms(e), Fault: &FaultRec{Kind: kind}})
}

func fw(allowed bool) rule {
	return rule{key: "fw", alg: "fixed_window", rate: 3, period: time.Second, allowed: allowed, reset: 500 * time.Millisecond}
}

func kinds(vs []Violation) string {
	var ks []string
	for _, v := range vs {
		ks = append(ks, v.Kind)
	}
	return strings.Join(ks, ",")
}

func check(t *testing.T, b *hist) Summary {
	t.Helper()
	s := Check(b.h, CheckOptions{Timeout: 50 * time.Millisecond, Slack: 20 * time.Millisecond})
	for _, v := range s.Violations {
		t.Logf("%s", v)
	}
	return s
}

func TestCheckFixedWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		build  func(b *hist)
		want   string
		excess int64
	}{
		{"limit per window holds", func(b *hist) {
			for _, x := range []float64{100, 200, 300, 1100, 1200, 1300} {
				b.dec(x, x+2, "", fw(true))
			}
			b.dec(400, 402, "", fw(false))
		}, "", 0},
		{"one extra in a window", func(b *hist) {
			for _, x := range []float64{100, 200, 300, 400} {
				b.dec(x, x+2, "", fw(true))
			}
		}, VOverAdmission, 1},
		{"a call across the boundary counts in neither window", func(b *hist) {
			for _, x := range []float64{100, 200, 300} {
				b.dec(x, x+2, "", fw(true))
			}
			b.dec(999, 1001, "", fw(true))
		}, "", 0},
		{"fallback decisions are not Redis's", func(b *hist) {
			for _, x := range []float64{100, 200, 300} {
				b.dec(x, x+2, "", fw(true))
			}
			b.dec(400, 402, OutFallback, fw(true))
			b.dec(500, 502, OutOpen, rule{key: "fw", alg: "fixed_window", rate: 3, period: time.Second, evaluatedFalse: true})
		}, "", 0},
		{"a refund gives a unit back", func(b *hist) {
			id := b.dec(100, 102, "", fw(true))
			b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(150), End: ms(151), Units: []int64{1}, Result: ResOK})
			for _, x := range []float64{200, 300, 400} {
				b.dec(x, x+2, "", fw(true))
			}
		}, "", 0},
		{"a refund that gave nothing back gives nothing", func(b *hist) {
			id := b.dec(100, 102, "", fw(true))
			b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(150), End: ms(151), Units: []int64{1}, Result: ResNotRefunded})
			for _, x := range []float64{200, 300, 400} {
				b.dec(x, x+2, "", fw(true))
			}
		}, VOverAdmission, 1},
		{"a reset starts the key afresh", func(b *hist) {
			for _, x := range []float64{100, 200, 300} {
				b.dec(x, x+2, "", fw(true))
			}
			b.h.Add(Record{Kind: KindReset, Start: ms(350), End: ms(351), Keys: []string{"fw"}, Result: ResOK})
			for _, x := range []float64{400, 500, 600} {
				b.dec(x, x+2, "", fw(true))
			}
		}, "", 0},
		// A key with quota blocks: after its reset, another instance may
		// answer from a block it took before, until the block's hold is
		// over (50 ms here), and such an answer counts nowhere; an answer
		// of the store, or from a block past the hold, counts.
		{"a block within its hold after a reset counts nowhere", func(b *hist) {
			blocked := fw(true)
			blocked.block = true
			for _, x := range []float64{100, 200, 300} {
				b.dec(x, x+2, "", fw(true))
			}
			b.h.Add(Record{Kind: KindReset, Start: ms(350), End: ms(351), Keys: []string{"fw"}, Hold: ms(50), Result: ResOK})
			b.dec(400, 400.5, "", blocked)
			for _, x := range []float64{500, 600, 700} {
				b.dec(x, x+2, "", blocked)
			}
		}, "", 0},
		{"a block past its hold after a reset counts", func(b *hist) {
			blocked := fw(true)
			blocked.block = true
			b.h.Add(Record{Kind: KindReset, Start: ms(350), End: ms(351), Keys: []string{"fw"}, Hold: ms(50), Result: ResOK})
			for _, x := range []float64{401, 500, 600, 700} {
				b.dec(x, x+2, "", blocked)
			}
		}, VOverAdmission, 1},
		{"the store's answer within a hold after a reset counts", func(b *hist) {
			b.h.Add(Record{Kind: KindReset, Start: ms(350), End: ms(351), Keys: []string{"fw"}, Hold: ms(50), Result: ResOK})
			for _, x := range []float64{380, 500, 600, 700} {
				b.dec(x, x+2, "", fw(true))
			}
		}, VOverAdmission, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newHist()
			tc.build(b)
			s := check(t, b)
			if got := kinds(s.Violations); got != tc.want {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
			if tc.want != "" && s.Violations[0].Excess != tc.excess {
				t.Fatalf("excess %d, want %d", s.Violations[0].Excess, tc.excess)
			}
		})
	}
}

func TestCheckLostToFailover(t *testing.T) {
	t.Parallel()
	b := newHist()
	for _, x := range []float64{100, 200, 300, 500} {
		b.dec(x, x+2, "", fw(true))
	}
	b.fault(world.Kill, 400, 450)
	s := check(t, b)
	if len(s.Violations) != 0 || len(s.Lost) != 1 || s.LostUnits != 1 {
		t.Fatalf("violations %q, lost %d (%d units), want none and 1 (1 unit)", kinds(s.Violations), len(s.Lost), s.LostUnits)
	}
	// More than a failover can lose is beyond its bound: here a full
	// bucket and a second's refill, 14 units.
	b = newHist()
	tb := rule{key: "tb", alg: "token_bucket", rate: 10, burst: 4, period: time.Second, allowed: true}
	for i := range 26 { // 26 within 610 ms: at most 4 + 6
		x := 300 + float64(i)
		if i < 4 {
			x = float64(i)
		}
		b.dec(x, x+1, "", tb)
	}
	b.fault(world.Failover, 100, 290)
	if s := check(t, b); kinds(s.Violations) != VOverAdmission || !strings.Contains(s.Violations[0].Msg, "beyond their bound") {
		t.Fatalf("violations %q, want one over-admission beyond the bound", kinds(s.Violations))
	}
	// A clock fault is two failovers and one forward step of the clock:
	// 2 × 14 + a full bucket, 32 units; 16 over is within it, 40 is not.
	for _, tc := range []struct {
		n         int
		violation bool
	}{{26, false}, {50, true}} {
		b = newHist()
		for i := range tc.n {
			x := 300 + float64(i)*600/float64(tc.n)
			if i < 4 {
				x = float64(i)
			}
			b.dec(x, x+1, "", tb)
		}
		b.fault(world.ClockBehind, 100, 290)
		s := check(t, b)
		if got := kinds(s.Violations) == VOverAdmission && strings.Contains(s.Violations[0].Msg, "beyond their bound"); got != tc.violation {
			t.Fatalf("%d admissions around a clock fault: violations %q, want a violation: %v", tc.n, kinds(s.Violations), tc.violation)
		}
	}
	b = newHist()
	for _, x := range []float64{0, 1, 2, 3, 600, 601, 602, 603, 604, 605, 606, 607, 608} { // 13 within 609 ms: at most 4 + 6
		b.dec(x, x+1, "", tb)
	}
	b.fault(world.Kill, 100, 590) // a restart forgets the bucket: within its bound
	if s := check(t, b); len(s.Violations) != 0 || s.LostUnits != 3 {
		t.Fatalf("violations %q, lost %d, want none and 3", kinds(s.Violations), s.LostUnits)
	}
	// A fault that loses no writes excuses nothing.
	b = newHist()
	for _, x := range []float64{100, 200, 300, 500} {
		b.dec(x, x+2, "", fw(true))
	}
	b.fault(world.Pause, 400, 450)
	if s := check(t, b); kinds(s.Violations) != VOverAdmission || len(s.Lost) != 0 {
		t.Fatalf("violations %q, lost %d, want over-admission and none", kinds(s.Violations), len(s.Lost))
	}
}

func TestCheckSlidingLog(t *testing.T) {
	t.Parallel()
	sl := func(allowed bool) rule {
		return rule{key: "sl", alg: "sliding_log", rate: 3, period: time.Second, allowed: allowed}
	}
	b := newHist()
	for _, x := range []float64{0, 400, 800, 1100, 1500, 1900} { // any second holds 3
		b.dec(x, x+2, "", sl(true))
	}
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q on a correct history", kinds(s.Violations))
	}
	b = newHist()
	for _, x := range []float64{0, 400, 800, 990} { // 4 within 992 ms
		b.dec(x, x+2, "", sl(true))
	}
	if s := check(t, b); kinds(s.Violations) != VOverAdmission {
		t.Fatalf("violations %q, want over-admission", kinds(s.Violations))
	}
	b = newHist()
	for _, x := range []float64{0, 400, 800, 999} { // the last call may have run 1 s after the first: unknown
		b.dec(x, x+2, "", sl(true))
	}
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q where the server's instants are unknown", kinds(s.Violations))
	}
}

func TestCheckSlidingWindow(t *testing.T) {
	t.Parallel()
	sw := rule{key: "sw", alg: "sliding_window", rate: 8, period: time.Second, allowed: true}
	// 8 in window 0; at 100 ms into window 1 the previous window weighs
	// 8·0.9 = 7.2: one more passes (8.2 > 8 would not).
	b := newHist()
	for i := range 8 {
		x := 100 + float64(i)*10
		b.dec(x, x+2, "", sw)
	}
	b.dec(1100, 1102, "", sw)
	if s := check(t, b); kinds(s.Violations) != VOverAdmission {
		t.Fatalf("violations %q, want over-admission", kinds(s.Violations))
	}
	// At 900 ms into window 1 it weighs 0.8: one passes.
	b = newHist()
	for i := range 8 {
		x := 100 + float64(i)*10
		b.dec(x, x+2, "", sw)
	}
	b.dec(1900, 1902, "", sw)
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q on a correct history", kinds(s.Violations))
	}
}

func TestCheckBucket(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"token_bucket", "gcra"} {
		tb := rule{key: "tb", alg: alg, rate: 10, burst: 4, period: time.Second, allowed: true}
		b := newHist()
		for _, x := range []float64{0, 1, 2, 3, 100, 200, 300} { // burst, then one per 100 ms
			b.dec(x, x+1, "", tb)
		}
		if s := check(t, b); len(s.Violations) != 0 {
			t.Fatalf("%s: violations %q on a correct history", alg, kinds(s.Violations))
		}
		b = newHist()
		for _, x := range []float64{0, 1, 2, 3, 50} { // 5 within 51 ms
			b.dec(x, x+1, "", tb)
		}
		if s := check(t, b); kinds(s.Violations) != VOverAdmission {
			t.Fatalf("%s: violations %q, want over-admission", alg, kinds(s.Violations))
		}
	}
}

func TestCheckConcurrency(t *testing.T) {
	t.Parallel()
	cc := rule{key: "cc", alg: "concurrency", rate: 2, period: time.Second, allowed: true}
	release := func(b *hist, id int64, at float64) {
		b.h.Add(Record{Kind: KindRelease, Ref: id, Start: ms(at), End: ms(at + 1), Result: ResOK})
	}
	b := newHist()
	a := b.dec(0, 1, "", cc)
	b.dec(10, 11, "", cc) // never released: held until its lease ends
	release(b, a, 50)
	b.dec(60, 61, "", cc)
	b.dec(1020, 1021, "", cc) // the lease of the second has ended
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q on a correct history", kinds(s.Violations))
	}
	b = newHist()
	b.dec(0, 1, "", cc)
	b.dec(10, 11, "", cc)
	b.dec(500, 501, "", cc)
	if s := check(t, b); kinds(s.Violations) != VConcurrency {
		t.Fatalf("violations %q, want concurrency", kinds(s.Violations))
	}
}

func TestCheckRefundTwice(t *testing.T) {
	t.Parallel()
	b := newHist()
	id := b.dec(0, 1, "", fw(true))
	b.h.records[0].Rules[0].Refund = true // a receipt
	b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(10), End: ms(11), Units: []int64{1}, Result: ResOK})
	b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(20), End: ms(21), Units: []int64{1}, Result: ResNotRefunded})
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q on a correct history", kinds(s.Violations))
	}
	b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(30), End: ms(31), Units: []int64{1}, Result: ResOK})
	if s := check(t, b); kinds(s.Violations) != VRefundTwice {
		t.Fatalf("violations %q, want refund-twice", kinds(s.Violations))
	}
	// Without a receipt there was nothing to give back: Settle's nil says
	// nothing.
	b.h.records[0].Rules[0].Refund = false
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q for a decision without a receipt", kinds(s.Violations))
	}
}

func TestCheckLockout(t *testing.T) {
	t.Parallel()
	// Told at 102 ms that the key is full again 500 ms later: a probe at
	// 2 s must be allowed; one at 700 ms may still be denied (settle).
	for _, tc := range []struct {
		at      float64
		allowed bool
		want    string
	}{
		{2000, true, ""},
		{2000, false, VLockout},
		{700, false, ""},
	} {
		b := newHist()
		b.dec(100, 102, "", fw(false))
		b.h.Add(Record{Kind: KindPhase, Phase: "quiet", Start: 0, End: 0})
		b.probe(tc.at, fw(tc.allowed))
		if s := check(t, b); kinds(s.Violations) != tc.want {
			t.Errorf("probe at %v ms allowed=%v: violations %q, want %q", tc.at, tc.allowed, kinds(s.Violations), tc.want)
		}
	}
}

func TestCheckLiveness(t *testing.T) {
	t.Parallel()
	b := newHist()
	b.dec(0, 60, "", fw(true))
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q for a call of 60 ms (bound 70)", kinds(s.Violations))
	}
	b.dec(100, 190, "", fw(true))
	if s := check(t, b); kinds(s.Violations) != VLiveness {
		t.Fatalf("violations %q, want liveness", kinds(s.Violations))
	}
}

func TestCheckGoroutines(t *testing.T) {
	t.Parallel()
	b := newHist()
	b.h.Add(Record{Kind: KindGoroutines, Before: 20, After: 25})
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q within the slack", kinds(s.Violations))
	}
	b.h.Add(Record{Kind: KindGoroutines, Before: 20, After: 200})
	if s := check(t, b); kinds(s.Violations) != VGoroutines {
		t.Fatalf("violations %q, want goroutines", kinds(s.Violations))
	}
}

func TestHistoryJSON(t *testing.T) {
	t.Parallel()
	b := newHist()
	id := b.dec(0, 1, "", fw(true), rule{key: "tb", alg: "token_bucket", rate: 10, burst: 4, period: time.Second, allowed: true})
	b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(10), End: ms(11), Units: []int64{1, 0}, Result: ResOK})
	b.fault(world.Kill, 5, 6)
	var buf strings.Builder
	if err := b.h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	var again strings.Builder
	if err := h.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != buf.String() || h.Base != testBase || h.Len() != 3 {
		t.Fatalf("read back:\n%s\nwant:\n%s", again.String(), buf.String())
	}
}

func TestCheckCapacityLost(t *testing.T) {
	t.Parallel()
	// One unit admitted, then the rule denies in the same window: 2 units
	// were charged to calls that did not get them.
	b := newHist()
	b.dec(100, 102, "", fw(true))
	b.dec(150, 200, OutFallback, rule{key: "fw", alg: "fixed_window", rate: 3, period: time.Second, evaluatedFalse: true})
	b.dec(300, 302, "", fw(false))
	b.fault(world.Pause, 120, 220)
	// A full window denying is no loss.
	for _, x := range []float64{1100, 1200, 1300} {
		b.dec(x, x+2, "", fw(true))
	}
	b.dec(1400, 1402, "", fw(false))
	s := check(t, b)
	if len(s.Violations) != 0 || len(s.CapacityLost) != 1 || s.CapacityLost[world.Pause] != 2 {
		t.Fatalf("violations %q, capacity lost %v, want none and pause:2", kinds(s.Violations), s.CapacityLost)
	}
}

func TestCheckKilledWorker(t *testing.T) {
	t.Parallel()
	// A worker killed with SIGKILL may have released a slot, or settled a
	// refund, without its record reaching the history: its holds end at
	// its death, its unsettled refundable reservations count nothing.
	cc := rule{key: "cc", alg: "concurrency", rate: 1, period: time.Second, allowed: true}
	b := newHist()
	b.h.Add(Record{Kind: KindDecision, Inst: 4, ID: 1, Start: ms(0), End: ms(1), Outcome: OutAllowed, Allowed: true, Rules: []RuleRec{cc.rec()}})
	b.h.Add(Record{Kind: KindFault, Start: ms(100), End: ms(101), Fault: &FaultRec{Kind: world.InstanceCrash, Killed: true, Inst: 4}})
	b.dec(200, 201, "", cc)
	if s := check(t, b); len(s.Violations) != 0 {
		t.Fatalf("violations %q after a killed worker", kinds(s.Violations))
	}
	// In process, nothing is lost: the slot is held until its lease ends.
	b.h.records[1].Fault.Killed = false
	if s := check(t, b); kinds(s.Violations) != VConcurrency {
		t.Fatalf("violations %q, want concurrency", kinds(s.Violations))
	}
}

func TestCheckLivenessStalled(t *testing.T) {
	t.Parallel()
	// A call of 190 ms (bound 70) while the process was not scheduled for
	// 150 ms: the machine's fault, not the product's.
	b := newHist()
	b.dec(100, 290, "", fw(true))
	b.h.Add(Record{Kind: KindStall, Inst: -1, Start: ms(120), End: ms(275)})
	if s := check(t, b); len(s.Violations) != 0 || s.Stalled != 1 {
		t.Fatalf("violations %q, stalled %d, want none and 1", kinds(s.Violations), s.Stalled)
	}
	// A stall shorter than the excess explains nothing.
	b = newHist()
	b.dec(100, 290, "", fw(true))
	b.h.Add(Record{Kind: KindStall, Inst: -1, Start: ms(120), End: ms(160)})
	if s := check(t, b); kinds(s.Violations) != VLiveness {
		t.Fatalf("violations %q, want liveness", kinds(s.Violations))
	}
}

// TestCheckLivenessRunqueue: on a loaded machine the process runs (no
// timer fires late) but its threads wait their turn for a CPU. A call of
// 190 ms (120 over the bound of 70) is the machine's when the process's
// threads waited at least 120 ms on the run queue while it ran: each
// runqueue record counts by its overlap with the call. A worker process's
// own records count for its calls, not the harness's.
func TestCheckLivenessRunqueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		inst  int   // the runqueue records' process
		waits []int // ms waited in [0, 100), [100, 200), [200, 300)
		viol  string
	}{
		{"waited as long as the excess", -1, []int{0, 100, 100}, ""},       // 100 + 100·90/100 = 190
		{"waited less than the excess", -1, []int{300, 30, 30}, VLiveness}, // 30 + 27 = 57
		{"another process waited", 7, []int{0, 100, 100}, VLiveness},
	} {
		b := newHist()
		b.dec(100, 290, "", fw(true))
		for i, w := range tc.waits {
			b.h.Add(Record{Kind: KindRunqueue, Inst: tc.inst, Start: ms(float64(100 * i)), End: ms(float64(100 * (i + 1))), Wait: ms(float64(w))})
		}
		if tc.inst == 7 {
			b.h.Add(Record{Kind: KindRunqueue, Inst: 0, Start: ms(0), End: ms(300), Wait: ms(1)})
		}
		if s := check(t, b); kinds(s.Violations) != tc.viol {
			t.Errorf("%s: violations %q, want %q", tc.name, kinds(s.Violations), tc.viol)
		}
	}
}

func TestCheckSlowReleaseReported(t *testing.T) {
	t.Parallel()
	b := newHist()
	id := b.dec(0, 1, "", rule{key: "cc", alg: "concurrency", rate: 2, period: time.Second, allowed: true})
	b.h.Add(Record{Kind: KindRelease, Ref: id, Start: ms(10), End: ms(111), Result: ResOK})
	s := check(t, b)
	if len(s.Violations) != 0 || s.SlowAfter != 1 || s.MaxAfter != 101*time.Millisecond {
		t.Fatalf("violations %q, slow after %d (max %v), want none and 1 (101ms)", kinds(s.Violations), s.SlowAfter, s.MaxAfter)
	}
}

func TestCheckObservedPromotion(t *testing.T) {
	t.Parallel()
	// A promotion nobody injected (sentinels acting on a slow machine)
	// loses writes like a failover: counted apart, not a fault.
	b := newHist()
	for _, x := range []float64{100, 200, 300, 500} {
		b.dec(x, x+2, "", fw(true))
	}
	b.h.Add(Record{Kind: KindFault, Start: ms(400), End: ms(450), Fault: &FaultRec{Kind: Promotion, Observed: true}})
	s := check(t, b)
	if len(s.Violations) != 0 || s.LostUnits != 1 || s.Faults != 0 || s.Observed != 1 {
		t.Fatalf("violations %q, lost %d, faults %d, observed %d; want none, 1, 0, 1", kinds(s.Violations), s.LostUnits, s.Faults, s.Observed)
	}

	// During a pause (a master stopped past the sentinels' down-after) it
	// is a failover too; during a kill-master, the kill accounts for it.
	for _, tc := range []struct {
		kind string
		lost int64
	}{{world.Pause, 1}, {world.KillMaster, 1}, {world.Latency, 1}} {
		b := newHist()
		for _, x := range []float64{100, 200, 300, 500} {
			b.dec(x, x+2, "", fw(true))
		}
		b.h.Add(Record{Kind: KindFault, Start: ms(350), End: ms(700), Fault: &FaultRec{Kind: tc.kind}})
		b.h.Add(Record{Kind: KindFault, Start: ms(400), End: ms(450), Fault: &FaultRec{Kind: Promotion, Observed: true}})
		s := check(t, b)
		if len(s.Violations) != 0 || s.LostUnits != tc.lost {
			t.Errorf("promotion during %s: violations %q, lost %d; want none, %d", tc.kind, kinds(s.Violations), s.LostUnits, tc.lost)
		}
	}

	// A promotion that outlasts the kill-master it overlaps (Sentinel
	// seed 964: the next fault paused the new master as the kill-master's
	// heal ended) is a failover of its own: the kill-master's window, which
	// ended before the window over the limit, does not excuse it. An
	// over-admission beyond the promotion's own bound is still a violation.
	for _, tc := range []struct {
		extra int // admissions over the limit of 3
		viol  string
	}{{1, ""}, {9, VOverAdmission}} {
		b := newHist()
		for i := range 3 + tc.extra {
			x := 3100 + 10*float64(i)
			b.dec(x, x+2, "", fw(true))
		}
		b.h.Add(Record{Kind: KindFault, Start: ms(500), End: ms(1500), Fault: &FaultRec{Kind: world.KillMaster}})
		b.h.Add(Record{Kind: KindFault, Start: ms(1400), End: ms(2500), Fault: &FaultRec{Kind: Promotion, Observed: true}})
		s := check(t, b)
		if kinds(s.Violations) != tc.viol {
			t.Errorf("%d over, promotion past a kill-master: violations %q, lost %d; want %q", tc.extra, kinds(s.Violations), s.LostUnits, tc.viol)
		}
		if tc.viol == "" && s.LostUnits != 1 {
			t.Errorf("promotion past a kill-master: lost %d, want 1", s.LostUnits)
		}
	}
}

// TestCheckResetIgnored: a fixed window key with quota blocks moves to its
// next epoch on a reset; an instance still denied on the old epoch's key
// more than the grace (2 Holds + Timeout + Slack: 170ms here) after its
// first denial there, while the new epoch was in use, ignored the reset.
func TestCheckResetIgnored(t *testing.T) {
	t.Parallel()
	use := func(b *hist, inst int, at float64, key string, allowed bool) {
		b.id++
		r := Record{Kind: KindDecision, Inst: inst, ID: b.id, Op: "decide", Start: ms(at), End: ms(at + 1), Allowed: allowed, Outcome: OutDenied,
			Rules: []RuleRec{{Rule: "hot-fw", Key: key, Alg: "fixed_window", Rate: 1000, Period: time.Second.Microseconds(), Cost: 1, Evaluated: true, Allowed: allowed}}}
		if allowed {
			r.Outcome = OutAllowed
		}
		b.h.Add(r)
	}
	const old, cur = "hot:fw:{h0}", "hot:fw:{h0}:e1"
	for _, tc := range []struct {
		name  string
		build func(b *hist)
		want  string
	}{
		{"denied on the old epoch past the grace", func(b *hist) {
			use(b, 1, 200, old, false)
			use(b, 1, 250, old, false)
			use(b, 1, 400, old, false)
		}, VResetIgnored},
		{"learned within the grace", func(b *hist) {
			use(b, 1, 200, old, false)
			use(b, 1, 260, cur, true)
			use(b, 1, 500, cur, false)
		}, ""},
		{"a fault excuses it", func(b *hist) {
			use(b, 1, 200, old, false)
			b.fault("failover", 300, 350)
			use(b, 1, 400, old, false)
		}, ""},
		// An instance may hold an epoch it learned from a node whose clock
		// was behind for the skew past the fault's heal, and a period more
		// (cluster seed 901): a clock fault that healed 3 s before the
		// first denial excuses it when its skew was 3 s, not when it was
		// 500 ms.
		{"a clock fault's aftermath excuses it", func(b *hist) {
			b.h.Add(Record{Kind: KindFault, Start: ms(-4000), End: ms(-3000), Fault: &FaultRec{Kind: world.ClockBehind, Detail: "skew -3s: 127.0.0.1:1 (faketime) becomes master"}})
			use(b, 1, 200, old, false)
			use(b, 1, 400, old, false)
		}, ""},
		{"a short skew long ago does not", func(b *hist) {
			b.h.Add(Record{Kind: KindFault, Start: ms(-4000), End: ms(-3000), Fault: &FaultRec{Kind: world.ClockBehind, Detail: "skew -500ms: 127.0.0.1:1 (faketime) becomes master"}})
			use(b, 1, 200, old, false)
			use(b, 1, 400, old, false)
		}, VResetIgnored},
		{"each instance has its own first denial", func(b *hist) {
			use(b, 1, 200, old, false)
			use(b, 2, 360, old, false)
			use(b, 1, 360, cur, true)
			use(b, 2, 400, cur, true)
		}, ""},
		{"another window proves nothing", func(b *hist) {
			use(b, 1, 200, old, false)
			use(b, 1, 1200, old, false)
			use(b, 1, 1400, old, false)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newHist()
			b.h.Add(Record{Kind: KindReset, Inst: 0, Start: ms(100), End: ms(101), Keys: []string{"hot:gcra:{j0}"}, Hold: ms(50), Result: ResOK})
			use(b, 0, 110, cur, true) // the resetting instance, on the new epoch
			tc.build(b)
			s := check(t, b)
			var got []string
			for _, v := range s.Violations {
				if v.Kind == VResetIgnored {
					got = append(got, v.Kind)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		key  string
		base string
		n    int64
	}{{old, old, 0}, {cur, old, 1}, {"hot:fw:{h0}:e12", old, 12}, {"x:e3", "x:e3", 0}, {"hot:fw:{e1}", "hot:fw:{e1}", 0}} {
		if k, n := epochOf(tc.key); k != tc.base || n != tc.n {
			t.Errorf("epochOf(%q) = %q, %d, want %q, %d", tc.key, k, n, tc.base, tc.n)
		}
	}
}

// TestCheckSplitBrain: while two nodes answer as masters (a Sentinel master
// failed over while paused, kept a master by a replica the sentinels did
// not know: seed 964), instances on each admit the key's full rate. The
// checker bounds that by the split brain's length, not by one failover:
// a window three seconds into a split brain over by its rate is lost to
// it; the same window with no split brain, or over by more than the bound,
// is a violation.
func TestCheckSplitBrain(t *testing.T) {
	t.Parallel()
	promote := func(b *hist, at float64, detail string) {
		b.h.Add(Record{Kind: KindFault, Start: ms(at), End: ms(at + 100), Fault: &FaultRec{Kind: Promotion, Observed: true, Detail: detail}})
	}
	for _, tc := range []struct {
		name   string
		second string // the masters the second promotion sees
		over   int    // admissions over the limit of 3 in the window 3–4 s
		viol   string
		lost   int64
	}{
		{"split brain", "A,B", 3, "", 3},
		{"split brain, over its bound (3 + 3/s × 4.1 s)", "A,B", 16, VOverAdmission, 0},
		{"no split brain", "A", 3, VOverAdmission, 0},
	} {
		b := newHist()
		for i := range 3 + tc.over {
			x := 3100 + 10*float64(i)
			b.dec(x, x+2, "", fw(true))
		}
		promote(b, 1000, "A → B")
		promote(b, 1400, "B → "+tc.second)
		promote(b, 4400, tc.second+" → B")
		s := check(t, b)
		if kinds(s.Violations) != tc.viol || s.LostUnits != tc.lost {
			t.Errorf("%s: violations %q, lost %d; want %q, %d", tc.name, kinds(s.Violations), s.LostUnits, tc.viol, tc.lost)
		}
	}

	// The split brains of a run: from the start of the promotion that
	// added a master (more than the first set) to the end of the one that
	// took it away; one still open lasts to the history's end.
	var fs []Record
	for _, p := range []struct {
		at     float64
		detail string
	}{{100, "A,C,E → B,C,E"}, {500, "B,C,E → A,B,C,E"}, {700, "A,B,C,E → A,B,C,D,E"}, {900, "A,B,C,D,E → B,C,E"}, {2000, "B,C,E → B,C,D,E"}} {
		fs = append(fs, Record{Kind: KindFault, Start: ms(p.at), End: ms(p.at + 100), Fault: &FaultRec{Kind: Promotion, Observed: true, Detail: p.detail}})
	}
	got := splitBrains(fs, ms(5000))
	want := [][3]int64{{ms(500), ms(1000), 2}, {ms(2000), ms(5000), 1}}
	if len(got) != len(want) {
		t.Fatalf("split brains %v, want %v", got, want)
	}
	for i, g := range got {
		if w := want[i]; g.Start != w[0] || g.End != w[1] || int64(g.Fault.Masters) != w[2] {
			t.Errorf("split brain %d: [%d, %d] with %d too many, want %v", i, g.Start, g.End, g.Fault.Masters, w)
		}
	}
}
