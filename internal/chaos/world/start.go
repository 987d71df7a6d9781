package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// ErrBusy is the error of an [World.Inject] refused because a fault that
// changes roles or processes (kill, pause, failover, migration, clock) is
// already in place and not yet healed: two of them at once could leave the
// world without a master to heal back to. Proxy faults, SCRIPT FLUSH,
// CLIENT KILL and maxmemory overlap freely with anything.
var ErrBusy = errors.New("world: a role fault is already in place")

// Options shape a world. The zero value is usable.
type Options struct {
	// AOF starts every data node with appendonly yes and appendfsync
	// everysec (a cluster's with CONFIG SET once started): a single node
	// or a Sentinel data node killed by kill then restarts with its data
	// too. Without it, kill-aof turns AOF on (CONFIG SET) on the node it
	// kills just before killing it.
	AOF bool
	// PauseFor is how long a pause keeps a node stopped (SIGSTOP): set it
	// above the engine's Timeout. Zero: 300ms.
	PauseFor time.Duration
	// MaxLatency bounds the latency a latency fault adds per reply (drawn
	// in [1ms, MaxLatency]). Zero: 50ms.
	MaxLatency time.Duration
	// SlowLatency bounds the latency a slow fault adds to one master's
	// replies (drawn in [SlowLatency/4, SlowLatency], whole ms): a few ms,
	// well under the engine's Timeout, so that calls spanning slots are
	// decided, not timed out, with one part answering late. Zero: 8ms.
	SlowLatency time.Duration
	// Hold bounds how long the faults that last by nature (stall, drop and
	// reset windows, maxmemory, a skewed master) are held: each draws its
	// own in [Hold/4, Hold]. Zero: 1s.
	Hold time.Duration
	// MigrateKeys are keys the harness's workload uses: migrate moves the
	// slots of some of them. Empty: the slots of keys found on a master.
	MigrateKeys []string
	// MigrateSlots is the most slots one migration moves. Zero: 8.
	MigrateSlots int
	// Skews are the clock offsets clock-behind and clock-ahead draw from
	// (their absolute values; behind negates them). Zero: 500ms, 1s, 3s.
	Skews []time.Duration
	// StartTimeout bounds Start. Zero: 60s.
	StartTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.PauseFor <= 0 {
		o.PauseFor = 300 * time.Millisecond
	}
	if o.MaxLatency <= 0 {
		o.MaxLatency = 50 * time.Millisecond
	}
	if o.SlowLatency <= 0 {
		o.SlowLatency = 8 * time.Millisecond
	}
	if o.Hold <= 0 {
		o.Hold = time.Second
	}
	if o.MigrateSlots <= 0 {
		o.MigrateSlots = 8
	}
	if len(o.Skews) == 0 {
		o.Skews = []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second}
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	return o
}

// world implements [World] for every topology: exactly one of single,
// sent and clus is set.
type world struct {
	topo string
	opts Options

	single *redistest.Server
	sent   *redistest.Sentinel
	clus   *redistest.Cluster

	mu       sync.Mutex
	proxies  map[string]*proxy            // a node's real address → its proxy
	extra    map[string]*redistest.Server // nodes started on demand (clock faults), by address
	roleBusy bool                         // a role fault is in place (ErrBusy)
	closed   bool
}

var _ World = (*world)(nil)

