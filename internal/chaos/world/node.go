package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// masters returns the addresses of the current masters: Single, the node;
// Sentinel, the master the first sentinel names; Cluster, the running
// nodes whose ROLE is master.
func (w *world) masters(ctx context.Context) ([]string, error) {
	switch w.topo {
	case Sentinel:
		m, err := w.sent.MasterAddr(ctx)
		if err != nil {
			return nil, err
		}
		return []string{m}, nil
	case Cluster:
		ms, err := w.clus.Masters(ctx)
		if err != nil {
			return nil, err
		}
		var addrs []string
		for _, s := range ms {
			addrs = append(addrs, s.Addr)
		}
		return addrs, nil
	}
	return []string{w.single.Addr}, nil
}

// replicas returns the running data nodes (as started) that are not
// masters.
func (w *world) replicas(ctx context.Context) ([]string, error) {
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, s := range w.dataNodes() {
		if s.Running() && !contains(ms, s.Addr) {
			addrs = append(addrs, s.Addr)
		}
	}
	return addrs, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// runningData are the running data nodes as started.
func (w *world) runningData() []string {
	var addrs []string
	for _, s := range w.dataNodes() {
		if s.Running() {
			addrs = append(addrs, s.Addr)
		}
	}
	return addrs
}

func (w *world) injectClientKill(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	ev.Target = pick(rng, w.runningData())
	nc := nodeClient(ev.Target)
	defer nc.Close()
	n, err := nc.ClientKillByFilter(ctx, "TYPE", "normal").Result()
	ev.Detail = fmt.Sprintf("CLIENT KILL TYPE normal: %d connections", n)
	return noHeal, err
}

// maxMemoryHeadroom is how far above used_memory a maxmemory fault sets
// maxmemory: a few writes fit, then writes are refused.
const maxMemoryHeadroom = 64 << 10

func (w *world) injectMaxMemory(ctx context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	ms, err := w.masters(ctx)
	if err != nil {
		return nil, err
	}
	ev.Target = pick(rng, ms)
	ev.Hold = w.drawHold(rng)
	nc := nodeClient(ev.Target)
	defer nc.Close()
	old, err := nc.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		return nil, err
	}
	mem, err := nc.Info(ctx, "memory").Result()
	if err != nil {
		return nil, err
	}
	used, err := strconv.ParseInt(infoField(mem, "used_memory"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("world: %s: used_memory: %w", ev.Target, err)
	}
	limit := used + maxMemoryHeadroom
	heal := func(ctx context.Context) error {
		nc := nodeClient(ev.Target)
		defer nc.Close()
		return errors.Join(
			nc.ConfigSet(ctx, "maxmemory", old["maxmemory"]).Err(),
			nc.ConfigSet(ctx, "maxmemory-policy", old["maxmemory-policy"]).Err())
	}
	ev.Detail = fmt.Sprintf("maxmemory %d (used_memory %d + %d), noeviction, for %v", limit, used, maxMemoryHeadroom, ev.Hold.Round(time.Millisecond))
	err = errors.Join(
		nc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(),
		nc.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err())
	return heal, err
}

// injectKill kills a node (SIGKILL): Single, the node; Sentinel and
// Cluster, a replica, or with aof any data node. With aof the node
// persists to its append-only file (turned on first where it is not) and
// is restarted loading it; without, it restarts with the arguments it was
// started with (empty, unless the world runs AOF).
func (w *world) injectKill(ctx context.Context, aof bool, rng *rand.Rand, ev *Event) (healFunc, error) {
	candidates := w.runningData()
	if !aof && w.topo != Single {
		// a master restarted empty would take its data to its replicas:
		// kill-master covers masters
		var err error
		if candidates, err = w.replicas(ctx); err != nil {
			return nil, err
		}
	}
	if len(candidates) == 0 {
		return nil, errors.New("world: no node to kill")
	}
	ev.Target = pick(rng, candidates)
	ev.Hold = w.drawHold(rng)
	s := w.server(ev.Target)
	if aof { // also in an AOF world: a node restarted by kill runs without
		if err := enableAOF(ctx, ev.Target); err != nil {
			return nil, err
		}
	}
	s.Stop()
	ev.Detail = fmt.Sprintf("SIGKILL, restart after %v without persistence", ev.Hold.Round(time.Millisecond))
	if aof {
		ev.Detail = fmt.Sprintf("SIGKILL, restart after %v loading the append-only file (appendfsync everysec)", ev.Hold.Round(time.Millisecond))
	}
	return func(ctx context.Context) error {
		var args []string
		if aof {
			args = append(args, aofArgs...)
		}
		if w.topo == Sentinel {
			m, err := w.waitSentinelMaster(ctx, "")
			if err != nil {
				return err
			}
			if m == s.Addr {
				args = append(args, "--replicaof", "no", "one")
			} else {
				args = append(args, "--replicaof", "127.0.0.1", port(m))
			}
		}
		return s.RestartWith(args...)
	}, nil
}

// enableAOF turns on appendonly on the node at addr and waits until the
// append-only file holds its data set.
func enableAOF(ctx context.Context, addr string) error {
	nc := nodeClient(addr)
	defer nc.Close()
	if err := nc.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		return err
	}
	if err := nc.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return err
	}
	return poll(ctx, "append-only file not written", func(ctx context.Context) error {
		p, err := nc.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if infoField(p, "aof_enabled") != "1" || infoField(p, "aof_rewrite_in_progress") != "0" || infoField(p, "aof_rewrite_scheduled") != "0" {
			return fmt.Errorf("%s: append-only file rewrite in progress", addr)
		}
		return nil
	})
}

// port returns the port of a "host:port" address.
func port(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

// injectPause stops a data node (SIGSTOP) for Options.PauseFor.
func (w *world) injectPause(_ context.Context, rng *rand.Rand, ev *Event) (healFunc, error) {
	ev.Target = pick(rng, w.runningData())
	ev.Hold = w.opts.PauseFor
	s := w.server(ev.Target)
	ev.Detail = fmt.Sprintf("SIGSTOP for %v, then SIGCONT", ev.Hold)
	return func(context.Context) error { return s.Resume() }, s.Pause()
}

// waitSentinelMaster waits until every sentinel names the same master, other
// than not (when not is not ""), and returns it.
func (w *world) waitSentinelMaster(ctx context.Context, not string) (string, error) {
	var master string
	err := poll(ctx, "no master", func(ctx context.Context) error {
		master = ""
		for _, s := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
			v, err := sc.GetMasterAddrByName(ctx, redistest.MasterName).Result()
			sc.Close()
			if err != nil {
				return err
			}
			if len(v) != 2 {
				return fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME replied %q", s.Addr, v)
			}
			addr := v[0] + ":" + v[1]
			if addr == not {
				return fmt.Errorf("sentinel %s still names %s", s.Addr, not)
			}
			if master != "" && addr != master {
				return fmt.Errorf("sentinels disagree: %s and %s", master, addr)
			}
			master = addr
		}
		return nil
	})
	return master, err
}
