package chaos

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// A worker's own fixed window key, as the late compensations use them:
// 1000 units per period, 2 a call.
func late(period time.Duration, allowed bool) rule {
	return rule{key: "late", alg: "fixed_window", rate: 1000, period: period, cost: 2, allowed: allowed, reset: 500 * time.Millisecond, receipt: allowed}
}

// lateX is the rule that denies a call of late and lateX.
var lateX = rule{key: "late-x", alg: "fixed_window", rate: 1, period: time.Minute, allowed: false, reset: time.Minute}

// peek records a peek of the key by instance 0 over [s, e] ms that read
// rem units left.
func (b *hist) peek(s, e float64, period time.Duration, rem int64) {
	b.id++
	rr := late(period, true).rec()
	rr.Cost, rr.Remaining = 1, rem
	b.h.Add(Record{Kind: KindPeek, ID: b.id, Op: OpLatePeek, Start: ms(s), End: ms(e), Outcome: OutAllowed, Allowed: true, Rules: []RuleRec{rr}})
}

func (b *hist) refund(id int64, s, e float64, res string) {
	b.h.Add(Record{Kind: KindRefund, Ref: id, Start: ms(s), End: ms(e), Units: []int64{2}, Result: res})
}

// failed records a call of late (and lateX) that asked Redis and failed
// over [s, e] ms, in parts hash slots.
func (b *hist) failed(s, e float64, period time.Duration, parts int) {
	id := b.dec(s, e, OutFallback, late(period, true), lateX)
	for i := range b.h.records {
		if r := &b.h.records[i]; r.ID == id {
			r.Err, r.Parts = "redlimit: engine backend: context deadline exceeded", parts
			for j := range r.Rules {
				r.Rules[j].Evaluated = false
			}
		}
	}
}

// deadline gives decision id a caller's deadline at ms.
func (b *hist) deadline(id int64, at float64) {
	for i := range b.h.records {
		if r := &b.h.records[i]; r.Kind == KindDecision && r.ID == id {
			r.Deadline = ms(at)
		}
	}
}

