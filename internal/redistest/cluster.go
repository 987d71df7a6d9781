package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is the cluster-node-timeout of the clusters
// [StartCluster] starts: a master that stops answering for this long is
// failed over to one of its replicas (about a second later).
const ClusterNodeTimeout = time.Second

// Cluster is a Redis Cluster of redis-server processes on loopback ports,
// started by [StartCluster].
type Cluster struct {
	// Nodes are every node, masters and replicas, in the order they were
	// started. Roles change with failovers: ask [Cluster.Masters].
	Nodes []*Server
}

// ClusterCLI returns the path of redis-cli, or "" when it is not installed.
// StartCluster needs it (redis-cli --cluster create).
func ClusterCLI() string {
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		return ""
	}
	return p
}

// RequireCluster skips t when redis-server or redis-cli is missing, and
// fails it instead when CI=true.
func RequireCluster(t testing.TB) {
	t.Helper()
	if Binary() != "" && ClusterCLI() != "" {
		return
	}
	if InCI() {
		t.Fatal("CI=true but redis-server or redis-cli is not installed")
	}
	t.Skip("redis-server or redis-cli not available")
}

// StartCluster starts masters × (1 + replicasPerMaster) nodes, joins them
// with redis-cli --cluster create, and waits until every node reports
// cluster_state:ok with all 16384 slots assigned and every replica is in
// sync with its master. Close it when done.
//
// A cluster that does not form within 30 s is closed and started once
// more on fresh nodes, and the first attempt's diagnosis (each node's
// CLUSTER NODES and the end of its log, see [Cluster.diagnose]) is
// written to standard error and to the file [RetriesEnv] names, and kept
// with the second attempt's error. Forming a cluster is the harness's
// setup, not what a test asserts: a MEET handshake lost on a loaded
// machine should not fail a test of the store.
func StartCluster(masters, replicasPerMaster int) (*Cluster, error) {
	if masters < 3 {
		return nil, errors.New("redistest: a cluster needs at least 3 masters")
	}
	if replicasPerMaster < 0 {
		return nil, errors.New("redistest: replicasPerMaster must be >= 0")
	}
	cli := ClusterCLI()
	if cli == "" {
		return nil, errors.New("redistest: redis-cli not found on PATH")
	}
	c, err := startCluster(cli, masters, replicasPerMaster)
	var nf *notFormed
	if !errors.As(err, &nf) {
		return c, err
	}
	reportRetry(err)
	if c, err = startCluster(cli, masters, replicasPerMaster); err != nil {
		return nil, fmt.Errorf("%w\n(a first attempt had failed too: %v)", err, nf)
	}
	return c, nil
}

// RetriesEnv names the environment variable that, when set to a file's
// path, has StartCluster append to that file the error and diagnosis of
// each attempt it starts again: go test shows a passing package's
// standard error only with -v, and make test prints the file at its end.
const RetriesEnv = "REDISTEST_RETRIES"

// reportRetry writes err, a first attempt's *notFormed, to standard error
// and to the file RetriesEnv names, if any.
func reportRetry(err error) {
	msg := fmt.Sprintf("redistest: starting the cluster again on fresh nodes (%s): %v\n", time.Now().UTC().Format(time.RFC3339), err)
	fmt.Fprint(os.Stderr, msg)
	if path := os.Getenv(RetriesEnv); path != "" {
		if f, ferr := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
			f.WriteString(msg)
			f.Close()
		}
	}
}

// notFormed is the error of a cluster whose nodes started but did not
// form a healthy cluster, with the nodes' diagnosis.
type notFormed struct {
	err       error
	diagnosis string
}

func (e *notFormed) Error() string { return e.err.Error() + "\n" + e.diagnosis }
func (e *notFormed) Unwrap() error { return e.err }

// createTimeout bounds redis-cli --cluster create. After its MEETs it
// waits until every node agrees on the configuration; when a handshake
// was lost (a loaded machine) that never happens, and redis-cli, which
// only reports the nodes it cannot reach, waits forever. Past it, the
// attempt is a *notFormed: StartCluster starts again on fresh nodes.
var createTimeout = 30 * time.Second

