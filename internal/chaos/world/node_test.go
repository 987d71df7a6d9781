package world

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestKillPersistence: after kill a single node restarts empty; after
// kill-aof it restarts with the keys written before the fault (the
// append-only file was rewritten when the fault turned it on).
func TestKillPersistence(t *testing.T) {
	requireRedis(t)
	for _, tc := range []struct {
		kind string
		want bool // the key survives
	}{{Kill, false}, {KillAOF, true}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			w := start(t, Single, testOptions())
			c := w.NewClient(ClientOptions{MaxRetries: -1})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			_, heal, err := w.Inject(ctx, tc.kind, rand.New(rand.NewPCG(6, 6)))
			if err != nil {
				t.Fatal(err)
			}
			if err := heal(ctx); err != nil {
				t.Fatal(err)
			}
			var got string
			for range 3 { // the first call may meet the connection the kill ended
				if got, err = c.Get(ctx, "kept").Result(); err == nil || errors.Is(err, redis.Nil) {
					break
				}
			}
			if survived := err == nil && got == "v"; survived != tc.want {
				t.Errorf("GET kept after %s and restart = %q, %v; want survived=%v", tc.kind, got, err, tc.want)
			}
		})
	}
}

// TestAOFWorld: with Options.AOF every data node runs appendonly yes.
func TestAOFWorld(t *testing.T) {
	requireRedis(t)
	topos := []string{Single, Cluster}
	if testing.Short() {
		topos = topos[:1]
	}
	for _, topo := range topos {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			opts := testOptions()
			opts.AOF = true
			w := start(t, topo, opts)
			ctx := context.Background()
			for _, a := range w.Addrs() {
				nc := nodeClient(a)
				got, err := nc.ConfigGet(ctx, "appendonly").Result()
				nc.Close()
				if err != nil || got["appendonly"] != "yes" {
					t.Errorf("%s: CONFIG GET appendonly = %v, %v; want yes", a, got, err)
				}
			}
		})
	}
}