// TestCheckRefundLost: a peek of a fixed window key that counts units the
// history does not explain is a refund, cancel or compensation that
// returned without error and gave nothing back; the legitimate cases
// where nothing is given back are not.
func TestCheckRefundLost(t *testing.T) {
	t.Parallel()
	sec, five := time.Second, 5*time.Second
	for _, tc := range []struct {
		name   string
		build  func(b *hist)
		excess int64 // 0: no violation
	}{
		// Refunds (Settle).
		{"a refund gives back", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.peek(130, 131, sec, 1000)
		}, 0},
		{"a refund that returned success and gave nothing back", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.peek(130, 131, sec, 998)
		}, 2},
		{"a refund of a decision without a receipt gives nothing back", func(b *hist) {
			r := late(sec, true)
			r.receipt = false
			id := b.dec(100, 102, "", r)
			b.refund(id, 120, 121, ResOK)
			b.peek(130, 131, sec, 998)
		}, 0},
		{"a refund still under way at the peek", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 140, ResOK)
			b.peek(130, 131, sec, 998)
		}, 0},
		{"a refund sent twice gives back once", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.refund(id, 122, 123, ResNotRefunded)
			b.peek(130, 131, sec, 1000)
		}, 0},
		{"a refund that failed, or was refused (refund window over)", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResError)
			id = b.dec(200, 202, "", late(sec, true))
			b.refund(id, 220, 221, ResNotRefunded)
			b.peek(230, 231, sec, 996)
		}, 0},
		{"a refund after the window ended gives nothing back, and owes nothing", func(b *hist) {
			id := b.dec(900, 902, "", late(sec, true))
			b.peek(950, 951, sec, 998)
			b.refund(id, 1010, 1011, ResOK)
			b.peek(1020, 1021, sec, 1000)
		}, 0},
		{"a refund after a reset gives nothing back, and owes nothing", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.h.Add(Record{Kind: KindReset, Start: ms(110), End: ms(111), Keys: []string{"late"}, Result: ResOK})
			b.refund(id, 120, 121, ResOK)
			b.peek(130, 131, sec, 1000)
		}, 0},
		{"a peek across a window's end is not read", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.peek(999, 1001, sec, 998)
		}, 0},
		// Compensations (a call spanning slots that another slot denied).
		{"a compensation gives back", func(b *hist) {
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 1000)
		}, 0},
		{"a compensation that gave nothing back", func(b *hist) {
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 2},
		{"a part that denied committed nothing", func(b *hist) {
			b.dec(100, 105, "", late(sec, false), lateX)
			b.peek(106, 107, sec, 998)
		}, 2},
		{"a compensation reported failed (OnRefundError)", func(b *hist) {
			b.dec(100, 105, "", late(sec, true), lateX)
			b.h.Add(Record{Kind: KindRefundError, Start: ms(104), End: ms(104), Err: "connection reset"})
			b.peek(106, 107, sec, 998)
		}, 0},
		{"a call that took Timeout is compensated in the background, for GiveBackBound", func(b *hist) {
			b.dec(100, 160, "", late(five, true), lateX)
			b.peek(170, 171, five, 998)
			b.peek(3100, 3101, five, 998) // 3 s after the call ended
			b.peek(3200, 3201, five, 998)
		}, 2},
		{"a call that ran until its own deadline is compensated in the background, for GiveBackBound", func(b *hist) {
			b.deadline(b.dec(100, 106, "", late(five, true), lateX), 105.5)
			b.peek(106, 107, five, 998)
			b.peek(183, 184, five, 998) // given back 77 ms after the call
			b.peek(200, 201, five, 1000)
		}, 0},
		{"a call that ran until its own deadline and was never compensated", func(b *hist) {
			b.deadline(b.dec(100, 106, "", late(five, true), lateX), 105.5)
			b.peek(106, 107, five, 998)
			b.peek(3100, 3101, five, 998) // 3 s after the call ended
			b.peek(3200, 3201, five, 998)
		}, 2},
		{"a call that ended before its deadline is compensated before it returns", func(b *hist) {
			b.deadline(b.dec(100, 105, "", late(five, true), lateX), 105.1)
			b.peek(106, 107, five, 998)
		}, 2},
		{"a call during a fault that stops nodes is compensated in the background", func(b *hist) {
			b.fault(world.Pause, 50, 120)
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 0},
		{"a call during a failover of another shard is compensated before it returns", func(b *hist) {
			b.h.Add(Record{Kind: KindFault, Start: ms(50), End: ms(120), Fault: &FaultRec{Kind: world.Failover, Slots: otherSlots("late")}})
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 2},
		{"a call while a master of another shard is dead meets a cluster down", func(b *hist) {
			b.h.Add(Record{Kind: KindFault, Start: ms(50), End: ms(120), Fault: &FaultRec{Kind: world.KillMaster, Slots: otherSlots("late")}})
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 0},
		{"a call during a promotion of another shard while paused meets a cluster down", func(b *hist) {
			b.h.Add(Record{Kind: KindFault, Start: ms(50), End: ms(400), Fault: &FaultRec{Kind: world.Pause, Slots: otherSlots("late")}})
			b.h.Add(Record{Kind: KindFault, Start: ms(90), End: ms(110), Fault: &FaultRec{Kind: Promotion, Observed: true, Detail: "a,b → c,b"}})
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 0},
		// Calls that failed.
		{"a failed call in one slot stays charged", func(b *hist) {
			b.failed(100, 103, five, 0)
			b.peek(3500, 3501, five, 998)
		}, 0},
		{"a failed call spanning slots is compensated within GiveBackBound", func(b *hist) {
			b.failed(100, 103, five, 2)
			b.peek(500, 501, five, 998)
			b.peek(3200, 3201, five, 998)
		}, 2},
		{"a failed call that may commit later counts in the next window too", func(b *hist) {
			b.failed(900, 903, sec, 0)
			b.peek(1500, 1501, sec, 998)
		}, 0},
		{"the fallback deciding alone asked nothing of Redis", func(b *hist) {
			b.dec(100, 101, OutFallback, late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
		}, 2},
		// Faults.
		{"a failover may lose a refund's write", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.fault(world.KillMaster, 200, 300)
			b.peek(400, 401, sec, 998)
		}, 0},
		{"a replica's restart loses no refund", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.fault(world.Kill, 200, 300)
			b.peek(400, 401, sec, 998)
		}, 2},
		{"a failover after the refund replicated loses nothing", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.fault(world.KillMaster, 500, 600)
			b.peek(700, 701, sec, 998)
		}, 2},
		{"a clock fault moves the server's windows", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(300), End: ms(400), Fault: &FaultRec{Kind: world.ClockBehind, Detail: "skew -1s: a node"}})
			b.peek(700, 701, sec, 998)
		}, 0},
		{"a clock fault on another shard moves nothing of the key", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(300), End: ms(400), Fault: &FaultRec{Kind: world.ClockBehind, Detail: "skew -1s: a node", Slots: otherSlots("late")}})
			b.peek(700, 701, sec, 998)
		}, 2},
		{"a failover of another shard loses nothing of the key", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(200), End: ms(300), Fault: &FaultRec{Kind: world.KillMaster, Slots: otherSlots("late")}})
			b.peek(400, 401, sec, 998)
		}, 2},
		{"a failover of the key's shard may lose its refund", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			s := hashslot.Of("late")
			b.h.Add(Record{Kind: KindFault, Start: ms(200), End: ms(300), Fault: &FaultRec{Kind: world.KillMaster, Slots: [][2]int{{s, s}}}})
			b.peek(400, 401, sec, 998)
		}, 0},
		{"a promotion seen during a pause of another shard loses nothing of the key", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(150), End: ms(350), Fault: &FaultRec{Kind: world.Pause, Slots: otherSlots("late")}})
			b.h.Add(Record{Kind: KindFault, Start: ms(200), End: ms(300), Fault: &FaultRec{Kind: Promotion, Observed: true, Detail: "a,b → c,b"}})
			b.peek(400, 401, sec, 998)
		}, 2},
		{"a promotion seen that no injected fault explains may lose the refund", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(200), End: ms(300), Fault: &FaultRec{Kind: Promotion, Observed: true, Detail: "a,b → c,b"}})
			b.peek(400, 401, sec, 998)
		}, 0},
		{"a killed worker's last records may be lost", func(b *hist) {
			id := b.dec(100, 102, "", late(sec, true))
			b.refund(id, 120, 121, ResOK)
			b.h.Add(Record{Kind: KindFault, Start: ms(200), End: ms(210), Fault: &FaultRec{Kind: world.InstanceCrash, Killed: true}})
			b.peek(300, 301, sec, 998)
		}, 0},
		// One violation per window, with its largest excess.
		{"each window once", func(b *hist) {
			b.dec(100, 105, "", late(sec, true), lateX)
			b.peek(106, 107, sec, 998)
			b.dec(200, 205, "", late(sec, true), lateX)
			b.peek(206, 207, sec, 996)
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newHist()
			tc.build(b)
			s := check(t, b)
			var got []Violation
			for _, v := range s.Violations {
				if v.Kind == VRefundLost {
					got = append(got, v)
				}
			}
			switch {
			case len(got) != len(s.Violations):
				t.Fatalf("violations %q, want only %s", kinds(s.Violations), VRefundLost)
			case tc.excess == 0 && len(got) != 0:
				t.Fatalf("%d refund-lost violations, want none", len(got))
			case tc.excess != 0 && (len(got) != 1 || got[0].Excess != tc.excess):
				t.Fatalf("%d refund-lost violations (%v), want one of %d units", len(got), got, tc.excess)
			}
			if s.GiveBackPeeks == 0 {
				t.Fatalf("no peek read")
			}
		})
	}
}

// otherSlots are every hash slot but key's.
func otherSlots(key string) [][2]int {
	s := hashslot.Of(key)
	var r [][2]int
	if s > 0 {
		r = append(r, [2]int{0, s - 1})
	}
	if s < 16383 {
		r = append(r, [2]int{s + 1, 16383})
	}
	return r
}

// TestCheckRefundLostBlocks: a key whose rule takes quota blocks is not
// read (a block charges units no call records).
func TestCheckRefundLostBlocks(t *testing.T) {
	t.Parallel()
	b := newHist()
	b.dec(100, 102, "", late(time.Second, true))
	b.peek(130, 131, time.Second, 990)
	for i := range b.h.records {
		for j := range b.h.records[i].Rules {
			b.h.records[i].Rules[j].Blocks = true
		}
	}
	if s := check(t, b); len(s.Violations) != 0 || s.GiveBackChecked != 0 {
		t.Fatalf("violations %q, %d peeks checked; want none and none", kinds(s.Violations), s.GiveBackChecked)
	}
}
