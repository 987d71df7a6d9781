package admin

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// check verifies the summary's structure: slots sorted by count, buckets
// covering runs of equal counts, the table finding every key.
func (s *summary) check(t *testing.T) {
	t.Helper()
	k := len(s.keys)
	for i := 1; i < k; i++ {
		if s.count[i-1] > s.count[i] {
			t.Fatalf("count[%d]=%d > count[%d]=%d: not sorted", i-1, s.count[i-1], i, s.count[i])
		}
	}
	for i := range k {
		b := s.bucket[i]
		if s.bLo[b] > int32(i) || s.bHi[b] < int32(i) || s.bCount[b] != s.count[i] {
			t.Fatalf("slot %d (count %d) in bucket %d [%d,%d] count %d", i, s.count[i], b, s.bLo[b], s.bHi[b], s.bCount[b])
		}
		if i > 0 && s.count[i-1] == s.count[i] && s.bucket[i-1] != b {
			t.Fatalf("slots %d and %d have count %d in two buckets", i-1, i, s.count[i])
		}
		if s.keys[i] == "" {
			if s.tpos[i] != -1 {
				t.Fatalf("empty slot %d in the table", i)
			}
			continue
		}
		if s.table[s.tpos[i]] != int32(i)+1 {
			t.Fatalf("slot %d (%q): table[%d] = %d", i, s.keys[i], s.tpos[i], s.table[s.tpos[i]])
		}
	}
	n := 0
	for _, v := range s.table {
		if v != 0 {
			n++
		}
	}
	keys := 0
	for _, key := range s.keys {
		if key != "" {
			keys++
		}
	}
	if n != keys {
		t.Fatalf("table holds %d entries for %d keys", n, keys)
	}
}

// TestSummaryBounds plays a skewed stream and checks Space-Saving's
// guarantees against exact counts: every tracked key's count is between
// its true count and its true count plus its error, and every key seen
// more than n/k times is tracked.
func TestSummaryBounds(t *testing.T) {
	const k, n = 16, 20000
	rng := rand.New(rand.NewPCG(1, 2))
	s := newSummary(k, maphash.MakeSeed())
	exact := map[string]uint64{}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.3, 1, 500)
	for i := range n {
		key := "k" + strconv.FormatUint(zipf.Uint64(), 10)
		if rng.IntN(10) == 0 {
			key = "rare" + strconv.Itoa(i) // a long tail of one-offs
		}
		exact[key]++
		s.add(key)
		if i%997 == 0 {
			s.check(t)
		}
	}
	s.check(t)
	tracked := map[string]bool{}
	var sum uint64
	for _, e := range s.top(nil) {
		tracked[e.Key] = true
		sum += e.Count
		if e.Count < exact[e.Key] || e.Count-e.Err > exact[e.Key] {
			t.Errorf("%s: count %d err %d, true count %d", e.Key, e.Count, e.Err, exact[e.Key])
		}
	}
	if sum != n {
		t.Errorf("counts sum to %d, want %d", sum, n)
	}
	for key, c := range exact {
		if c > n/k && !tracked[key] {
			t.Errorf("%s seen %d times (> n/k = %d) is not tracked", key, c, n/k)
		}
	}
	if top := s.top(nil); top[0].Key != "k0" {
		t.Errorf("top key %q, want k0", top[0].Key)
	}
}

// TestSummaryExactWhenSmall: with fewer keys than slots, counts are exact.
func TestSummaryExactWhenSmall(t *testing.T) {
	s := newSummary(8, maphash.MakeSeed())
	for i := range 5 {
		for range i + 1 {
			s.add("key" + strconv.Itoa(i))
		}
	}
	s.check(t)
	got := s.top(nil)
	want := []entry{{"key4", 5, 0}, {"key3", 4, 0}, {"key2", 3, 0}, {"key1", 2, 0}, {"key0", 1, 0}}
	if len(got) != len(want) {
		t.Fatalf("top = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("top = %v, want %v", got, want)
		}
	}
	s.clear()
	s.check(t)
	if got := s.top(nil); len(got) != 0 {
		t.Fatalf("after clear: %v", got)
	}
}

