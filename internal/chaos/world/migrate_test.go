package world

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestMigrateUnderLoad: keys incremented through a cluster client while
// their slots migrate end with exactly the increments acknowledged, the
// slots end on the destination, and the destination saw ASKING.
func TestMigrateUnderLoad(t *testing.T) {
	requireRedis(t)
	t.Parallel()
	opts := testOptions()
	opts.Hold = time.Second
	w := start(t, Cluster, opts)
	writeKeys(t, w, migrateKeys)
	c := w.NewClient(ClientOptions{MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	acked := map[string]int64{}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		errs := 0
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- errs
				return
			default:
			}
			k := migrateKeys[i%len(migrateKeys)]
			if err := c.Incr(ctx, k).Err(); err != nil {
				errs++
				continue
			}
			acked[k]++
		}
	}()
	time.Sleep(100 * time.Millisecond)
	ev, heal, err := w.Inject(ctx, Migrate, rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		heal(ctx)
		t.Fatalf("Inject(migrate) = %+v, %v", ev, err)
	}
	t.Log(ev.Detail)
	time.Sleep(ev.Hold)
	if err := heal(ctx); err != nil {
		t.Fatalf("heal = %v", err)
	}
	close(stop)
	errs := <-done
	t.Logf("%d increments refused (TRYAGAIN while a slot's keys are split)", errs)
	for _, k := range migrateKeys {
		got, err := c.Get(ctx, k).Int64()
		if err != nil || got != acked[k] {
			t.Errorf("GET %s = %d, %v; want %d (increments acknowledged)", k, got, err, acked[k])
		}
	}
	asked := 0
	for _, a := range w.Addrs() {
		stats, err := info(ctx, a, "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		if infoField(stats, "cmdstat_asking") != "" {
			asked++
		}
	}
	if asked == 0 {
		t.Error("no node saw ASKING: no client was redirected during the migration")
	}
}
