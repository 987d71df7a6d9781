// Package redistest starts real redis-server processes for tests: each on a
// free loopback port (never 6379), with persistence off, in a temporary
// directory, stopped when the test binary ends.
//
// Without a redis-server binary on PATH the tests that need one skip, except
// when CI=true: there a missing binary is a failure, so a CI run can never go
// green by skipping them.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string // "127.0.0.1:port"
	Port int
	Dir  string

	args []string
	env  []string // added to the environment of every start (StartEnv)
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Binary returns the path of redis-server, or "" when it is not installed.
func Binary() string {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	return p
}

// InCI reports whether the tests run in CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a redis-server on a free port with extra arguments (for
// example "--cluster-enabled", "yes") and waits until it answers PING.
func Start(extra ...string) (*Server, error) {
	return launch("redlimit-redis-", func(port int, dir string) ([]string, error) {
		return append(serverArgs(port, dir), extra...), nil
	})
}

// serverArgs are the arguments of every server Start starts.
func serverArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "no", "--enable-debug-command", "local",
	}
}

// launch starts redis-server on a free port in a new temporary directory,
// with the arguments args returns for them, trying a few ports in case one
// is taken between being found free and being bound.
func launch(dirPrefix string, args func(port int, dir string) ([]string, error)) (*Server, error) {
	return launchEnv(dirPrefix, nil, args)
}

// launchEnv is launch with env added to the server's environment.
func launchEnv(dirPrefix string, env []string, args func(port int, dir string) ([]string, error)) (*Server, error) {
	bin := Binary()
	if bin == "" {
		return nil, errors.New("redistest: redis-server not found on PATH")
	}
	var last error
	for range 10 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", dirPrefix)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, env: env}
		if s.args, last = args(port, dir); last == nil {
			if last = s.start(bin); last == nil {
				return s, nil
			}
		}
		os.RemoveAll(dir)
	}
	return nil, last
}

func (s *Server) start(bin string) error { return s.startArgs(bin, s.args) }

func (s *Server) startArgs(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	out, err := os.Create(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	go func() { cmd.Wait(); out.Close() }()
	if err := s.waitReady(5 * time.Second); err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("redistest: redis-server on %s did not start: %w\n%s", s.Addr, err, s.Log())
	}
	return nil
}

func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// Client returns a new go-redis client for s, closed when t ends. It does
// not retry (a retried script would run twice and skew exact counts) and
// waits long for replies (the machine running the tests may be busy).
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// Stop kills the server (SIGKILL: a crash, nothing saved).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd = nil
	}
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() error {
	s.Stop()
	var err error
	for range 20 { // the port may take a moment to be released
		if err = s.start(Binary()); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Pause stops the process (SIGSTOP): the port accepts connections but
// nothing answers, like a Redis stuck in a slow command.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.Dir)
}

// Shared is the server started by [Main], or nil when none is available.
var Shared *Server

// Main runs the tests of a package with a shared redis-server in Shared. Call
// it from TestMain: os.Exit(redistest.Main(m)). Without redis-server it runs
// the tests with Shared nil (they skip), unless CI=true: then it fails.
func Main(m *testing.M) int {
	if Binary() == "" {
		if InCI() {
			fmt.Fprintln(os.Stderr, "FAIL: CI=true but redis-server is not installed (.ci/run installs it)")
			return 1
		}
		fmt.Fprintln(os.Stderr, "redistest: redis-server not found; tests that need it will skip")
		return m.Run()
	}
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	Shared = s
	code := m.Run()
	s.Close()
	return code
}

// Require returns Shared, skipping t when no redis-server is available
// (outside CI; in CI Main has already failed).
func Require(t testing.TB) *Server {
	t.Helper()
	if Shared == nil {
		t.Skip("redis-server not available")
	}
	return Shared
}

// Prefix returns a key prefix unique to t, so tests share one server
// without flushing it.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("t%d:%s:", time.Now().UnixNano()%1e9, t.Name())
}