// TestHeavyGenerations: the top sums the current and previous generation
// and forgets what is older.
func TestHeavyGenerations(t *testing.T) {
	h := newHeavy(4, maphash.MakeSeed())
	h.add("a")
	h.add("a")
	h.rotate()
	h.add("a")
	h.add("b")
	top := func() []entry {
		e, _ := mergeEntries(h.entries(nil), func(k string) string { return k }, 10)
		return e
	}
	if got := top(); len(got) != 2 || got[0] != (entry{"a", 3, 0}) || got[1] != (entry{"b", 1, 0}) {
		t.Fatalf("top = %v", got)
	}
	h.rotate()
	if got := top(); len(got) != 2 || got[0] != (entry{"a", 1, 0}) {
		t.Fatalf("after a rotation: %v", got)
	}
	h.rotate()
	if got := top(); len(got) != 0 {
		t.Fatalf("after two rotations: %v", got)
	}
}

func TestSummaryAllocs(t *testing.T) {
	s := newSummary(64, maphash.MakeSeed())
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = "rate:ip:gcra:{192.0.2." + strconv.Itoa(i) + "}"
	}
	i := 0
	if a := testing.AllocsPerRun(10000, func() { s.add(keys[i%len(keys)]); i += 7 }); a != 0 {
		t.Fatalf("%v allocations per add, want 0", a)
	}
	s.check(t)
}

func BenchmarkSummaryAdd(b *testing.B) {
	s := newSummary(64, maphash.MakeSeed())
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "rate:ip:gcra:{192.0.2." + strconv.Itoa(i) + "}"
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, uint64(len(keys)-1))
	order := make([]int, 4096)
	for i := range order {
		order[i] = int(zipf.Uint64())
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.add(keys[order[i&4095]])
		i++
	}
}

func BenchmarkSummaryAddSame(b *testing.B) {
	s := newSummary(64, maphash.MakeSeed())
	key := "rate:ip:gcra:{192.0.2.1}"
	b.ReportAllocs()
	for b.Loop() {
		s.add(key)
	}
}

func BenchmarkHeavyAddSame(b *testing.B) {
	h := newHeavy(64, maphash.MakeSeed())
	key := "rate:ip:gcra:{192.0.2.1}"
	b.ReportAllocs()
	for b.Loop() {
		h.add(key)
	}
}

// TestHeavySampling: past sampleLimit occurrences a generation samples;
// the estimates of the heavy keys stay close, and the structure sound.
func TestHeavySampling(t *testing.T) {
	h := newHeavy(64, maphash.MakeSeed())
	exact := map[string]uint64{}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.2, 1, 5000)
	const n = 2_000_000
	for range n {
		k := "k" + strconv.FormatUint(zipf.Uint64(), 10)
		exact[k]++
		h.add(k)
	}
	h.cur.check(t)
	if s := h.shift.Load(); s < 5 {
		t.Fatalf("shift %d after %d adds, want >= 5", s, n)
	}
	// The three heaviest keys hold thousands of samples each: their
	// estimates are within a few percent (15% is over 4 standard
	// deviations).
	top, _ := mergeEntries(h.entries(nil), func(k string) string { return k }, 3)
	for _, e := range top {
		got, want := float64(e.Count), float64(exact[e.Key])
		if got < 0.85*want || got > 1.15*want+float64(e.Err) {
			t.Errorf("%s: estimate %v (err %d), true %v", e.Key, got, e.Err, want)
		}
	}
	if top[0].Key != "k0" || top[1].Key != "k1" {
		t.Errorf("top = %v, want k0, k1 first", top)
	}
}

func TestSummaryHalve(t *testing.T) {
	s := newSummary(8, maphash.MakeSeed())
	for i, n := range []int{1, 1, 2, 3, 5, 8} {
		for range n {
			s.add("key" + strconv.Itoa(i))
		}
	}
	s.halve()
	s.check(t)
	got := s.top(nil)
	want := []entry{{"key5", 8, 0}, {"key4", 4, 0}, {"key3", 2, 0}, {"key2", 2, 0}}
	if len(got) != len(want) {
		t.Fatalf("after halve: %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Count != want[i].Count {
			t.Fatalf("after halve: %v, want %v", got, want)
		}
	}
	for range 20 {
		s.add("new")
	}
	s.check(t)
}
