package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestSentinel drives the Redis backend through a failover client
// (redis.NewFailoverClient) while the master fails over under traffic, and
// measures the error blip and the units the failover forgets. One sentinel
// with quorum 1 keeps the setup fast: SENTINEL FAILOVER needs no
// agreement, and a single sentinel also decides alone when the master dies.
//
// SENTINEL FAILOVER promotes the replica without pausing the old master: a
// client keeps writing to the old master until the sentinel announces the
// new one (+switch-master), and those writes are lost when the old master
// is made a replica. No call fails, but the units allowed during the
// switch may be forgotten: that window is the tolerance. When the master
// dies instead, calls fail until the sentinel has noticed
// (down-after-milliseconds) and failed over, and only the replication lag
// can be forgotten.
func TestSentinel(t *testing.T) {
	redistest.Require(t)
	t.Parallel()
	t.Run("SENTINEL FAILOVER", func(t *testing.T) {
		forgotten, window := sentinelFailover(t, func(st *redistest.Sentinel) {
			if _, err := st.Failover(context.Background(), 30*time.Second); err != nil {
				t.Error(err)
			}
		})
		if forgotten > window {
			t.Errorf("the failover forgot %d units; only the %d allowed while it ran may be", forgotten, window)
		}
	})
	t.Run("master killed", func(t *testing.T) {
		forgotten, _ := sentinelFailover(t, func(st *redistest.Sentinel) { st.Master.Stop() })
		if forgotten > 50 {
			t.Errorf("the failover forgot %d units, tolerance 50", forgotten)
		}
	})
}

// sentinelFailover runs traffic through a failover that fail starts, and
// returns the units forgotten and the units allowed while the failover ran
// (until the sentinel names the new master, plus 200 ms for the client to
// hear of it).
func sentinelFailover(t *testing.T, fail func(*redistest.Sentinel)) (forgotten, window int64) {
	start := time.Now()
	st, err := redistest.StartSentinel(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	t.Logf("master, replica and sentinel up in %v", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	client := st.Client(t)
	b, _ := redisstore.New(client, redisstore.Config{Now: midHour()})
	prefix := redistest.Prefix(t)

	counter := prefix + "{counter}"
	tr := startTraffic(b, []algorithms.Check{{Key: counter, Algorithm: algorithms.FixedWindow, Limit: counterLimit}}, 8)
	time.Sleep(200 * time.Millisecond)
	failedAt := time.Now()
	before := tr.allowed.Load()
	old := st.Master.Addr
	fail(st)
	var newMaster string
	for {
		if addr, err := st.MasterAddr(ctx); err == nil && addr != old {
			newMaster = addr
			break
		}
		if time.Since(failedAt) > 10*time.Second {
			tr.Stop()
			t.Fatal("no new master after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	switched := time.Since(failedAt)
	time.Sleep(200 * time.Millisecond)
	window = tr.allowed.Load() - before
	time.Sleep(300 * time.Millisecond)
	tr.Stop()

	blip, sample := tr.outage(failedAt)
	allowed := tr.allowed.Load()
	forgotten = allowed - charged(t, b, counter)
	t.Logf("the sentinel named the new master %v after the fault; calls: %d allowed (%d during the failover), %d failed, the last %v after it began (%v); units forgotten: %d",
		switched.Round(time.Millisecond), allowed, window, tr.failed.Load(), blip.Round(time.Millisecond), sample, forgotten)
	if blip > 5*time.Second {
		t.Errorf("calls failed for %v after the failover began", blip)
	}

	// After the failover the limiter limits exactly, on the new master.
	tight := []algorithms.Check{{Key: prefix + "{tight}", Algorithm: algorithms.SlidingLog, Limit: algorithms.PerHour(10)}}
	res := make([]algorithms.Result, 1)
	n := 0
	for range 20 {
		if err := b.Allow(ctx, tight, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("after the failover: %d of 20 allowed under a limit of 10", n)
	}
	nm := redis.NewClient(&redis.Options{Addr: newMaster})
	defer nm.Close()
	if n, err := nm.Exists(ctx, tight[0].Key).Result(); err != nil || n != 1 {
		t.Fatalf("the key is not on the new master %s: EXISTS = %d, %v", newMaster, n, err)
	}
	return forgotten, window
}
