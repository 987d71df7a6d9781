package redistest

import (
	"strings"
	"testing"
	"time"
)

// TestClusterMeetsMissing: a node that no node of the cluster knows (as
// after a MEET handshake that timed out) keeps the cluster from being
// healthy until waitMet makes the others meet it.
func TestClusterMeetsMissing(t *testing.T) {
	RequireCluster(t)
	t.Parallel()
	c, err := StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	lost, err := startNode()
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes = append(c.Nodes, lost)
	if err := c.healthy(); err == nil || !strings.Contains(err.Error(), "cluster_known_nodes") {
		t.Fatalf("healthy() = %v with a node nobody knows, want a cluster_known_nodes error", err)
	}
	if err := c.waitMet(15*time.Second, time.Now()); err != nil {
		t.Fatal(err)
	}
}
