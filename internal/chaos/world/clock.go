package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// FaketimeEnv returns the environment that runs a redis-server under
// libfaketime with its wall clock offset by offset (negative: behind),
// running at normal speed; the monotonic clock is left alone. Debian's
// redis-server (jemalloc) hangs under libfaketime alone on "Unexpected
// recursive calls to clock_gettime()": glibc's libc_malloc_debug is
// preloaded first, which avoids it. It fails when either library is not
// installed (Debian: apt-get install faketime).
func FaketimeEnv(offset time.Duration) ([]string, error) {
	ft, err := findLib("faketime/libfaketime.so.1")
	if err != nil {
		return nil, err
	}
	md, err := findLib("libc_malloc_debug.so.0")
	if err != nil {
		return nil, err
	}
	sign := "+" // libfaketime reads an unsigned offset as an absolute date
	if offset < 0 {
		sign = ""
	}
	return []string{
		"LD_PRELOAD=" + md + " " + ft,
		"FAKETIME=" + sign + strconv.FormatFloat(offset.Seconds(), 'f', 3, 64) + "s",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}

// findLib looks for a shared library under the usual library directories.
func findLib(name string) (string, error) {
	for _, pattern := range []string{"/usr/lib/*/", "/lib/*/", "/usr/lib/", "/usr/local/lib/", "/lib64/", "/usr/lib64/"} {
		if m, _ := filepath.Glob(pattern + name); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("world: %s not found (install faketime)", name)
}

// drawSkew draws a clock offset from Options.Skews, negative when behind.
func (w *world) drawSkew(ahead bool, rng *rand.Rand) time.Duration {
	d := w.opts.Skews[rng.IntN(len(w.opts.Skews))]
	if d < 0 {
		d = -d
	}
	if !ahead {
		d = -d
	}
	return d
}

// startSkewed starts a node whose clock is offset by skew, behind a proxy,
// with extra arguments; Close removes it with the world.
func (w *world) startSkewed(skew time.Duration, cluster bool, extra ...string) (*redistest.Server, error) {
	env, err := FaketimeEnv(skew)
	if err != nil {
		return nil, err
	}
	var s *redistest.Server
	if cluster {
		s, err = redistest.StartClusterNode(env)
	} else {
		args := append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
		if w.opts.AOF {
			args = append(args, aofArgs...)
		}
		s, err = redistest.StartEnv(env, args...)
	}
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.extra[s.Addr] = s
	}
	w.mu.Unlock()
	if closed {
		s.Close()
		return nil, errors.New("world: closed")
	}
	if _, err := w.addProxy(s.Addr); err != nil {
		return s, err
	}
	return s, nil
}

// removeSkewed stops a node startSkewed started, and its proxy.
func (w *world) removeSkewed(s *redistest.Server) {
	w.mu.Lock()
	delete(w.extra, s.Addr)
	p := w.proxies[s.Addr]
	delete(w.proxies, s.Addr)
	w.mu.Unlock()
	if p != nil {
		p.close()
	}
	s.Close()
}

// injectClock starts a node whose clock is behind (or ahead), makes it a
// replica of a master, and once it has the master's writes promotes it;
// heal fails back to the original master and removes the skewed node.
func (w *world) injectClock(ctx context.Context, ahead bool, rng *rand.Rand, ev *Event) (healFunc, error) {
	skew := w.drawSkew(ahead, rng)
	ev.Hold = w.drawHold(rng)
	if w.topo == Sentinel {
		return w.clockSentinel(ctx, skew, ev)
	}
	return w.clockCluster(ctx, skew, rng, ev)
}

// clockSentinel: the skewed node is a third replica; the others get
// replica-priority 0 so that SENTINEL FAILOVER picks it, then the original
// master alone is eligible for the failback.
func (w *world) clockSentinel(ctx context.Context, skew time.Duration, ev *Event) (healFunc, error) {
	orig, err := w.waitSentinelMaster(ctx, "")
	if err != nil {
		return nil, err
	}
	ev.Target = orig
	s, err := w.startSkewed(skew, false, "--replicaof", "127.0.0.1", port(orig))
	if s == nil {
		return nil, err
	}
	var others []string // the replicas as started that are not the master
	for _, d := range w.dataNodes() {
		if d.Addr != orig {
			others = append(others, d.Addr)
		}
	}
	heal := func(ctx context.Context) error {
		// the original master alone may be promoted
		errs := []error{setPriority(ctx, orig, 100)}
		for _, a := range others {
			errs = append(errs, setPriority(ctx, a, 0))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		m, err := w.waitSentinelMaster(ctx, "")
		if err == nil && m != orig {
			if err = w.waitSentinelReplicas(ctx, m, orig, others); err == nil {
				if err = fence(ctx, m, "", len(w.dataNodes())); err == nil {
					_, err = w.sent.Failover(ctx, 15*time.Second)
				}
			}
		}
		for _, a := range others {
			err = errors.Join(err, setPriority(ctx, a, 100))
		}
		if err == nil {
			// every sentinel has finished the failback before the skewed
			// node goes: a SENTINEL RESET in the middle of a failover
			// leaves its sentinel on the old master
			err = w.waitFailoverDone(ctx, orig)
		}
		w.removeSkewed(s)
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			err = errors.Join(err, sc.Reset(ctx, redistest.MasterName).Err())
			sc.Close()
		}
		return err
	}
	if err != nil {
		return heal, err
	}
	ev.Detail = fmt.Sprintf("skew %v: %s (faketime) becomes master in place of %s, fails back after %v", skew, s.Addr, orig, ev.Hold.Round(time.Millisecond))
	errs := []error{setPriority(ctx, s.Addr, 100)}
	for _, a := range others {
		errs = append(errs, setPriority(ctx, a, 0))
	}
	if err := errors.Join(errs...); err != nil {
		return heal, err
	}
	if err := w.waitSentinelReplicas(ctx, orig, s.Addr, others); err != nil {
		return heal, err
	}
	if err := fence(ctx, orig, "", len(w.dataNodes())); err != nil {
		return heal, err
	}
	nm, err := w.sent.Failover(ctx, 15*time.Second)
	if err == nil && nm != s.Addr {
		err = fmt.Errorf("world: SENTINEL FAILOVER promoted %s, not the skewed %s", nm, s.Addr)
	}
	return heal, err
}

// waitFailoverDone waits until every sentinel names master, with no
// failover in progress.
func (w *world) waitFailoverDone(ctx context.Context, master string) error {
	return poll(ctx, "failover not done", func(ctx context.Context) error {
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			m, err := sc.Master(ctx, redistest.MasterName).Result()
			sc.Close()
			if err != nil {
				return err
			}
			if addr := m["ip"] + ":" + m["port"]; addr != master || m["flags"] != "master" {
				return fmt.Errorf("sentinel %s: master %s flags %s, want %s", st.Addr, addr, m["flags"], master)
			}
		}
		return nil
	})
}

