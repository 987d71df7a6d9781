package world

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// healthyWithin bounds Healthy when ctx has no deadline.
const healthyWithin = 30 * time.Second

// Healthy waits until the world serves: Single, its node answers a write;
// Sentinel, every sentinel names the same master, which answers a write,
// every replica's link to it is up and every sentinel sees them healthy;
// Cluster, every node reports all slots ok, no slot is migrating or
// importing, every replica's link is up and every master answers a write
// in a slot it serves.
func (w *world) Healthy(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, healthyWithin)
		defer cancel()
	}
	var check func(context.Context) error
	switch w.topo {
	case Single:
		check = func(ctx context.Context) error { return writable(ctx, w.single.Addr, "") }
	case Sentinel:
		check = w.sentinelHealthy
	case Cluster:
		check = w.clusterHealthy
	}
	return poll(ctx, "world not healthy", check)
}

// poll calls check every 25ms until it returns nil or ctx ends, then
// returns its last error. With WORLD_DEBUG set it prints every error.
func poll(ctx context.Context, what string, check func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last := check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if os.Getenv("WORLD_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("world: %s: %w (%v)", what, last, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// healthKey is the key the health checks write ({tag} picks its slot).
const healthKey = "world:health"

// writable sets a key on the node at addr (tag: a hash tag that puts it
// in a slot the node serves, "" outside a cluster). An OOM error is an
// answer: a maxmemory fault in place refuses writes on purpose, and the
// node serves again once it is healed.
func writable(ctx context.Context, addr, tag string) error {
	nc := nodeClient(addr)
	defer nc.Close()
	if err := nc.Set(ctx, healthKey+tag, "1", time.Minute).Err(); err != nil && !strings.HasPrefix(err.Error(), "OOM ") {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}

func (w *world) sentinelHealthy(ctx context.Context) error {
	var master string
	for _, s := range w.sent.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
		m, err := sc.Master(ctx, redistest.MasterName).Result()
		var reps []map[string]string
		if err == nil {
			reps, err = sc.Replicas(ctx, redistest.MasterName).Result()
		}
		sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", s.Addr, err)
		}
		addr := m["ip"] + ":" + m["port"]
		if master == "" {
			master = addr
		} else if addr != master {
			return fmt.Errorf("sentinels disagree: %s names %s, another %s", s.Addr, addr, master)
		}
		if m["flags"] != "master" {
			return fmt.Errorf("sentinel %s: master %s flags %s", s.Addr, addr, m["flags"])
		}
		if n := m["num-other-sentinels"]; n != strconv.Itoa(len(w.sent.Sentinels)-1) {
			return fmt.Errorf("sentinel %s knows %s other sentinels", s.Addr, n)
		}
		healthy := 0
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				healthy++
			}
		}
		if want := len(w.dataNodes()) - 1; healthy < want {
			return fmt.Errorf("sentinel %s sees %d healthy replicas, want %d", s.Addr, healthy, want)
		}
	}
	if err := writable(ctx, master, ""); err != nil {
		return err
	}
	for _, s := range w.dataNodes() {
		if s.Addr == master {
			continue
		}
		if !s.Running() {
			return fmt.Errorf("%s: not running", s.Addr)
		}
		repl, err := info(ctx, s.Addr, "replication")
		if err != nil {
			return err
		}
		if infoField(repl, "role") != "slave" || infoField(repl, "master_link_status") != "up" ||
			"127.0.0.1:"+infoField(repl, "master_port") != master {
			return fmt.Errorf("%s: not an in-sync replica of %s", s.Addr, master)
		}
	}
	return nil
}

func (w *world) clusterHealthy(ctx context.Context) error {
	for _, s := range w.clus.Nodes {
		if !s.Running() {
			return fmt.Errorf("%s: not running", s.Addr)
		}
		nc := nodeClient(s.Addr)
		ci, err := nc.ClusterInfo(ctx).Result()
		var nodes, repl string
		if err == nil {
			nodes, err = nc.ClusterNodes(ctx).Result()
		}
		if err == nil {
			repl, err = nc.Info(ctx, "replication").Result()
		}
		nc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
		for field, want := range map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    "16384",
			"cluster_known_nodes": strconv.Itoa(len(w.clus.Nodes)),
		} {
			if got := infoField(ci, field); got != want {
				return fmt.Errorf("%s: %s:%s, want %s", s.Addr, field, got, want)
			}
		}
		if strings.Contains(nodes, "->-") || strings.Contains(nodes, "-<-") {
			return fmt.Errorf("%s: a slot is migrating or importing", s.Addr)
		}
		if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
			return fmt.Errorf("%s: replica link %s", s.Addr, infoField(repl, "master_link_status"))
		}
	}
	owners, err := w.slotOwners(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for slot, addr := range owners {
		if addr == "" {
			return fmt.Errorf("slot %d has no master", slot)
		}
		if !seen[addr] {
			seen[addr] = true
			if err := writable(ctx, addr, "{"+slotTag(slot)+"}"); err != nil {
				return err
			}
		}
	}
	return nil
}

// slotOwners returns the address of the master of every slot ("" for a
// slot without one), as the first node that answers CLUSTER SHARDS sees
// it.
func (w *world) slotOwners(ctx context.Context) ([]string, error) {
	var last error
	for _, addr := range w.runningAddrs() {
		nc := nodeClient(addr)
		shards, err := nc.ClusterShards(ctx).Result()
		nc.Close()
		if err != nil {
			last = err
			continue
		}
		owners := make([]string, 16384)
		for _, sh := range shards {
			for _, n := range sh.Nodes {
				if n.Role != "master" || n.Health != "online" {
					continue
				}
				for _, r := range sh.Slots {
					for s := r.Start; s <= r.End; s++ {
						owners[s] = n.IP + ":" + strconv.FormatInt(n.Port, 10)
					}
				}
			}
		}
		return owners, nil
	}
	return nil, fmt.Errorf("world: no node answers CLUSTER SHARDS: %v", last)
}

// shardSlots returns, for every data node a cluster node lists in CLUSTER
// SHARDS (masters and replicas, whatever their health), the slot ranges
// of its shard; nil when no node answers.
func (w *world) shardSlots(ctx context.Context) map[string][][2]int {
	for _, addr := range w.runningAddrs() {
		nc := nodeClient(addr)
		shards, err := nc.ClusterShards(ctx).Result()
		nc.Close()
		if err != nil {
			continue
		}
		m := map[string][][2]int{}
		for _, sh := range shards {
			var ranges [][2]int
			for _, r := range sh.Slots {
				ranges = append(ranges, [2]int{int(r.Start), int(r.End)})
			}
			for _, n := range sh.Nodes {
				m[n.IP+":"+strconv.FormatInt(n.Port, 10)] = ranges
			}
		}
		return m
	}
	return nil
}

// info returns INFO section of the node at addr.
func info(ctx context.Context, addr, section string) (string, error) {
	nc := nodeClient(addr)
	defer nc.Close()
	v, err := nc.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	return v, nil
}

// infoField returns the value of "field:value" in an INFO reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