// Start starts a world of topology (Single, Sentinel or Cluster) on
// 127.0.0.1 free ports, a fault proxy in front of every data node, and
// returns once it serves writes. On error everything it started is
// stopped. Close the world when done.
//
// Single is one redis-server; Sentinel a master, two replicas and three
// sentinels (quorum 2); Cluster three masters with one replica each.
//
// With WORLD_DEBUG set in the environment, every wait of the world
// (Healthy, failovers, migrations) prints on stderr what it still waits
// for.
func Start(ctx context.Context, topology string, opts Options) (World, error) {
	if redistest.Binary() == "" {
		return nil, errors.New("world: redis-server not found on PATH")
	}
	w := &world{topo: topology, opts: opts.withDefaults(), proxies: map[string]*proxy{}, extra: map[string]*redistest.Server{}}
	ctx, cancel := context.WithTimeout(ctx, w.opts.StartTimeout)
	defer cancel()
	var data []string
	if w.opts.AOF {
		data = aofArgs
	}
	var err error
	switch topology {
	case Single:
		w.single, err = redistest.Start(data...)
	case Sentinel:
		w.sent, err = redistest.StartSentinel(2, 3, slices.Concat(data, fencedArgs)...)
		if err == nil {
			err = w.tuneSentinels(ctx)
		}
	case Cluster:
		w.clus, err = redistest.StartCluster(3, 1)
		if err == nil && w.opts.AOF {
			err = w.eachNode(ctx, func(nc *redis.Client) error {
				return nc.ConfigSet(ctx, "appendonly", "yes").Err()
			})
		}
	default:
		return nil, fmt.Errorf("world: unknown topology %q (want %s, %s or %s)", topology, Single, Sentinel, Cluster)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	for _, addr := range w.Addrs() {
		if _, err := w.addProxy(addr); err != nil {
			w.Close()
			return nil, err
		}
	}
	if err := w.Healthy(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// aofArgs make a node persist every write to its append-only file,
// flushed every second.
var aofArgs = []string{"--appendonly", "yes", "--appendfsync", "everysec"}

// fencedArgs make a Sentinel data node refuse writes (NOREPLICAS) while no
// replica has acknowledged its stream within the last second, as
// docs/reliability.md recommends: a master that a failover left behind
// (its replicas moved to the new master) stops deciding at once, instead
// of deciding alone for every client that missed Sentinel's switch until
// Sentinel converts it (its next INFO, up to 10 s later). Sentinel seed
// 909 was that: one instance kept the old master of a clock fault's
// failback for 6 s, and a GCRA key admitted 21 units over its limit.
var fencedArgs = []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}

// addProxy starts the proxy of the node at addr.
func (w *world) addProxy(addr string) (*proxy, error) {
	p, err := newProxy(addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		p.close()
		return nil, errors.New("world: closed")
	}
	w.proxies[addr] = p
	return p, nil
}

func (w *world) proxy(addr string) *proxy {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.proxies[addr]
}

// dial connects to the proxy of the node at addr (the address a sentinel
// or CLUSTER SLOTS names), or to addr itself when it has none (a
// sentinel).
func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p := w.proxy(addr); p != nil {
		addr = p.addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (w *world) Topology() string { return w.topo }

// Kinds lists the fault kinds of the topology.
func (w *world) Kinds() []string {
	common := []string{Kill, KillAOF, Pause, ScriptFlush, ClientKill, MaxMemory, Latency, Slow, Stall, Drop, Reset}
	switch w.topo {
	case Sentinel:
		return append(common, Failover, KillMaster, ClockBehind, ClockAhead)
	case Cluster:
		return append(common, Failover, KillMaster, Migrate, ClockBehind, ClockAhead)
	}
	return common
}

// dataNodes returns the data nodes as started (not the ones started for a
// clock fault), masters and replicas.
func (w *world) dataNodes() []*redistest.Server {
	switch {
	case w.single != nil:
		return []*redistest.Server{w.single}
	case w.sent != nil:
		return append([]*redistest.Server{w.sent.Master}, w.sent.Replicas...)
	case w.clus != nil:
		return slices.Clone(w.clus.Nodes)
	}
	return nil
}

// Addrs are the data nodes' real addresses (a node started for a clock
// fault included while it runs).
func (w *world) Addrs() []string {
	var addrs []string
	for _, s := range w.dataNodes() {
		addrs = append(addrs, s.Addr)
	}
	w.mu.Lock()
	for a := range w.extra {
		addrs = append(addrs, a)
	}
	w.mu.Unlock()
	return addrs
}

// NewClient returns a client reaching the data nodes through the proxies.
func (w *world) NewClient(o ClientOptions) redis.UniversalClient {
	switch w.topo {
	case Sentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: redistest.MasterName, SentinelAddrs: w.sent.SentinelAddrs(), Dialer: w.dial,
			PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: o.MaxRetries,
		})
	case Cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: w.clus.Addrs(), Dialer: w.dial,
			PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: o.MaxRetries,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: w.single.Addr, Dialer: w.dial,
		PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: o.MaxRetries,
	})
}

// Close stops the proxies and every process.
func (w *world) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	proxies := w.proxies
	w.proxies = map[string]*proxy{}
	extra := w.extra
	w.extra = map[string]*redistest.Server{}
	w.mu.Unlock()
	var errs []error
	for _, p := range proxies {
		errs = append(errs, p.close())
	}
	for _, s := range w.dataNodes() {
		s.Resume() // a paused process dies of SIGKILL too, but say so
	}
	for _, s := range extra {
		s.Close()
	}
	switch {
	case w.single != nil:
		w.single.Close()
	case w.sent != nil:
		w.sent.Close()
	case w.clus != nil:
		w.clus.Close()
	}
	return errors.Join(errs...)
}

// nodeClient returns a direct (proxy-less) client of one node that does not
// retry. Close it after use.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
}

// eachNode calls fn with a direct client of every running data node.
func (w *world) eachNode(ctx context.Context, fn func(nc *redis.Client) error) error {
	var errs []error
	for _, addr := range w.runningAddrs() {
		nc := nodeClient(addr)
		if err := fn(nc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		nc.Close()
	}
	return errors.Join(errs...)
}

// runningAddrs are the addresses of the running data nodes.
func (w *world) runningAddrs() []string {
	var addrs []string
	for _, s := range w.dataNodes() {
		if s.Running() {
			addrs = append(addrs, s.Addr)
		}
	}
	w.mu.Lock()
	for a, s := range w.extra {
		if s.Running() {
			addrs = append(addrs, a)
		}
	}
	w.mu.Unlock()
	return addrs
}

// server returns the data node at addr.
func (w *world) server(addr string) *redistest.Server {
	for _, s := range w.dataNodes() {
		if s.Addr == addr {
			return s
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.extra[addr]
}

// pids returns the process ids of every running process of the world
// (data nodes, sentinels, nodes started on demand).
func (w *world) pids() []int {
	procs := w.dataNodes()
	if w.sent != nil {
		procs = append(procs, w.sent.Sentinels...)
	}
	w.mu.Lock()
	for _, s := range w.extra {
		procs = append(procs, s)
	}
	w.mu.Unlock()
	var pids []int
	for _, s := range procs {
		if pid := s.Pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
