// Package world starts the deployments the chaos harness runs against (one
// redis-server, Sentinel, Redis Cluster, all on 127.0.0.1 free ports, each
// data node behind an in-process fault proxy) and injects faults into them
// on demand. It decides nothing about when: the harness's seeded scheduler
// calls [World.Inject] at the instants it drew.
//
// This file is the contract between the scheduler/checker (package chaos)
// and the topologies and faults (this package).
package world

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topologies the harness knows.
const (
	Single   = "single"
	Sentinel = "sentinel"
	Cluster  = "cluster"
)

// Fault kinds. Not every kind applies to every topology: [World.Kinds] says
// which do.
const (
	Kill          = "kill"           // SIGKILL a data node, restart it (no persistence)
	KillAOF       = "kill-aof"       // SIGKILL and restart a node running appendonly yes / everysec
	Pause         = "pause"          // SIGSTOP a data node longer than the engine's Timeout, then SIGCONT
	Failover      = "failover"       // SENTINEL FAILOVER / CLUSTER FAILOVER on a replica
	KillMaster    = "kill-master"    // SIGKILL a master; its replica is promoted (Sentinel, Cluster)
	Migrate       = "migrate"        // migrate the slots of live keys under load (MIGRATING/IMPORTING, ASK, SETSLOT NODE)
	ScriptFlush   = "script-flush"   // SCRIPT FLUSH on every node
	ClientKill    = "client-kill"    // CLIENT KILL TYPE normal on a node
	MaxMemory     = "maxmemory"      // maxmemory pressure (noeviction: writes refused) for a while
	Latency       = "latency"        // the proxy adds latency to a node's replies
	Slow          = "slow"           // the proxy of one master delays its replies by a few ms: its slots answer late, their compensations arrive late
	Stall         = "stall"          // the proxy stalls a node's connections for a while
	Drop          = "drop"           // the proxy closes connections, some in the middle of a reply
	Reset         = "reset"          // the proxy resets (RST) connections
	ClockBehind   = "clock-behind"   // a replica whose clock runs behind (faketime) becomes master, then fails back
	ClockAhead    = "clock-ahead"    // the same with a clock ahead
	InstanceCrash = "instance-crash" // an application instance dies with slots held and refunds pending (the harness's, not the world's)
)

// Event is one fault as injected: what, where, when, and when it healed.
type Event struct {
	Kind   string
	Target string // a node address, "all", or an instance name
	Start  time.Time
	End    time.Time // zero until healed
	Detail string    // e.g. "skew -3s", "latency 40ms", "slots 100-200 → 127.0.0.1:7002"
	Err    string    // an injection that failed (counted, never hidden)
	// Slots are, on a cluster, the hash slot ranges (first, last) of the
	// target's shard (its master and replicas) when the fault was
	// injected, or those a migration moves: the keys whose state the fault
	// can touch. Nil when the fault is not on one shard (a single node,
	// Sentinel, "all", an instance), or when no node answered.
	Slots [][2]int
	// Hold is how long the fault should stay in place (a pause's PauseFor,
	// a stall's or a skewed master's duration); 0 for a fault held as
	// long as the caller likes. A heal called earlier waits until
	// Start+Hold before undoing the fault.
	Hold time.Duration
}

// World is a running deployment.
type World interface {
	// Topology is Single, Sentinel or Cluster.
	Topology() string
	// Kinds lists the fault kinds this world can inject.
	Kinds() []string
	// NewClient returns a go-redis client for one application instance,
	// reaching the data nodes through the fault proxies (Sentinel: a
	// failover client; Cluster: a cluster client). The caller closes it.
	NewClient(opts ClientOptions) redis.UniversalClient
	// Addrs are the data nodes' real (proxy-less) addresses, for tools.
	Addrs() []string
	// Inject injects one fault of kind, choosing its target and parameters
	// with rng, and returns once it is in place; heal undoes it (restart,
	// SIGCONT, fail back, remove latency...) and returns once the world
	// serves again (or ctx ends). A fault that heals by itself (SCRIPT
	// FLUSH) returns a heal that does nothing.
	Inject(ctx context.Context, kind string, rng *rand.Rand) (ev Event, heal func(context.Context) error, err error)
	// Healthy waits until every slot/master answers writes again.
	Healthy(ctx context.Context) error
	// Close stops every process and proxy the world started, also after a
	// failure; it is safe to call twice.
	Close() error
}

// ClientOptions shape an instance's client.
type ClientOptions struct {
	PoolSize     int
	ReadTimeout  time.Duration // 0: go-redis's default
	WriteTimeout time.Duration
	// MaxRetries is go-redis's: 0 retries a failed command 3 times, -1
	// never (a retried script may run twice).
	MaxRetries int
}
