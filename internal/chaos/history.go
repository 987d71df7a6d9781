package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Record kinds.
const (
	KindDecision    = "decision"     // one Decide, as the OnDecision hook heard it
	KindPeek        = "peek"         // one peek of chosen rules' keys (consumes nothing)
	KindReset       = "reset"        // one reset of chosen rules' keys
	KindRefund      = "refund"       // one Settle of an earlier decision
	KindRelease     = "release"      // one Settle (release) of an earlier acquisition
	KindRefundError = "refund-error" // the store reported a compensation or refund as failed (redisstore.Config.OnRefundError)
	KindFault       = "fault"        // one fault as injected and healed
	KindGoroutines  = "goroutines"   // goroutine counts before and after the run
	KindConns       = "conns"        // client connections on the data nodes before and after the run
	KindStall       = "stall"        // the process was not scheduled: a 5 ms timer fired late by End−Start−5ms
	KindRunqueue    = "runqueue"     // the process's threads waited Wait µs per GOMAXPROCS on the OS run queue within [Start, End]
	KindPhase       = "phase"        // the run's phases: faults stop at At; probes start at At
)

// Decision outcomes, as the checker counts them.
const (
	OutAllowed  = "allowed"  // Redis (the primary) allowed
	OutDenied   = "denied"   // the primary (or the deny cache in front of it) denied
	OutFallback = "fallback" // the fallback backend decided (Allowed says how)
	OutOpen     = "open"     // let through undecided (fail open)
	OutFailed   = "failed"   // refused undecided (fail closed)
)

// Refund and release results.
const (
	ResOK          = "ok"           // the store gave back / released
	ResNotRefunded = "not-refunded" // the store gave nothing back (at most once)
	ResError       = "error"        // unknown: the call failed
)

// Record is one line of the history: what one instance saw, or one fault.
// Times are microseconds since the run's start (History.Base, Unix µs),
// on the local clock: an operation happened somewhere in [Start, End].
type Record struct {
	Kind  string `json:"k"`
	Inst  int    `json:"i,omitempty"`  // the application instance
	ID    int64  `json:"id,omitempty"` // unique per instance: decisions, peeks and resets
	Op    string `json:"op,omitempty"` // the API that made it: allow, wait, acquire, decide, probe
	Start int64  `json:"s"`
	End   int64  `json:"e"`

	// Decisions and peeks.
	Outcome string    `json:"o,omitempty"`
	Allowed bool      `json:"a,omitempty"`
	Rules   []RuleRec `json:"r,omitempty"`
	Err     string    `json:"err,omitempty"`
	// Parts is, on a cluster, how many hash slots the decision's keys
	// live in when more than one: the store decided one part per slot
	// and compensates the parts that committed if another did not.
	Parts int `json:"parts,omitempty"`
	// Deadline is, for a decision whose caller's context had one, when
	// that context ended (µs on the history's clock): a call that ran
	// until it had its compensations sent in the background.
	Deadline int64 `json:"dl,omitempty"`

	// Refunds and releases: the decision (Inst, Ref) they settle, the
	// units per rule given back (refunds), and how it went.
	Ref    int64   `json:"ref,omitempty"`
	Units  []int64 `json:"u,omitempty"`
	Result string  `json:"res,omitempty"`

	// Resets: the keys forgotten, and the hold of their quota blocks (µs;
	// 0 when they have none): another instance may answer from a block it
	// took before the reset until Hold after the reset's end.
	Keys []string `json:"keys,omitempty"`
	Hold int64    `json:"hold,omitempty"`

	// Faults.
	Fault *FaultRec `json:"f,omitempty"`

	// Goroutines: Before (after the world started, before the instances)
	// and After (the instances closed); Phase: what starts at Start.
	Before int    `json:"gb,omitempty"`
	After  int    `json:"ga,omitempty"`
	Phase  string `json:"ph,omitempty"`

	// Runqueue: µs the process's threads spent, summed, ready to run but
	// waiting for a CPU (Linux's schedstat), divided by GOMAXPROCS.
	Wait int64 `json:"wait,omitempty"`
}

// RuleRec is one rule's part of a decision or a peek.
type RuleRec struct {
	Rule      string `json:"n"`
	Key       string `json:"key"`
	Alg       string `json:"alg"`
	Rate      int64  `json:"rate"`
	Period    int64  `json:"per"` // µs
	Burst     int64  `json:"b,omitempty"`
	Cost      int64  `json:"c"`
	Evaluated bool   `json:"ev,omitempty"`
	Allowed   bool   `json:"a,omitempty"`
	Prov      bool   `json:"prov,omitempty"` // Result.Provisional
	Remaining int64  `json:"rem,omitempty"`
	Retry     int64  `json:"retry,omitempty"` // µs
	ResetIn   int64  `json:"reset,omitempty"` // µs: Result.ResetAfter
	Refund    bool   `json:"rf,omitempty"`    // the rule is refundable
	Block     bool   `json:"blk,omitempty"`   // answered from a quota block
	Blocks    bool   `json:"blks,omitempty"`  // the rule takes quota blocks (redlimit.Rule.Blocks)
}

