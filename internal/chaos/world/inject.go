package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// roleKinds are the faults that kill, stop or promote nodes: one of them
// at a time (ErrBusy).
var roleKinds = map[string]bool{
	Kill: true, KillAOF: true, Pause: true, Failover: true, KillMaster: true,
	Migrate: true, ClockBehind: true, ClockAhead: true,
}

// healFunc undoes one fault.
type healFunc func(ctx context.Context) error

func noHeal(context.Context) error { return nil }

// Inject injects one fault of kind. It draws the target and parameters
// from rng only, in a fixed order, so a seed replays the same choices
// against the same state. On error the returned heal is still usable: it
// undoes whatever part of the fault was put in place. heal waits until
// ev.Start+ev.Hold, undoes the fault, then waits until [World.Healthy]
// (except for a proxy, SCRIPT FLUSH, CLIENT KILL or maxmemory fault healed
// while a role fault is in place: the world is not whole until that one
// heals); it is safe to call more than once (later calls return the
// first's error). The caller sets ev.End when heal returns.
func (w *world) Inject(ctx context.Context, kind string, rng *rand.Rand) (Event, func(context.Context) error, error) {
	ev := Event{Kind: kind, Start: time.Now()}
	if !slices.Contains(w.Kinds(), kind) {
		err := fmt.Errorf("world: fault %q does not apply to topology %s", kind, w.topo)
		ev.Err = err.Error()
		return ev, noHeal, err
	}
	role := roleKinds[kind]
	if role {
		w.mu.Lock()
		busy := w.roleBusy
		w.roleBusy = true
		w.mu.Unlock()
		if busy {
			ev.Err = ErrBusy.Error()
			return ev, noHeal, ErrBusy
		}
	}
	release := func() {
		if role {
			w.mu.Lock()
			w.roleBusy = false
			w.mu.Unlock()
		}
	}
	var shards map[string][][2]int
	if w.topo == Cluster {
		shards = w.shardSlots(ctx)
	}
	heal, err := w.inject(ctx, kind, rng, &ev)
	if heal == nil {
		heal = noHeal
	}
	if ev.Slots == nil {
		ev.Slots = shards[ev.Target]
	}
	if err != nil {
		ev.Err = err.Error()
	}
	var (
		once    sync.Once
		healErr error
	)
	start, hold := ev.Start, ev.Hold
	wrapped := func(ctx context.Context) error {
		once.Do(func() {
			defer release()
			if d := time.Until(start.Add(hold)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			healErr = heal(ctx)
			if !role && w.roleInPlace() {
				return // the world is not whole until that fault heals
			}
			if herr := w.Healthy(ctx); herr != nil {
				healErr = errors.Join(healErr, herr)
			}
		})
		return healErr
	}
	return ev, wrapped, err
}

// roleInPlace reports whether a role fault is in place.
func (w *world) roleInPlace() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.roleBusy
}

// inject puts the fault in place and fills ev's Target, Detail and Hold.
func (w *world) inject(ctx context.Context, kind string, rng *rand.Rand, ev *Event) (healFunc, error) {
	switch kind {
	case Latency, Stall, Drop, Reset:
		return w.injectProxy(kind, rng, ev)
	case Slow:
		return w.injectSlow(ctx, rng, ev)
	case ScriptFlush:
		ev.Target, ev.Detail = "all", "SCRIPT FLUSH on every data node"
		return noHeal, w.eachNode(ctx, func(nc *redis.Client) error { return nc.ScriptFlush(ctx).Err() })
	case ClientKill:
		return w.injectClientKill(ctx, rng, ev)
	case MaxMemory:
		return w.injectMaxMemory(ctx, rng, ev)
	case Kill, KillAOF:
		return w.injectKill(ctx, kind == KillAOF, rng, ev)
	case Pause:
		return w.injectPause(ctx, rng, ev)
	case Failover:
		return w.injectFailover(ctx, rng, ev)
	case KillMaster:
		return w.injectKillMaster(ctx, rng, ev)
	case Migrate:
		return w.injectMigrate(ctx, rng, ev)
	case ClockBehind, ClockAhead:
		return w.injectClock(ctx, kind == ClockAhead, rng, ev)
	}
	return nil, fmt.Errorf("world: fault %q not implemented", kind)
}

