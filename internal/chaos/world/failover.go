package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// tuneSentinels makes the sentinels poll their nodes every 200ms (INFO)
// and greet each other every 500ms instead of 10s and 2s, so that they
// see a demoted master or a new replica within a second.
func (w *world) tuneSentinels(ctx context.Context) error {
	var errs []error
	for _, s := range w.sent.Sentinels {
		sc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
		errs = append(errs, sc.Do(ctx, "SENTINEL", "DEBUG", "info-period", 200, "publish-period", 500).Err())
		sc.Close()
	}
	return errors.Join(errs...)
}

// fenceKey is the key fence writes ({tag} picks its slot).
const fenceKey = "world:fence"

// fence writes a key on the master at addr and waits (WAIT, on the same
// connection) until replicas replicas have it, so that a replica promoted
// next holds every write the master acknowledged before.
func fence(ctx context.Context, addr, tag string, replicas int) error {
	return poll(ctx, "fence not replicated", func(ctx context.Context) error {
		nc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
		defer nc.Close()
		conn := nc.Conn()
		defer conn.Close()
		if err := conn.Set(ctx, fenceKey+tag, time.Now().UnixNano(), time.Minute).Err(); err != nil {
			return fmt.Errorf("world: fence on %s: %w", addr, err)
		}
		got, err := conn.Wait(ctx, replicas, time.Second).Result()
		if err != nil {
			return fmt.Errorf("world: WAIT on %s: %w", addr, err)
		}
		if got < int64(replicas) {
			return fmt.Errorf("world: %s: %d of %d replicas have the fence", addr, got, replicas)
		}
		return nil
	})
}

// injectFailover fails the master over to a replica while both run:
// Sentinel, SENTINEL FAILOVER once the replicas have the master's writes;
// Cluster, CLUSTER FAILOVER on a replica of a master rng picks (a
// coordinated failover: the replica catches up first). The old master
// stays a replica: heal only waits for the world to settle.
func (w *world) injectFailover(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	if w.topo == Sentinel {
		m, err := w.waitSentinelMaster(ctx, "")
		if err != nil {
			return nil, err
		}
		ev.Target = m
		if err := fence(ctx, m, "", len(w.dataNodes())-1); err != nil {
			return nil, err
		}
		nm, err := w.sent.Failover(ctx, 30*time.Second)
		ev.Detail = fmt.Sprintf("SENTINEL FAILOVER: %s → %s", m, nm)
		return noHeal, err
	}
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	ev.Target = pick(rng, ms)
	m := w.server(ev.Target)
	r, err := w.clus.ReplicaOf(ctx, m)
	if err != nil {
		return nil, err
	}
	ev.Detail = fmt.Sprintf("CLUSTER FAILOVER on %s: %s → %s", r.Addr, m.Addr, r.Addr)
	return noHeal, clusterFailover(ctx, r.Addr)
}

// clusterFailover runs CLUSTER FAILOVER on the replica at addr and waits
// until it is master. Its master ignores the request (and the replica
// gives up after 5s) until gossip has told it that addr is its replica:
// it waits for that first, and asks again after a manual failover timed
// out.
func clusterFailover(ctx context.Context, addr string) error {
	nc := nodeClient(addr)
	defer nc.Close()
	for {
		if err := poll(ctx, "master does not know its replica", func(ctx context.Context) error {
			return knownReplica(ctx, nc, addr)
		}); err != nil {
			return err
		}
		if err := nc.ClusterFailover(ctx).Err(); err != nil {
			return fmt.Errorf("world: CLUSTER FAILOVER on %s: %w", addr, err)
		}
		tctx, cancel := context.WithTimeout(ctx, 6*time.Second) // a manual failover times out after 5s
		err := poll(tctx, "failover not done", func(ctx context.Context) error {
			repl, err := nc.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if role := infoField(repl, "role"); role != "master" {
				return fmt.Errorf("%s still %s", addr, role)
			}
			return nil
		})
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// knownReplica returns nil once the master of the replica nc talks to (at
// addr) lists it as its replica in CLUSTER NODES.
func knownReplica(ctx context.Context, nc *redis.Client, addr string) error {
	repl, err := nc.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if infoField(repl, "role") != "slave" || infoField(repl, "master_link_status") != "up" {
		return fmt.Errorf("%s: not a replica in sync", addr)
	}
	id, err := nc.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	mc := nodeClient("127.0.0.1:" + infoField(repl, "master_port"))
	defer mc.Close()
	mid, err := mc.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	nodes, err := mc.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == id && strings.Contains(f[2], "slave") && f[3] == mid {
			return nil
		}
	}
	return fmt.Errorf("%s does not list %s as its replica yet", mc.Options().Addr, addr)
}

// injectKillMaster kills a master (SIGKILL) and lets the sentinels or the
// cluster promote a replica. heal waits for the promotion, then restarts
// the old master, which rejoins as a replica of the new one (Sentinel:
// started with --replicaof; Cluster: from its nodes.conf).
func (w *world) injectKillMaster(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	ev.Target = pick(rng, ms)
	s := w.server(ev.Target)
	s.Stop()
	if w.topo == Sentinel {
		ev.Detail = "SIGKILL the master; the sentinels promote a replica; the old master restarts as a replica"
		return func(ctx context.Context) error {
			nm, err := w.waitSentinelMaster(ctx, s.Addr)
			if err != nil {
				return err
			}
			return s.RestartWith("--replicaof", "127.0.0.1", port(nm))
		}, nil
	}
	ev.Detail = "SIGKILL a master; the cluster promotes its replica; the old master restarts as a replica"
	return func(ctx context.Context) error {
		err := poll(ctx, "no replica promoted", func(ctx context.Context) error {
			owners, err := w.slotOwners(ctx)
			if err != nil {
				return err
			}
			for slot, o := range owners {
				if o == "" || o == s.Addr {
					return fmt.Errorf("slot %d: master %q", slot, o)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return s.Restart()
	}, nil
}
