package chaos

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
)

// Late compensations: every worker has fixed window keys of its own, which
// no other worker touches, and gives units back to them late: refunds sent
// a few ms after their reservation (Settle), and, in calls spanning two
// hash slots whose other part denies or times out, the compensations the
// store sends itself (on a cluster: the refund of the part that committed,
// the cancel of a part that timed out), late because the other slot is
// slow: its replies are held a few ms (lateSlot, on every call; the slow
// and latency faults, a loaded machine, on top). After each, the worker
// peeks at its keys. The checker knows, from the records alone, every unit
// its keys can hold at the peek (refund-lost, see lostGiveBacks): a
// give-back that returned without error but gave nothing back shows as
// units the history does not explain.
const (
	OpLate     = "late"      // a decision of the late compensations
	OpLatePeek = "late-peek" // the peek that follows it
)

// Limits of the late compensations' rules. late-q, late-p and late-d never
// deny (a worker takes a few dozen units a second at most); late-x allows
// one unit per minute, so that a call of late-p (or late-d) and late-x is
// denied by late-x after late-p's part may have committed. late-d, whose
// calls time out and are compensated in the background (for up to
// GiveBackBound), has windows of 5 s: a later peek of the same window
// can tell whether the compensation gave back.
var (
	limLate  = algorithms.PerSecond(1000)
	limLateD = algorithms.Limit{Rate: 1000, Period: 5 * time.Second}
	limLateX = algorithms.PerMinute(1)
)

// lateSlotDelay is how long lateSlot holds a reply of late-x's slot.
const lateSlotDelay = 4 * time.Millisecond

// lateSets are the rule sets of the late compensations, without a deny
// cache (a denial of late-x answered locally would reach no store, and
// send no compensation).
func lateSets() map[string][]redlimit.Rule {
	q := redlimit.Rule{Name: "late-q", Algorithm: algorithms.FixedWindow, Limit: limLate, Refundable: true}
	p := redlimit.Rule{Name: "late-p", Algorithm: algorithms.FixedWindow, Limit: limLate}
	d := redlimit.Rule{Name: "late-d", Algorithm: algorithms.FixedWindow, Limit: limLateD}
	x := redlimit.Rule{Name: "late-x", Algorithm: algorithms.FixedWindow, Limit: limLateX}
	return map[string][]redlimit.Rule{
		"late-q": {q},
		"late-c": {p, x},
		"late-d": {d, x},
		// the peek: the three keys share the worker's hash tag, one slot
		"late-look": {q, p, d},
	}
}

// lateSlot is a go-redis hook on an instance's client that holds, for
// lateSlotDelay, the reply of every command on a late-x key: that slot is
// busy for a few ms. A call of late-p and late-x then hears late-x's part
// after late-p's, and on a cluster the compensation of late-p's part
// reaches its slot that much after its commit. (On a single node or
// Sentinel the call is one script: it just answers later.)
type lateSlot struct{}

func (lateSlot) DialHook(next redis.DialHook) redis.DialHook { return next }

func (lateSlot) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if touchesLateX(cmd) {
			time.Sleep(lateSlotDelay)
		}
		return err
	}
}

func (lateSlot) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if slices.ContainsFunc(cmds, touchesLateX) {
			time.Sleep(lateSlotDelay)
		}
		return err
	}
}

// touchesLateX reports whether cmd names a key of the late-x rule.
func touchesLateX(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, ":late-x:") {
			return true
		}
	}
	return false
}

// lateMaterial is the key material of worker w of instance inst: its own.
// The material of late-x adds "x", another hash tag, another slot.
func lateMaterial(inst, w int) string {
	return "i" + strconv.Itoa(inst) + "w" + strconv.Itoa(w)
}

// late runs one late compensation on worker w's keys, then peeks at them:
//
//   - half the time a refund after a delay: 2 units reserved on late-q,
//     0–20 ms of "work", then Settle of what it cost (0 or 1: 1 or 2
//     units given back), one time in eight settled twice (the second
//     must give nothing back);
//   - a quarter, a compensation: late-p (1 or 2 units) and late-x, in two
//     hash slots; late-x is exhausted but once per minute, so the call is
//     denied, and on a cluster the part of late-p, if it committed, is
//     refunded by the store once late-x's (held) answer is in;
//   - a quarter, late-d and late-x with a deadline of 0.5–6 ms: the call
//     mostly times out, and on a cluster the store refunds the parts that
//     committed and cancels those it did not hear from, in the background.
func (in *instance) late(ctx, bg context.Context, rng *rand.Rand, w int) {
	m := lateMaterial(in.cfg.ID, w)
	switch n := rng.IntN(4); {
	case n < 2:
		d, id := in.decide(bg, "late-q", OpLate, []redlimit.Input{{Material: m, Cost: 2}})
		if d.Allowed && d.Source != redlimit.SourceNone {
			pause(ctx, time.Duration(rng.IntN(21))*time.Millisecond)
			if in.crashed.Load() {
				return
			}
			cost := int64(rng.IntN(2))
			times := 1
			if rng.IntN(8) == 0 {
				times = 2
			}
			for range times {
				s := in.clock()
				err := settle(bg, in.engines["late-q"], d, cost)
				in.emit(Record{Kind: KindRefund, Inst: in.cfg.ID, Ref: id, Op: OpLate, Start: s, End: in.clock(),
					Units: []int64{2 - cost}, Result: settleResult(err), Err: errString(err)})
			}
		}
	case n == 2:
		in.decide(bg, "late-c", OpLate, []redlimit.Input{{Material: m, Cost: int64(1 + rng.IntN(2))}, {Material: m + "x"}})
	default:
		dctx, cancel := context.WithTimeout(bg, 500*time.Microsecond+time.Duration(rng.IntN(5500))*time.Microsecond)
		in.decide(dctx, "late-d", OpLate, []redlimit.Input{{Material: m, Cost: int64(1 + rng.IntN(2))}, {Material: m + "x"}})
		cancel()
	}
	if in.crashed.Load() {
		return
	}
	var d redlimit.Decision
	s := in.clock()
	peekInputs(in.engines["late-look"], bg, named(in.engines["late-look"], []redlimit.Input{{Material: m}, {Material: m}, {Material: m}}), &d)
	in.emit(Record{Kind: KindPeek, Inst: in.cfg.ID, ID: in.nextID.Add(1), Op: OpLatePeek, Start: s, End: in.clock(),
		Allowed: d.Allowed, Outcome: outcomeOf(&d), Rules: ruleRecs(&d), Err: errString(d.Err)})
}
