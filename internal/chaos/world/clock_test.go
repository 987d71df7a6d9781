package world

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

// checkOffset fails t unless the TIME of the node at addr is off the local
// clock by offset, within 5ms (plus the round trip).
func checkOffset(t *testing.T, addr string, offset time.Duration) {
	t.Helper()
	nc := nodeClient(addr)
	defer nc.Close()
	ctx := context.Background()
	for range 3 {
		before := time.Now()
		got, err := nc.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		const slack = 5 * time.Millisecond
		if lo, hi := before.Add(offset-slack), after.Add(offset+slack); got.Before(lo) || got.After(hi) {
			t.Errorf("TIME on %s = %v, want within [%v, %v] (offset %v)", addr, got.Format(time.StampMicro), lo.Format(time.StampMicro), hi.Format(time.StampMicro), offset)
		}
	}
}

// TestFaketimeOffset: a node started with FaketimeEnv answers TIME off the
// local clock by the offset, within 5ms, behind and ahead.
func TestFaketimeOffset(t *testing.T) {
	requireRedis(t)
	for _, offset := range []time.Duration{-3 * time.Second, 1500 * time.Millisecond} {
		t.Run(offset.String(), func(t *testing.T) {
			t.Parallel()
			env, err := FaketimeEnv(offset)
			if err != nil {
				if redistest.InCI() {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			s, err := redistest.StartEnv(env)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			checkOffset(t, s.Addr, offset)
		})
	}
}

// TestClockFault: a clock fault makes the skewed node master (its TIME off
// by the skew drawn), and heal gives the master role back to the original
// node and removes the skewed one.
func TestClockFault(t *testing.T) {
	requireRedis(t)
	if testing.Short() {
		t.Skip("TestFaults injects the clock faults and checks the skew in -short")
	}
	for _, topo := range []string{Sentinel, Cluster} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			if _, err := FaketimeEnv(0); err != nil && !redistest.InCI() {
				t.Skip(err)
			}
			w := start(t, topo, testOptions())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ev, heal, err := w.Inject(ctx, ClockBehind, rand.New(rand.NewPCG(4, 4)))
			if err != nil {
				heal(ctx)
				t.Fatalf("Inject(%s) = %+v, %v", ClockBehind, ev, err)
			}
			t.Log(ev.Detail)
			if len(w.extra) != 1 {
				t.Fatalf("%d nodes started on demand, want 1", len(w.extra))
			}
			var skewed string
			for a := range w.extra {
				skewed = a
			}
			if role, err := roleOf(ctx, skewed); err != nil || role != "master" {
				t.Errorf("skewed node %s: role %q, %v; want master", skewed, role, err)
			}
			checkOffset(t, skewed, -2*time.Second)
			if topo == Sentinel {
				if m, err := w.sent.MasterAddr(ctx); err != nil || m != skewed {
					t.Errorf("sentinel names master %s, %v; want the skewed %s", m, err, skewed)
				}
			}
			serves(t, w)
			if err := heal(ctx); err != nil {
				t.Fatalf("heal = %v", err)
			}
			if len(w.extra) != 0 || w.proxy(skewed) != nil {
				t.Errorf("after heal: %d nodes started on demand remain", len(w.extra))
			}
			if role, err := roleOf(ctx, ev.Target); err != nil || role != "master" {
				t.Errorf("original master %s after heal: role %q, %v; want master", ev.Target, role, err)
			}
			serves(t, w)
		})
	}
}