// drawHold draws how long a lasting fault is held: in [Hold/4, Hold].
func (w *world) drawHold(rng *rand.Rand) time.Duration {
	lo := w.opts.Hold / 4
	return lo + time.Duration(rng.Int64N(int64(w.opts.Hold-lo)+1))
}

// pick returns one of addrs, sorted first so the same set gives the same
// choice.
func pick(rng *rand.Rand, addrs []string) string {
	addrs = slices.Clone(addrs)
	sort.Strings(addrs)
	return addrs[rng.IntN(len(addrs))]
}

// injectSlow delays the replies of one master (the single node, the
// Sentinel master, a cluster master drawn) by a few ms through its proxy,
// for a hold: the slots it serves are busy. A call spanning slots then
// hears its parts at different times, and the compensation of a part that
// committed (its refund when another part denied) reaches its slot that
// much after the commit; a latency fault does the same with up to
// MaxLatency, which mostly ends such calls by their deadline instead.
func (w *world) injectSlow(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	ev.Target = pick(rng, ms)
	p := w.proxy(ev.Target)
	if p == nil {
		return noHeal, fmt.Errorf("world: no proxy for %s", ev.Target)
	}
	ev.Hold = w.drawHold(rng)
	lo := max(w.opts.SlowLatency/4, time.Millisecond)
	d := (lo + time.Duration(rng.Int64N(int64(w.opts.SlowLatency-lo)+1))).Round(time.Millisecond)
	ev.Detail = fmt.Sprintf("master's replies %v late for %v", d, ev.Hold.Round(time.Millisecond))
	p.addLatency(d)
	return func(context.Context) error {
		p.addLatency(-d)
		return nil
	}, nil
}

// injectProxy adds latency, a stall, or a drop or reset window to the
// proxy of one data node or (one time in four) of every data node.
func (w *world) injectProxy(kind string, rng *rand.Rand, ev *Event) (healFunc, error) {
	var targets []*proxy
	if rng.IntN(4) == 0 {
		ev.Target = "all"
		w.mu.Lock()
		for _, p := range w.proxies {
			targets = append(targets, p)
		}
		w.mu.Unlock()
	} else {
		ev.Target = pick(rng, w.Addrs())
		if p := w.proxy(ev.Target); p != nil {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return noHeal, fmt.Errorf("world: no proxy for %s", ev.Target)
	}
	ev.Hold = w.drawHold(rng)
	switch kind {
	case Latency:
		d := time.Millisecond + time.Duration(rng.Int64N(int64(w.opts.MaxLatency-time.Millisecond)+1))
		d = d.Round(time.Millisecond)
		ev.Detail = fmt.Sprintf("latency %v per reply for %v", d, ev.Hold.Round(time.Millisecond))
		for _, p := range targets {
			p.addLatency(d)
		}
		return func(context.Context) error {
			for _, p := range targets {
				p.addLatency(-d)
			}
			return nil
		}, nil
	case Stall:
		ev.Detail = fmt.Sprintf("stall both ways for %v", ev.Hold.Round(time.Millisecond))
		for _, p := range targets {
			p.stall(ev.Hold)
		}
		return func(context.Context) error {
			for _, p := range targets {
				p.unstall()
			}
			return nil
		}, nil
	}
	// Drop, Reset: a shorter window, every connection ends on its next
	// reply
	ev.Hold /= 4
	closed := 0
	for _, p := range targets {
		closed += p.cut(ev.Hold, kind == Reset)
	}
	how := "closed (FIN)"
	if kind == Reset {
		how = "reset (RST)"
	}
	ev.Detail = fmt.Sprintf("%d connections %s, then for %v every reply cut after half its bytes", closed, how, ev.Hold.Round(time.Millisecond))
	return func(context.Context) error {
		for _, p := range targets {
			p.uncut()
		}
		return nil
	}, nil
}
