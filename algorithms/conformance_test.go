package algorithms_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var printVectors = flag.Bool("vectors.print", false, "print what the memory backend answers for every vector step (to review new vectors)")

// harness is a backend under test with a settable clock. advance is called
// with the new time before each step so that stores with their own notion
// of expiry (miniredis) expire keys on the vectors' clock.
type harness struct {
	backend algorithms.Backend
	clock   *clock
	advance func(to time.Time)
	prefix  string
}

type backendKind struct {
	name string
	new  func(t *testing.T) *harness
}

func backendKinds() []backendKind {
	return []backendKind{
		{"memory", func(t *testing.T) *harness {
			c := &clock{now: t0}
			m, err := algorithms.NewMemory(algorithms.MemoryConfig{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			return &harness{backend: m, clock: c, advance: func(time.Time) {}}
		}},
		{"miniredis", func(t *testing.T) *harness {
			mr := miniredis.RunT(t)
			mr.SetTime(t0)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
			t.Cleanup(func() { client.Close() })
			c := &clock{now: t0}
			b, err := algorithms.NewRedis(client, algorithms.RedisConfig{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			last := t0
			return &harness{backend: b, clock: c, advance: func(to time.Time) {
				if to.After(last) {
					mr.FastForward(to.Sub(last)) // expire keys by their TTL
					last = to
				}
				mr.SetTime(to)
			}}
		}},
		{"redis", func(t *testing.T) *harness {
			srv := redistest.Require(t)
			c := &clock{now: t0}
			// persisting: the vectors run on their own clock, so the server's
			// clock must not expire keys between steps (a 1ms TTL near a
			// window's end would, on a loaded machine).
			b, err := algorithms.NewRedis(persisting{srv.Client(t)}, algorithms.RedisConfig{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			return &harness{backend: b, clock: c, advance: func(time.Time) {}, prefix: redistest.Prefix(t)}
		}},
	}
}

// TestConformance plays every vector in testdata/vectors against every
// backend: memory, miniredis and a real redis-server must answer alike.
func TestConformance(t *testing.T) {
	scenarios := loadVectors(t)
	for _, kind := range backendKinds() {
		t.Run(kind.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.file+"/"+sc.name, func(t *testing.T) {
					h := kind.new(t)
					playScenario(t, h, sc)
				})
			}
		})
	}
}

func playScenario(t *testing.T, h *harness, sc *scenario) {
	t.Helper()
	ctx := context.Background()
	var printed strings.Builder
	for _, st := range sc.steps {
		now := t0.Add(st.at)
		h.clock.now = now
		h.advance(now)
		checks := make([]algorithms.Check, len(st.checks))
		for i, c := range st.checks {
			l := sc.limits[c.limit]
			key := h.prefix + "v:" + c.limit + ":{" + c.key + "}"
			if sc.shared {
				key = h.prefix + "v:{" + c.key + "}"
			}
			checks[i] = algorithms.Check{
				Key:       key,
				Algorithm: l.alg,
				Limit:     l.limit,
				Cost:      c.cost,
			}
		}
		got := make([]algorithms.Result, len(checks))
		if err := h.backend.Allow(ctx, checks, got); err != nil {
			t.Fatalf("line %d: %s: Allow: %v", st.line, st.text, err)
		}
		if *printVectors {
			var parts []string
			for _, r := range got {
				parts = append(parts, formatResult(r))
			}
			arrow := strings.Index(st.text, "->")
			fmt.Fprintf(&printed, "%-40s -> %s\n", strings.TrimSpace(st.text[:arrow]), strings.Join(parts, " | "))
			continue
		}
		for i := range got {
			if got[i] != st.want[i] {
				t.Errorf("line %d: %s\n  check %d: Allow(%s, t0+%v) = %s, want %s",
					st.line, st.text, i, checks[i].Key, st.at, formatResult(got[i]), formatResult(st.want[i]))
			}
		}
	}
	if *printVectors {
		t.Logf("scenario %s\n%s", sc.name, printed.String())
	}
}