// startCluster is one attempt of StartCluster; an error of the cluster's
// forming (not of its nodes' starting) is a *notFormed.
func startCluster(cli string, masters, replicasPerMaster int) (*Cluster, error) {
	// start the nodes concurrently: each waits for its PING
	c := &Cluster{Nodes: make([]*Server, masters*(1+replicasPerMaster))}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Go(func() { c.Nodes[i], errs[i] = startNode() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); ctx.Err() != nil {
		nf := &notFormed{err: fmt.Errorf("redistest: redis-cli --cluster create did not return within %v:\n%s", createTimeout, out), diagnosis: c.diagnose()}
		c.Close()
		return nil, nf
	} else if err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w\n%s", err, out)
	}
	// redis-cli meets every node through the first one. A handshake that
	// does not complete within the node timeout (a loaded machine) is
	// dropped, and a node that no other node knows then stays unknown for
	// good: from two node timeouts on, nodes meet the ones they miss.
	if err := c.form(30*time.Second, time.Now().Add(2*ClusterNodeTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	// FLUSHALL (of an empty node) is a write every master may take,
	// whatever slots it serves.
	masterNodes, err := c.Masters(context.Background())
	if err == nil {
		for _, m := range masterNodes {
			if err = waitStreaming(m, replicasPerMaster, "FLUSHALL"); err != nil {
				break
			}
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// maxNodePort is the highest port a cluster node can listen on: its
// cluster bus listens 10000 above it.
const maxNodePort = 65535 - 10000

// startNode starts a cluster node on a free port at most maxNodePort.
func startNode() (*Server, error) { return startNodeEnv(nil) }

// startNodeEnv is startNode with env added to the node's environment.
func startNodeEnv(env []string) (*Server, error) {
	return launchEnv("redlimit-redis-", env, func(port int, dir string) ([]string, error) {
		if port > maxNodePort {
			return nil, fmt.Errorf("redistest: port %d: a cluster node's bus port would be above 65535", port)
		}
		return append(serverArgs(port, dir),
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			// the tests fail masters over on purpose: a replica may be
			// promoted however long ago it last heard from its master
			"--cluster-replica-validity-factor", "0",
			// replicas sync at once, not after the default 5 s wait for more
			"--repl-diskless-sync-delay", "0",
		), nil
	})
}

// waitMet waits as WaitHealthy does and, from heal on, makes the nodes
// that do not know every node meet the ones they miss (meetMissing).
func (c *Cluster) waitMet(timeout time.Duration, heal time.Time) error {
	return poll(timeout, "cluster not healthy", func() error {
		err := c.healthy()
		if err != nil && time.Now().After(heal) {
			c.meetMissing()
		}
		return err
	})
}

// meetMissing makes every running node meet the running nodes of c that
// its CLUSTER NODES does not list (a node in handshake is listed).
func (c *Cluster) meetMissing() {
	c.eachRunning(func(ctx context.Context, s *Server, nc *redis.Client) error {
		nodes, err := nc.ClusterNodes(ctx).Result()
		if err != nil {
			return nil // the next node may answer
		}
		known := map[string]bool{}
		for _, line := range strings.Split(nodes, "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				addr, _, _ := strings.Cut(f[1], "@")
				known[addr] = true
			}
		}
		for _, o := range c.Nodes {
			if o != s && o.Running() && !known[o.Addr] {
				nc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(o.Port))
			}
		}
		return nil
	})
}

// form waits as waitMet does and returns its error as a *notFormed, with
// the nodes' diagnosis.
func (c *Cluster) form(timeout time.Duration, heal time.Time) error {
	if err := c.waitMet(timeout, heal); err != nil {
		return &notFormed{err: err, diagnosis: c.diagnose()}
	}
	return nil
}

// diagnose describes each node of c for an error: whether it runs, its
// CLUSTER NODES (one line per node it knows, with its flags and link
// state) and the last lines of its log.
func (c *Cluster) diagnose() string {
	var b strings.Builder
	for _, s := range c.Nodes {
		fmt.Fprintf(&b, "node %s (running %v):\n", s.Addr, s.Running())
		nc := s.NodeClient()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		nodes, err := nc.ClusterNodes(ctx).Result()
		cancel()
		nc.Close()
		if err != nil {
			nodes = "CLUSTER NODES: " + err.Error()
		}
		for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
			b.WriteString("  " + line + "\n")
		}
		log := strings.Split(strings.TrimSpace(s.Log()), "\n")
		for _, line := range log[max(len(log)-diagnoseLogLines, 0):] {
			b.WriteString("  | " + line + "\n")
		}
	}
	return b.String()
}

// diagnoseLogLines is how many of a node's last log lines diagnose keeps.
const diagnoseLogLines = 12

// eachRunning calls fn with a client of each running node, in order,
// until fn returns an error, which it returns. The calls share a second.
func (c *Cluster) eachRunning(fn func(ctx context.Context, s *Server, nc *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		nc := s.NodeClient()
		err := fn(ctx, s, nc)
		nc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a new cluster client, closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// NodeClient returns a plain client for one node, for commands addressed
// to that node (CLUSTER FAILOVER, INFO, ...). Close it after use.
func (s *Server) NodeClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
}

// Role returns "master" or "slave" as the node itself reports it (ROLE).
func (s *Server) Role(ctx context.Context) (string, error) {
	nc := s.NodeClient()
	defer nc.Close()
	v, err := nc.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("redistest: empty ROLE reply")
	}
	role, _ := v[0].(string)
	return role, nil
}

// Masters returns the running nodes that currently are masters.
func (c *Cluster) Masters(ctx context.Context) ([]*Server, error) { return c.withRole(ctx, "master") }

// Replicas returns the running nodes that currently are replicas.
func (c *Cluster) Replicas(ctx context.Context) ([]*Server, error) { return c.withRole(ctx, "slave") }

func (c *Cluster) withRole(ctx context.Context, want string) ([]*Server, error) {
	var out []*Server
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		role, err := s.Role(ctx)
		if err != nil {
			return nil, err
		}
		if role == want {
			out = append(out, s)
		}
	}
	return out, nil
}

// ReplicaOf returns a running replica of master.
func (c *Cluster) ReplicaOf(ctx context.Context, master *Server) (*Server, error) {
	for _, s := range c.Nodes {
		if s == master || !s.Running() {
			continue
		}
		nc := s.NodeClient()
		info, err := nc.Info(ctx, "replication").Result()
		nc.Close()
		if err != nil {
			return nil, err
		}
		if infoField(info, "role") == "slave" && infoField(info, "master_port") == strconv.Itoa(master.Port) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: no running replica of %s", master.Addr)
}

// WaitHealthy waits until every running node reports cluster_state:ok,
// all 16384 slots assigned and ok, and knows as many nodes as the cluster
// has; and every running replica's link to its master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	return poll(timeout, "cluster not healthy", c.healthy)
}

// poll calls check every 25ms until it returns nil or timeout has passed,
// then returns its last error, saying what was not reached.
func poll(timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		last := check()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %s after %v: %w", what, timeout, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	return c.eachRunning(func(ctx context.Context, s *Server, nc *redis.Client) error {
		info, err := nc.ClusterInfo(ctx).Result()
		var repl string
		if err == nil {
			repl, err = nc.Info(ctx, "replication").Result()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
		for field, want := range map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    "16384",
			"cluster_known_nodes": strconv.Itoa(len(c.Nodes)),
		} {
			if got := infoField(info, field); got != want {
				return fmt.Errorf("%s: %s:%s, want %s", s.Addr, field, got, want)
			}
		}
		if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
			return fmt.Errorf("%s: replica link %s", s.Addr, infoField(repl, "master_link_status"))
		}
		return nil
	})
}

// ForEachMaster calls fn with a client for every running master.
func (c *Cluster) ForEachMaster(ctx context.Context, fn func(*redis.Client) error) error {
	ms, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	for _, s := range ms {
		nc := s.NodeClient()
		err := fn(nc)
		nc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		if s != nil {
			s.Close()
		}
	}
}

// infoField returns the value of "field:value" in an INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Running reports whether s has been started and not stopped since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
