package world_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// A scheduler starts a world, gives each application instance a client
// through the fault proxies, and injects faults drawn from its seed. (It
// needs redis-server, so it has no Output to check.)
func Example() {
	ctx := context.Background()
	w, err := world.Start(ctx, world.Sentinel, world.Options{PauseFor: 300 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	client := w.NewClient(world.ClientOptions{PoolSize: 16, MaxRetries: -1})
	defer client.Close()

	rng := rand.New(rand.NewPCG(42, 0))
	kinds := w.Kinds()
	ev, heal, err := w.Inject(ctx, kinds[rng.IntN(len(kinds))], rng)
	fmt.Println(ev.Kind, ev.Target, ev.Detail, err)
	// ... the workload runs through client while the fault is in place ...
	if err := heal(ctx); err != nil {
		fmt.Println("heal:", err)
	}
	ev.End = time.Now()
}
