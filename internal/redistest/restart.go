package redistest

import (
	"strconv"
	"time"
)

// StartEnv is [Start] with env ("NAME=value" pairs) added to the server's
// environment, on this start and every restart: for example LD_PRELOAD and
// FAKETIME to run it under libfaketime.
func StartEnv(env []string, extra ...string) (*Server, error) {
	return launchEnv("redlimit-redis-", env, func(port int, dir string) ([]string, error) {
		return append(serverArgs(port, dir), extra...), nil
	})
}

// StartClusterNode starts one empty cluster-enabled node configured as the
// nodes of [StartCluster] are, with env added to its environment, ready to
// be met (CLUSTER MEET) by a running cluster.
func StartClusterNode(env []string) (*Server, error) { return startNodeEnv(env) }

// Pid returns the process id of the running server, or 0 when it is not
// running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// RestartWith is [Server.Restart] with extra arguments after the ones the
// server was started with (a later argument overrides an earlier one: for
// example "--appendonly", "yes" to load the append-only file written
// before a crash, or "--replicaof", host, port), for this start only.
func (s *Server) RestartWith(extra ...string) error {
	s.Stop()
	args := append(append([]string(nil), s.args...), extra...)
	var err error
	for range 20 { // the port may take a moment to be released
		if err = s.startArgs(Binary(), args); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// ReplicaOfArgs returns the arguments that make a server a replica of
// master: "--replicaof", "127.0.0.1", its port.
func ReplicaOfArgs(master *Server) []string {
	return []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}
}
