package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// migrateBatch is how many keys one MIGRATE moves, and migratePace the
// pause between two batches while the fault is held: the slots stay
// half-moved (clients meet ASK redirections) for as long as the keys
// take.
const (
	migrateBatch = 10
	migratePace  = 10 * time.Millisecond
)

// injectMigrate moves up to Options.MigrateSlots slots holding live keys
// from one master to another under load, as redis-cli --cluster reshard
// does: CLUSTER SETSLOT IMPORTING on the destination, MIGRATING on the
// source, then MIGRATE of the keys in batches in the background (a client
// asking for a key already moved is sent to the destination with ASK).
// heal moves the keys left and assigns the slots to the destination
// (SETSLOT NODE on the destination, the source, then every other master).
func (w *world) injectMigrate(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	owners, err := w.slotOwners(ctx)
	if err != nil {
		return nil, err
	}
	bySrc := map[string][]int{} // master → candidate slots it serves
	for _, slot := range w.liveSlots(ctx, owners) {
		if o := owners[slot]; o != "" && !slices.Contains(bySrc[o], slot) {
			bySrc[o] = append(bySrc[o], slot)
		}
	}
	if len(bySrc) == 0 {
		return nil, errors.New("world: no slot to migrate")
	}
	var srcs []string
	for a := range bySrc {
		srcs = append(srcs, a)
	}
	src := pick(rng, srcs)
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	var dsts []string
	for _, m := range ms {
		if m != src {
			dsts = append(dsts, m)
		}
	}
	if len(dsts) == 0 {
		return nil, errors.New("world: no master to migrate to")
	}
	dst := pick(rng, dsts)
	slots := bySrc[src]
	sort.Ints(slots)
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	slots = slots[:min(len(slots), w.opts.MigrateSlots)]
	sort.Ints(slots)
	ev.Target = src
	ev.Hold = w.drawHold(rng)
	for _, slot := range slots {
		ev.Slots = append(ev.Slots, [2]int{slot, slot})
	}

	sc, dc := nodeClient(src), nodeClient(dst)
	srcID, err := sc.ClusterMyID(ctx).Result()
	var dstID string
	if err == nil {
		dstID, err = dc.ClusterMyID(ctx).Result()
	}
	if err != nil {
		sc.Close()
		dc.Close()
		return nil, err
	}
	m := &migration{w: w, src: src, dst: dst, srcID: srcID, dstID: dstID, slots: slots, sc: sc, dc: dc}
	keys := 0
	for _, slot := range slots {
		n, _ := sc.ClusterCountKeysInSlot(ctx, slot).Result()
		keys += int(n)
	}
	ev.Detail = fmt.Sprintf("slots %s (%d keys) %s → %s", slotList(slots), keys, src, dst)
	for _, slot := range slots {
		if err := dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
			return m.heal, fmt.Errorf("world: SETSLOT %d IMPORTING on %s: %w", slot, dst, err)
		}
		if err := sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
			return m.heal, fmt.Errorf("world: SETSLOT %d MIGRATING on %s: %w", slot, src, err)
		}
	}
	m.stop = make(chan struct{})
	m.done = make(chan struct{})
	go m.move()
	return m.heal, nil
}

// liveSlots returns the slots of Options.MigrateKeys, or without them the
// slots of keys a SCAN of each master finds, sorted.
func (w *world) liveSlots(ctx context.Context, owners []string) []int {
	keys := w.opts.MigrateKeys
	if len(keys) == 0 {
		seen := map[string]bool{}
		for _, o := range owners {
			if o == "" || seen[o] {
				continue
			}
			seen[o] = true
			nc := nodeClient(o)
			found, _, _ := nc.Scan(ctx, 0, "*", 1000).Result()
			nc.Close()
			for _, k := range found {
				if !strings.HasPrefix(k, healthKey) && !strings.HasPrefix(k, fenceKey) {
					keys = append(keys, k)
				}
			}
		}
	}
	var slots []int
	for _, k := range keys {
		slots = append(slots, keySlot(k))
	}
	sort.Ints(slots)
	return slices.Compact(slots)
}

// slotList writes slots as "1,5,9".
func slotList(slots []int) string {
	s := make([]string, len(slots))
	for i, v := range slots {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

// migration is one migrate fault in progress.
type migration struct {
	w            *world
	src, dst     string
	srcID, dstID string
	slots        []int
	sc, dc       *redis.Client
	stop, done   chan struct{}
	once         sync.Once
	moveErr      error // the background mover's, read after done
}

// move migrates the keys of the slots in batches, pausing between them,
// until they are all moved or stop is closed.
func (m *migration) move() {
	defer close(m.done)
	ctx := context.Background()
	for _, slot := range m.slots {
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(migratePace):
			}
			n, err := m.moveBatch(ctx, slot)
			if err != nil {
				m.moveErr = err
				return
			}
			if n == 0 {
				break
			}
		}
	}
}

// moveBatch migrates up to migrateBatch keys of slot and returns how many.
func (m *migration) moveBatch(ctx context.Context, slot int) (int, error) {
	keys, err := m.sc.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	args := []any{"MIGRATE", "127.0.0.1", port(m.dst), "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.sc.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("world: MIGRATE slot %d %s → %s: %w", slot, m.src, m.dst, err)
	}
	return len(keys), nil
}

// heal stops the background mover, moves the keys left, and assigns the
// slots to the destination.
func (m *migration) heal(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		defer m.sc.Close()
		defer m.dc.Close()
		if m.stop != nil {
			close(m.stop)
			<-m.done
			err = m.moveErr
		}
		for _, slot := range m.slots {
			for ctx.Err() == nil {
				n, berr := m.moveBatch(ctx, slot)
				if berr != nil {
					err = errors.Join(err, berr)
					break
				}
				if n == 0 {
					break
				}
			}
		}
		ms, merr := m.w.masters(ctx)
		if merr != nil {
			err = errors.Join(err, merr)
		}
		order := []string{m.dst, m.src}
		for _, a := range ms {
			if a != m.dst && a != m.src {
				order = append(order, a)
			}
		}
		for _, a := range order {
			nc := nodeClient(a)
			for _, slot := range m.slots {
				if serr := nc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", m.dstID).Err(); serr != nil {
					err = errors.Join(err, fmt.Errorf("world: SETSLOT %d NODE on %s: %w", slot, a, serr))
				}
			}
			nc.Close()
		}
	})
	return err
}
