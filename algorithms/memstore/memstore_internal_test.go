package memstore

import (
	"context"
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

var memT0 = time.Unix(19676*86400, 0)

type memClock struct{ now time.Time }

func (c *memClock) Now() time.Time { return c.now }

// visited returns how many entries m's shards have examined to admit new
// keys so far.
func (m *Store) visited() int64 {
	var n int64
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.visited
		sh.mu.Unlock()
	}
	return n
}

// TestMemoryAdmitBounded: admitting a new key examines at most
// memorySweepStep+memorySample entries, below the cap, at the cap, and
// while expired keys are being swept, whatever the number of keys held.
func TestMemoryAdmitBounded(t *testing.T) {
	t.Parallel()
	const perShard = 512
	const bound = memorySweepStep + memorySample
	c := &memClock{now: memT0}
	m, err := New(Config{Now: c.Now, MaxKeys: memoryShards * perShard})
	if err != nil {
		t.Fatal(err)
	}
	res := make([]algorithms.Result, 1)
	phases := []struct {
		name  string
		keys  int
		limit algorithms.Limit
		step  time.Duration // clock step per key
	}{
		{"filling", memoryShards * perShard, algorithms.PerHour(10), time.Millisecond},
		{"full", memoryShards * perShard / 4, algorithms.PerHour(10), time.Millisecond},
		{"full of expired keys", memoryShards * perShard / 4, algorithms.PerSecond(10), 3 * time.Hour},
	}
	n := 0
	for _, ph := range phases {
		worst := int64(0)
		for range ph.keys {
			n++
			c.now = c.now.Add(ph.step)
			check := algorithms.Check{Key: "k" + strconv.Itoa(n), Algorithm: algorithms.GCRA, Limit: ph.limit}
			before := m.visited()
			if err := m.Allow(context.Background(), []algorithms.Check{check}, res); err != nil || !res[0].Allowed {
				t.Fatalf("%s: Allow(%q) = %+v, %v; want allowed", ph.name, check.Key, res[0], err)
			}
			v := m.visited() - before
			if v > bound {
				t.Fatalf("%s: Allow(%q) with %d keys held examined %d entries, want <= %d", ph.name, check.Key, m.Len(), v, bound)
			}
			worst = max(worst, v)
		}
		t.Logf("%s: at most %d entries examined per new key, %d keys held", ph.name, worst, m.Len())
	}
}

// keysInShard returns n keys with the given prefix that m puts in shard i.
func keysInShard(m *Store, i int, prefix string, n int) []string {
	var keys []string
	for j := 0; len(keys) < n; j++ {
		k := prefix + strconv.Itoa(j)
		if maphash.String(m.seed, k)%memoryShards == uint64(i) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestMemoryEviction: at the cap, a new key evicts an expired key first,
// else the live key that would expire soonest (the one closest to full
// capacity), and never a key of its own call; an evicted key starts again
// at full capacity.
func TestMemoryEviction(t *testing.T) {
	t.Parallel()
	const perShard = memorySample // every entry of the shard is sampled
	long, short := algorithms.PerHour(1), algorithms.PerMinute(1)
	cases := []struct {
		name    string
		limits  []algorithms.Limit // of the keys filling the shard, allowed once each
		advance time.Duration
		call    []int // indexes of filling keys checked with the new key
		evicted int   // index of the key expected gone
	}{
		{"soonest expiring", []algorithms.Limit{long, long, long, short, long, long, long, long}, 0, nil, 3},
		{"expired first", []algorithms.Limit{long, long, short, long, long, long, long, algorithms.PerHour(2)}, 2 * time.Minute, nil, 2},
		{"not a key of the call", []algorithms.Limit{long, short, long, long, long, long, long, algorithms.PerHour(2)}, 0, []int{1}, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &memClock{now: memT0}
			m, err := New(Config{Now: c.Now, MaxKeys: memoryShards * perShard})
			if err != nil {
				t.Fatal(err)
			}
			keys := keysInShard(m, 5, "fill", len(tc.limits)+1)
			res := make([]algorithms.Result, len(tc.call)+1)
			for i, l := range tc.limits {
				c.now = c.now.Add(time.Millisecond)
				if err := m.Allow(context.Background(), []algorithms.Check{{Key: keys[i], Algorithm: algorithms.GCRA, Limit: l}}, res); err != nil || !res[0].Allowed {
					t.Fatalf("Allow(%q) = %+v, %v", keys[i], res[0], err)
				}
			}
			c.now = c.now.Add(tc.advance)
			call := []algorithms.Check{{Key: keys[len(tc.limits)], Algorithm: algorithms.GCRA, Limit: long}}
			for _, i := range tc.call {
				call = append(call, algorithms.Check{Key: keys[i], Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(2)})
			}
			if err := m.Allow(context.Background(), call, res); err != nil || !res[0].Allowed {
				t.Fatalf("Allow(%v) = %+v, %v", call, res, err)
			}
			sh := &m.shards[5]
			for i := range tc.limits {
				held := sh.lookup(maphash.String(m.seed, keys[i]), keys[i]) != nil
				if held == (i == tc.evicted) {
					t.Errorf("after Allow(%q): key %d (%q) held = %v, want %v", call[0].Key, i, keys[i], held, i != tc.evicted)
				}
			}
			// The evicted key is back to full capacity: all of it, then denied.
			k := algorithms.Check{Key: keys[tc.evicted], Algorithm: algorithms.GCRA, Limit: tc.limits[tc.evicted]}
			capacity := k.Limit.Capacity(algorithms.GCRA)
			for i := range capacity + 1 {
				want := i < capacity
				if err := m.Allow(context.Background(), []algorithms.Check{k}, res); err != nil || res[0].Allowed != want {
					t.Fatalf("Allow(%q) #%d after eviction = %+v, %v; want Allowed %v", k.Key, i+1, res[0], err, want)
				}
			}
		})
	}
}
