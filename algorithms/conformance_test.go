package algorithms_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var printVectors = flag.Bool("vectors.print", false, "print what the memory backend answers for every vector step (to review new vectors)")

type backendKind struct {
	name string
	new  func(t *testing.T) *backendtest.Harness
}

func backendKinds() []backendKind {
	return []backendKind{
		{"memory", func(t *testing.T) *backendtest.Harness {
			c := &backendtest.Clock{T: backendtest.T0}
			m, err := memstore.New(memstore.Config{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			return &backendtest.Harness{Backend: m, Clock: c}
		}},
		{"miniredis", func(t *testing.T) *backendtest.Harness {
			mr := miniredis.RunT(t)
			mr.SetTime(backendtest.T0)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
			t.Cleanup(func() { client.Close() })
			c := &backendtest.Clock{T: backendtest.T0}
			b, err := redisstore.New(client, redisstore.Config{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			last := backendtest.T0
			return &backendtest.Harness{Backend: b, Clock: c, Advance: func(to time.Time) {
				if to.After(last) {
					mr.FastForward(to.Sub(last)) // expire keys by their TTL
					last = to
				}
				mr.SetTime(to)
			}}
		}},
		{"redis", func(t *testing.T) *backendtest.Harness {
			srv := redistest.Require(t)
			c := &backendtest.Clock{T: backendtest.T0}
			// persisting: the vectors run on their own clock, so the server's
			// clock must not expire keys between steps (a 1ms TTL near a
			// window's end would, on a loaded machine).
			b, err := redisstore.New(backendtest.Persisting{Client: srv.Client(t)}, redisstore.Config{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			return &backendtest.Harness{Backend: b, Clock: c, Prefix: redistest.Prefix(t)}
		}},
	}
}

// TestConformance plays every vector in testdata/vectors against every
// backend: memory, miniredis and a real redis-server must answer alike.
func TestConformance(t *testing.T) {
	scenarios := backendtest.LoadVectors(t)
	for _, kind := range backendKinds() {
		t.Run(kind.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.File+"/"+sc.Name, func(t *testing.T) {
					h := kind.new(t)
					backendtest.Play(t, h, sc, *printVectors)
				})
			}
		})
	}
}
