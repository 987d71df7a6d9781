package rueidisclient_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient"
	"github.com/redlimit/redlimit/internal/chaos"
	"github.com/redlimit/redlimit/internal/redistest"
)

// onRueidis is chaos.Options.StoreClient for a single node: a rueidis
// client of the node that c (the world's go-redis client) reaches, dialled
// through the same proxy, so that connection faults hit it too.
func onRueidis(c redis.UniversalClient) (redis.Scripter, func(), error) {
	gc, ok := c.(*redis.Client)
	if !ok {
		return nil, nil, fmt.Errorf("onRueidis: a single node's *redis.Client, got %T", c)
	}
	o := gc.Options()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{o.Addr},
		DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return o.Dialer(ctx, "tcp", addr)
		},
		DisableAutoPipelining: true,
		DisableCache:          true,
		ForceSingleClient:     true,
	})
	if err != nil {
		return nil, nil, err
	}
	s, err := rueidisclient.New(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return s, rc.Close, nil
}

// TestChaos: the chaos harness's short mode on a single node, every
// in-process instance's store on rueidis, under every fault the single
// node offers (kills, restarts with and without AOF, pauses, SCRIPT
// FLUSH, CLIENT KILL, maxmemory, latency, stalls, dropped connections,
// resets, instance crashes), the history checked against every
// algorithm's definition: 0 violations.
func TestChaos(t *testing.T) {
	redistest.Require(t)
	for _, seed := range []uint64{41, 42} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			o := chaos.Options{Topology: "single", Seed: seed, Short: true, StoreClient: onRueidis}
			var out strings.Builder
			start := time.Now()
			tot := chaos.Execute(context.Background(), []chaos.Options{o}, &out, testing.Verbose())
			t.Logf("%s%s (%v)", out.String(), tot.Line(), time.Since(start).Round(time.Millisecond))
			if tot.Violations != 0 || tot.Runs != 1 {
				t.Fatalf("%d runs, %d violations, want 1 run and none", tot.Runs, tot.Violations)
			}
		})
	}
}
