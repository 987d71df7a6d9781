package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// clockCluster: the skewed node meets the cluster, replicates a master
// rng picks, and takes over with CLUSTER FAILOVER (coordinated: it catches
// up first); heal runs CLUSTER FAILOVER on the original master, then
// forgets the skewed node.
func (w *world) clockCluster(ctx context.Context, skew time.Duration, rng *rand.Rand, ev *Event) (healFunc, error) {
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	orig := pick(rng, ms)
	ev.Target = orig
	s, err := w.startSkewed(skew, true)
	if s == nil {
		return nil, err
	}
	var sid string
	heal := func(ctx context.Context) error {
		err := w.failBack(ctx, orig, s.Addr)
		if err == nil {
			err = w.leaveSkewed(ctx, orig, sid, s.Port)
		}
		w.removeSkewed(s)
		if sid != "" {
			for _, d := range w.clus.Nodes {
				nc := nodeClient(d.Addr)
				fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				ferr := poll(fctx, "CLUSTER FORGET refused", func(ctx context.Context) error {
					if err := nc.ClusterForget(ctx, sid).Err(); err != nil && !strings.Contains(err.Error(), "Unknown node") {
						return err
					}
					return nil
				})
				cancel()
				if ferr != nil {
					err = errors.Join(err, fmt.Errorf("world: CLUSTER FORGET on %s: %w", d.Addr, ferr))
				}
				nc.Close()
			}
		}
		return err
	}
	if err != nil {
		return heal, err
	}
	ev.Detail = fmt.Sprintf("skew %v: %s (faketime) replicates %s and takes over (CLUSTER FAILOVER), fails back after %v", skew, s.Addr, orig, ev.Hold.Round(time.Millisecond))
	sc, oc := nodeClient(s.Addr), nodeClient(orig)
	defer sc.Close()
	defer oc.Close()
	if sid, err = sc.ClusterMyID(ctx).Result(); err != nil {
		return heal, err
	}
	oid, err := oc.ClusterMyID(ctx).Result()
	if err != nil {
		return heal, err
	}
	if err := sc.ClusterMeet(ctx, "127.0.0.1", port(orig)).Err(); err != nil {
		return heal, err
	}
	// CLUSTER REPLICATE needs the node to know the master first
	err = poll(ctx, "skewed node cannot replicate", func(ctx context.Context) error {
		return sc.ClusterReplicate(ctx, oid).Err()
	})
	if err != nil {
		return heal, err
	}
	if err := poll(ctx, "skewed replica not in sync", func(ctx context.Context) error { return linkUp(ctx, s.Addr) }); err != nil {
		return heal, err
	}
	owners, err := w.slotOwners(ctx)
	if err != nil {
		return heal, err
	}
	tag := ""
	for slot, o := range owners {
		if o == orig {
			tag = "{" + slotTag(slot) + "}"
			break
		}
	}
	// the master's replica as started, and the skewed one
	if err := fence(ctx, orig, tag, 2); err != nil {
		return heal, err
	}
	if err := clusterFailover(ctx, s.Addr); err != nil {
		return heal, err
	}
	// in place once the original master knows it is a replica now
	return heal, poll(ctx, "original master not demoted", func(ctx context.Context) error { return linkUp(ctx, orig) })
}

// failBack makes orig master again in place of the skewed node: CLUSTER
// FAILOVER on orig, until every node's view agrees (seen under load: a
// failback that orig reported done, then lost to the skewed node).
func (w *world) failBack(ctx context.Context, orig, skewed string) error {
	for {
		or, oerr := roleOf(ctx, orig)
		sr, serr := roleOf(ctx, skewed)
		if oerr != nil || serr != nil || or != "master" || sr == "master" {
			if err := clusterFailover(ctx, orig); err != nil {
				return err
			}
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := poll(tctx, "failback not agreed", func(ctx context.Context) error { return w.viewAgrees(ctx, orig, skewed) })
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// viewAgrees returns nil once every data node's CLUSTER NODES flags orig
// a master and skewed not.
func (w *world) viewAgrees(ctx context.Context, orig, skewed string) error {
	for _, d := range w.clus.Nodes {
		nc := nodeClient(d.Addr)
		nodes, err := nc.ClusterNodes(ctx).Result()
		nc.Close()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			master := strings.Contains(f[2], "master")
			if addr == orig && !master || addr == skewed && master {
				return fmt.Errorf("%s sees %s as %s", d.Addr, addr, f[2])
			}
		}
	}
	return nil
}

// leaveSkewed waits until no node replicates the skewed node (at
// skewedPort, node id sid) any more, by its replication link or in its
// cluster view:
// once the original master is master again its replicas follow it; one
// that has not within 2s is told to (CLUSTER REPLICATE).
func (w *world) leaveSkewed(ctx context.Context, orig, sid string, skewedPort int) error {
	oc := nodeClient(orig)
	oid, err := oc.ClusterMyID(ctx).Result()
	oc.Close()
	if err != nil {
		return err
	}
	start := time.Now()
	return poll(ctx, "a node still replicates the skewed one", func(ctx context.Context) error {
		for _, d := range w.clus.Nodes {
			if d.Addr == orig {
				continue
			}
			nc := nodeClient(d.Addr)
			repl, err := nc.Info(ctx, "replication").Result()
			var nodes string
			if err == nil {
				nodes, err = nc.ClusterNodes(ctx).Result()
			}
			if err != nil {
				nc.Close()
				return err
			}
			follows := infoField(repl, "role") == "slave" && infoField(repl, "master_port") == strconv.Itoa(skewedPort)
			for line := range strings.SplitSeq(nodes, "\n") {
				if f := strings.Fields(line); len(f) > 3 && strings.Contains(f[2], "myself") && f[3] == sid {
					follows = true
				}
			}
			if !follows {
				nc.Close()
				continue
			}
			rerr := errors.New("not yet told")
			if time.Since(start) > 2*time.Second {
				rerr = nc.ClusterReplicate(ctx, oid).Err()
			}
			nc.Close()
			return fmt.Errorf("%s replicates %s (CLUSTER REPLICATE: %v)", d.Addr, infoField(repl, "master_port"), rerr)
		}
		return nil
	})
}