// setPriority sets replica-priority on the node at addr (0: never
// promoted). It tries again on a connection error: a sentinel
// reconfiguring a replica kills its clients (CLIENT KILL TYPE normal).
func setPriority(ctx context.Context, addr string, p int) error {
	nc := nodeClient(addr)
	defer nc.Close()
	return poll(ctx, "replica-priority not set", func(ctx context.Context) error {
		return nc.ConfigSet(ctx, "replica-priority", strconv.Itoa(p)).Err()
	})
}

// waitSentinelReplicas waits until every sentinel sees want as a healthy
// replica of master with a priority above 0, and each of zero with
// priority 0 (or not at all).
func (w *world) waitSentinelReplicas(ctx context.Context, master, want string, zero []string) error {
	return poll(ctx, "sentinels do not see the replicas", func(ctx context.Context) error {
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			m, err := sc.GetMasterAddrByName(ctx, redistest.MasterName).Result()
			var reps []map[string]string
			if err == nil {
				reps, err = sc.Replicas(ctx, redistest.MasterName).Result()
			}
			sc.Close()
			if err != nil {
				return err
			}
			if len(m) != 2 || m[0]+":"+m[1] != master {
				return fmt.Errorf("sentinel %s names master %v, want %s", st.Addr, m, master)
			}
			ok := false
			for _, r := range reps {
				addr := r["ip"] + ":" + r["port"]
				switch {
				case addr == want:
					ok = r["flags"] == "slave" && r["master-link-status"] == "ok" && r["slave-priority"] != "0" &&
						r["slave-repl-offset"] != "0"
				case contains(zero, addr) && r["slave-priority"] != "0" && addr != master:
					return fmt.Errorf("sentinel %s: %s has priority %s", st.Addr, addr, r["slave-priority"])
				}
			}
			if !ok {
				return fmt.Errorf("sentinel %s does not see %s as a healthy replica", st.Addr, want)
			}
		}
		return nil
	})
}

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

// roleOf returns the role of the node at addr as INFO replication says.
func roleOf(ctx context.Context, addr string) (string, error) {
	repl, err := info(ctx, addr, "replication")
	if err != nil {
		return "", err
	}
	return infoField(repl, "role"), nil
}

// linkUp returns nil once the node at addr is a replica whose link to its
// master is up.
func linkUp(ctx context.Context, addr string) error {
	repl, err := info(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if infoField(repl, "role") != "slave" || infoField(repl, "master_link_status") != "up" {
		return fmt.Errorf("%s: role %s, link %s", addr, infoField(repl, "role"), infoField(repl, "master_link_status"))
	}
	return nil
}