// FaultRec is a world.Event on the history's clock.
type FaultRec struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
	Err    string `json:"err,omitempty"`
	Seq    int    `json:"seq"` // its place in the schedule
	// Killed is set for an instance-crash that killed a worker process
	// (SIGKILL): Inst names it. The records it had not yet written are lost:
	// a release or a refund it made may be missing from the history.
	Killed bool `json:"killed,omitempty"`
	Inst   int  `json:"inst,omitempty"`
	// Slots are, on a cluster, the hash slot ranges the fault can touch
	// (world.Event.Slots); none: every key.
	Slots [][2]int `json:"slots,omitempty"`
	// Observed marks a fault the harness saw but did not inject (a
	// Promotion): not counted among the run's faults.
	Observed bool `json:"observed,omitempty"`
	// Masters is, for a SplitBrain the checker derives from the
	// promotions seen, how many masters more than the run's first set
	// answered at once.
	Masters int `json:"masters,omitempty"`
}

// History is the record of one run, safe for concurrent appends.
type History struct {
	Base int64 // the run's start, Unix µs

	mu      sync.Mutex
	records []Record
}

// NewHistory starts a history whose clock reads 0 at start.
func NewHistory(start time.Time) *History {
	return &History{Base: start.UnixMicro()}
}

// Add appends r.
func (h *History) Add(r Record) {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
}

// Records returns a copy of the records, ordered by Start.
func (h *History) Records() []Record {
	h.mu.Lock()
	rs := slices.Clone(h.records)
	h.mu.Unlock()
	slices.SortStableFunc(rs, func(a, b Record) int { return cmpInt(a.Start, b.Start) })
	return rs
}

// Len returns the number of records.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.records)
}

// WriteJSON writes the history as JSON lines: a first line {"base": µs},
// then one record a line.
func (h *History) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(map[string]int64{"base": h.Base}); err != nil {
		return err
	}
	for _, r := range h.Records() {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadHistory reads what WriteJSON wrote.
func ReadHistory(r io.Reader) (*History, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	h := &History{}
	first := true
	for sc.Scan() {
		if first {
			var b map[string]int64
			if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
				return nil, fmt.Errorf("chaos: history header: %w", err)
			}
			h.Base, first = b["base"], false
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("chaos: history line %d: %w", len(h.records)+2, err)
		}
		h.records = append(h.records, rec)
	}
	return h, sc.Err()
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stallTick is the period of watchStalls's timer, and stallMin the
// lateness it reports.
const (
	stallTick = 5 * time.Millisecond
	stallMin  = 3 * time.Millisecond
)

// watchStalls records, until ctx ends, each time this process was not
// scheduled for a while (a loaded machine, a GC pause): a timer of
// stallTick that fires stallMin late or more. The checker does not count a
// liveness violation a stall explains: the product cannot answer while its
// process does not run.
//
// Every runqueueEvery ticks it also reads how long the process's threads
// have waited on the OS run queue (runqueueWait) and records that wait
// divided by GOMAXPROCS, when it is runqueueMin or more: on a loaded
// machine the process runs, so no timer fires late, but its threads get a
// CPU only in turns, and a call's goroutine may wait for one long after
// its deadline.
func watchStalls(ctx context.Context, inst int, clock func() int64, emit func(Record)) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := clock()
	waited, waitOK := runqueueWait()
	waitAt, ticks := last, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := clock()
		if now-last-stallTick.Microseconds() >= stallMin.Microseconds() {
			emit(Record{Kind: KindStall, Inst: inst, Start: last, End: now})
		}
		last = now
		if ticks++; waitOK && ticks%runqueueEvery == 0 {
			w, ok := runqueueWait()
			// per P: what each of the process's GOMAXPROCS places to
			// run goroutines lost, on average
			if per := (w - waited) / int64(runtime.GOMAXPROCS(0)); ok && per >= runqueueMin.Microseconds() {
				emit(Record{Kind: KindRunqueue, Inst: inst, Start: waitAt, End: now, Wait: per})
			}
			waited, waitAt = w, now
		}
	}
}

// runqueueEvery is how many stallTicks apart watchStalls reads the run
// queue waits, and runqueueMin the least wait it records.
const (
	runqueueEvery = 4
	runqueueMin   = time.Millisecond
)

// runqueueWait returns the µs this process's threads have spent, summed,
// waiting on a run queue for a CPU: the second field of each
// /proc/self/task/*/schedstat (ns). ok is false where there is no such
// file (not Linux, or a kernel without schedstats). A thread that exited
// takes its share with it: the sum can go down, which reads as no wait.
func runqueueWait() (us int64, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			ns += v
			ok = true
		}
	}
	return ns / 1000, ok
}
