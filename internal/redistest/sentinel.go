package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the sentinels of [StartSentinel] monitor.
const MasterName = "mymaster"

// SentinelDownAfter is the sentinels' down-after-milliseconds: how long a
// master must be silent before they fail it over by themselves.
const SentinelDownAfter = time.Second

// Sentinel is a master, its replicas and the sentinels watching them, all
// on loopback ports, started by [StartSentinel].
type Sentinel struct {
	// Master and Replicas are the data nodes as started; failovers swap
	// roles (ask [Sentinel.MasterAddr]).
	Master    *Server
	Replicas  []*Server
	Sentinels []*Server
}

// StartSentinel starts a master with replicas replicas and sentinels
// sentinels monitoring it as [MasterName] with a quorum of a majority of
// them, and waits until the replicas are in sync and every sentinel knows
// every replica. One sentinel (quorum 1) starts fastest and is enough for
// SENTINEL FAILOVER, which needs no agreement. Every data node gets the
// extra arguments (for example "--min-replicas-to-write", "1"). Close it
// when done.
func StartSentinel(replicas, sentinels int, extra ...string) (*Sentinel, error) {
	if replicas < 1 || sentinels < 1 {
		return nil, errors.New("redistest: a sentinel setup needs a replica and a sentinel")
	}
	st := &Sentinel{}
	var err error
	data := append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
	if st.Master, err = Start(data...); err != nil {
		return nil, err
	}
	for range replicas {
		r, err := Start(append(data, "--replicaof", "127.0.0.1", strconv.Itoa(st.Master.Port))...)
		if err != nil {
			st.Close()
			return nil, err
		}
		st.Replicas = append(st.Replicas, r)
	}
	for range sentinels {
		s, err := startSentinel(st.Master.Port, sentinels/2+1)
		if err != nil {
			st.Close()
			return nil, err
		}
		st.Sentinels = append(st.Sentinels, s)
	}
	if err := st.WaitReady(10 * time.Second); err != nil {
		st.Close()
		return nil, err
	}
	if err := waitStreaming(st.Master, replicas); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// waitStreaming writes on master and waits until n replicas have
// acknowledged it (WAIT). A replica that has just loaded a diskless sync
// gets no writes until its first REPLCONF ACK, up to a second later: a
// master lost in that second takes every write since the sync with it.
// WAIT asks the replicas for that ACK at once.
func waitStreaming(master *Server, n int, write ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mc := master.NodeClient()
	defer mc.Close()
	if len(write) == 0 {
		write = []any{"SET", "redistest:probe", "1"}
	}
	if err := mc.Do(ctx, write...).Err(); err != nil {
		return fmt.Errorf("redistest: %s: %w", master.Addr, err)
	}
	got, err := mc.Wait(ctx, n, 5*time.Second).Result()
	if err != nil {
		return fmt.Errorf("redistest: %s: WAIT: %w", master.Addr, err)
	}
	if got < int64(n) {
		return fmt.Errorf("redistest: %s: %d of %d replicas acknowledged a write", master.Addr, got, n)
	}
	return nil
}

// startSentinel starts one redis-server --sentinel on a free port.
func startSentinel(masterPort, quorum int) (*Server, error) {
	return launch("redlimit-sentinel-", func(port int, dir string) ([]string, error) {
		// sentinel rewrites its configuration file: it must be writable
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, port, dir, MasterName, masterPort, quorum, MasterName, SentinelDownAfter.Milliseconds(), MasterName, failoverTimeout.Milliseconds(), MasterName)
		return []string{conf, "--sentinel"}, os.WriteFile(conf, []byte(text), 0o600)
	})
}

// SentinelAddrs returns the sentinels' addresses.
func (st *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(st.Sentinels))
	for i, s := range st.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a new failover client (redis.NewFailoverClient) for the
// monitored master, closed when t ends.
func (st *Sentinel) Client(t testing.TB) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: st.SentinelAddrs()})
	t.Cleanup(func() { c.Close() })
	return c
}

func (st *Sentinel) sentinelClient() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: st.Sentinels[0].Addr, MaxRetries: -1, DialTimeout: time.Second})
}

// MasterAddr returns the master's address as the first sentinel knows it.
func (st *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	sc := st.sentinelClient()
	defer sc.Close()
	v, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("redistest: GET-MASTER-ADDR-BY-NAME replied %q", v)
	}
	return v[0] + ":" + v[1], nil
}

// Failover asks the first sentinel to fail the master over now (SENTINEL
// FAILOVER) and returns once it names another master.
func (st *Sentinel) Failover(ctx context.Context, timeout time.Duration) (newMaster string, err error) {
	old, err := st.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	sc := st.sentinelClient()
	defer sc.Close()
	if err := sc.Failover(ctx, MasterName).Err(); err != nil {
		return "", err
	}
	// A sentinel gives up a failover whose promotion it has not seen
	// within failover-timeout (10 s), as on a machine too loaded to run
	// the replica in time; it is asked again then, until timeout.
	start := time.Now()
	deadline := start.Add(timeout)
	again := start.Add(failoverTimeout + 2*time.Second)
	for {
		addr, err := st.MasterAddr(ctx)
		if err == nil && addr != old {
			return addr, nil
		}
		now := time.Now()
		if now.After(deadline) {
			return "", fmt.Errorf("redistest: master still %s after %v (%v)", old, timeout, err)
		}
		if now.After(again) {
			// -INPROG when the first is still going: nothing to do
			_ = sc.Failover(ctx, MasterName).Err()
			again = now.Add(failoverTimeout + 2*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failoverTimeout is the sentinels' failover-timeout.
const failoverTimeout = 10 * time.Second

// WaitReady waits until every replica's link to the master is up and every
// sentinel lists every replica as a healthy replica of the master it
// names, so that a failover can start at once.
func (st *Sentinel) WaitReady(timeout time.Duration) error {
	return poll(timeout, "sentinel setup not ready", st.ready)
}

func (st *Sentinel) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	master, err := st.MasterAddr(ctx)
	if err != nil {
		return err
	}
	for _, s := range append([]*Server{st.Master}, st.Replicas...) {
		if s.Addr == master || !s.Running() {
			continue
		}
		nc := s.NodeClient()
		repl, err := nc.Info(ctx, "replication").Result()
		nc.Close()
		if err != nil {
			return err
		}
		if infoField(repl, "role") != "slave" || infoField(repl, "master_link_status") != "up" ||
			"127.0.0.1:"+infoField(repl, "master_port") != master {
			return fmt.Errorf("%s: not an in-sync replica of %s", s.Addr, master)
		}
	}
	for _, s := range st.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		reps, err := sc.Replicas(ctx, MasterName).Result()
		sc.Close()
		if err != nil {
			return err
		}
		healthy := 0
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				healthy++
			}
		}
		if healthy != len(st.Replicas) {
			return fmt.Errorf("sentinel %s sees %d healthy replicas, want %d", s.Addr, healthy, len(st.Replicas))
		}
	}
	return nil
}

// Close stops every process and removes their directories.
func (st *Sentinel) Close() {
	for _, s := range st.Sentinels {
		s.Close()
	}
	for _, s := range st.Replicas {
		s.Close()
	}
	if st.Master != nil {
		st.Master.Close()
	}
}
