package redistest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// clusterWithLostNode starts a cluster of 3 masters and a fourth node,
// listed last in its Nodes, that no node knows (as after a MEET
// handshake that timed out), and returns both.
func clusterWithLostNode(t *testing.T) (c *Cluster, lost *Server) {
	t.Helper()
	RequireCluster(t)
	t.Parallel()
	c, err := StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if lost, err = startNode(); err != nil {
		t.Fatal(err)
	}
	c.Nodes = append(c.Nodes, lost)
	return c, lost
}

// TestClusterMeetsMissing: a node that no node of the cluster knows (as
// after a MEET handshake that timed out) keeps the cluster from being
// healthy until waitMet makes the others meet it.
func TestClusterMeetsMissing(t *testing.T) {
	c, _ := clusterWithLostNode(t)
	if err := c.healthy(); err == nil || !strings.Contains(err.Error(), "cluster_known_nodes") {
		t.Fatalf("healthy() = %v with a node nobody knows, want a cluster_known_nodes error", err)
	}
	if err := c.waitMet(15*time.Second, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestClusterNotFormed: a cluster that does not form reports a *notFormed
// whose diagnosis shows, for every node, what it knows and its log: here
// a node nobody meets, which knows only itself.
func TestClusterNotFormed(t *testing.T) {
	c, lost := clusterWithLostNode(t)
	err := c.form(300*time.Millisecond, time.Now().Add(time.Hour)) // never heals
	var nf *notFormed
	if !errors.As(err, &nf) {
		t.Fatalf("form() = %v, want a *notFormed", err)
	}
	if !strings.Contains(nf.Error(), "cluster_known_nodes") {
		t.Errorf("error %q does not say what was not reached", nf.err)
	}
	sections := strings.Split(nf.diagnosis, "node 127.0.0.1:")[1:]
	if len(sections) != len(c.Nodes) {
		t.Fatalf("diagnosis has %d node sections, want %d:\n%s", len(sections), len(c.Nodes), nf.diagnosis)
	}
	for i, sec := range sections {
		known := strings.Count(sec, "connected")
		want := 3
		if c.Nodes[i] == lost {
			want = 1
		}
		if known != want || !strings.Contains(sec, "myself") {
			t.Errorf("node %s: %d connected nodes listed (want %d) in\n%s", c.Nodes[i].Addr, known, want, sec)
		}
		if !logLine.MatchString(sec) {
			t.Errorf("node %s: no log lines in\n%s", c.Nodes[i].Addr, sec)
		}
	}
}

// logLine matches a redis-server log line as diagnose quotes it
// ("  | 4242:M 07 Dec 2026 14:10:00.123 * ...").
var logLine = regexp.MustCompile(`(?m)^  \| \d+:[MSCX] `)

// TestReportRetry: a retried cluster's error reaches the file RetriesEnv
// names, appended, one report after another.
func TestReportRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retries.log")
	t.Setenv(RetriesEnv, path)
	for _, what := range []string{"first", "second"} {
		reportRetry(&notFormed{err: errors.New(what + " attempt"), diagnosis: "node 127.0.0.1:1 (running true):"})
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Count(got, "redistest: starting the cluster again") != 2 || !strings.Contains(got, "first attempt\nnode 127.0.0.1:1") ||
		strings.Index(got, "first attempt") > strings.Index(got, "second attempt") {
		t.Errorf("%s holds\n%s\nwant both reports, in order, each with its diagnosis", path, got)
	}
}

// TestClusterCreateHangs: a redis-cli --cluster create that does not
// return (as when it waits for a join that a lost MEET handshake never
// completes) fails the attempt at createTimeout as a *notFormed, which
// StartCluster starts again, with the nodes' diagnosis; the nodes are
// stopped. Before, the attempt waited for redis-cli forever, and the test
// that asked for a cluster hung until go test's -timeout.
func TestClusterCreateHangs(t *testing.T) {
	RequireCluster(t)
	cli := filepath.Join(t.TempDir(), "redis-cli")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho Waiting for the cluster to join\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { createTimeout = d }(createTimeout)
	createTimeout = time.Second
	start := time.Now()
	c, err := startCluster(cli, 3, 0)
	took := time.Since(start)
	var nf *notFormed
	if !errors.As(err, &nf) || c != nil {
		t.Fatalf("startCluster with a redis-cli that never returns = %v, %v after %v; want a *notFormed", c, err, took)
	}
	if !strings.Contains(nf.err.Error(), "did not return within 1s") || !strings.Contains(nf.err.Error(), "Waiting for the cluster to join") {
		t.Errorf("error %q does not say that redis-cli did not return, with its output", nf.err)
	}
	nodes := regexp.MustCompile(`node (127\.0\.0\.1:\d+) \(running true\)`).FindAllStringSubmatch(nf.diagnosis, -1)
	if len(nodes) != 3 {
		t.Fatalf("diagnosis lists %d running nodes, want the 3 started:\n%s", len(nodes), nf.diagnosis)
	}
	for _, n := range nodes {
		// killed (SIGKILL) when the attempt failed: gone once the kernel
		// has reaped it
		err := poll(10*time.Second, "node "+n[1]+" still accepts connections after the failed attempt", func() error {
			conn, err := net.DialTimeout("tcp", n[1], time.Second)
			if err != nil {
				return nil
			}
			conn.Close()
			return errors.New("accepted")
		})
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("the attempt failed %v after it started (createTimeout 1s)", took.Round(time.Millisecond))
}
