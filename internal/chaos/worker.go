package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/chaos/world"
)

// WorkerEnv is the environment variable that makes the chaos binary a
// worker: it holds the worker's configuration (JSON).
const WorkerEnv = "REDLIMIT_CHAOS_WORKER"

// workerConfig is what a worker process is told.
type workerConfig struct {
	Instance instanceConfig `json:"instance"`
	Client   clientSpec     `json:"client"`
}

// clientSpec describes an instance's client so that another process can
// build its own: a single node's address, or a cluster's seed addresses,
// and the fault proxy in front of each data node.
type clientSpec struct {
	Addr         string            `json:"addr,omitempty"`
	ClusterAddrs []string          `json:"cluster,omitempty"`
	Proxies      map[string]string `json:"proxies,omitempty"` // a node's address → its proxy's
	PoolSize     int               `json:"pool"`
	ReadTimeout  time.Duration     `json:"read"`
	WriteTimeout time.Duration     `json:"write"`
	MaxRetries   int               `json:"retries"`
}

// specOf describes c, a client of the world w. The world's clients reach
// each node through its proxy by their Dialer: specOf dials every data
// node with it and notes where the connection went. A Sentinel failover
// client cannot be described (its options hide the sentinels): such worlds
// run their instances in process.
func specOf(ctx context.Context, c redis.UniversalClient, w world.World, o world.ClientOptions) (clientSpec, error) {
	s := clientSpec{PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: o.MaxRetries}
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	switch x := c.(type) {
	case *redis.Client:
		if x.Options().Addr == "FailoverClient" {
			return s, fmt.Errorf("%w: a Sentinel failover client", errNoSpec)
		}
		s.Addr, dial = x.Options().Addr, x.Options().Dialer
	case *redis.ClusterClient:
		s.ClusterAddrs, dial = x.Options().Addrs, x.Options().Dialer
	default:
		return s, fmt.Errorf("%w: %T", errNoSpec, c)
	}
	if dial != nil {
		s.Proxies = map[string]string{}
		for _, a := range w.Addrs() {
			conn, err := dial(ctx, "tcp", a)
			if err != nil {
				continue
			}
			s.Proxies[a] = conn.RemoteAddr().String()
			conn.Close()
		}
	}
	return s, nil
}

// errNoSpec reports a client a worker process cannot rebuild.
var errNoSpec = errors.New("chaos: a worker process cannot rebuild this client")

func (s clientSpec) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p, ok := s.Proxies[addr]; ok {
		addr = p
	}
	d := net.Dialer{Timeout: 250 * time.Millisecond}
	return d.DialContext(ctx, network, addr)
}

func (s clientSpec) client() redis.UniversalClient {
	if len(s.ClusterAddrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.ClusterAddrs, Dialer: s.dial, PoolSize: s.PoolSize,
			ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout, MaxRetries: s.MaxRetries})
	}
	return redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.dial, PoolSize: s.PoolSize,
		ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout, MaxRetries: s.MaxRetries})
}

// worker is an instance running in a process of its own.
type worker struct {
	cfg   instanceConfig
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once its stdout is read to the end
	acks  chan string   // the worker's answers to quiesce and probe
}

// startWorker starts a worker process for cfg and merges its records into h.
func startWorker(ctx context.Context, o Options, w world.World, cfg instanceConfig, h *History) (*worker, error) {
	c := w.NewClient(clientOptions(o))
	spec, err := specOf(ctx, c, w, clientOptions(o))
	c.Close()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(workerConfig{Instance: cfg, Client: spec})
	if err != nil {
		return nil, err
	}
	argv := o.Exe
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		argv = []string{exe}
	}
	cmd := exec.CommandContext(context.WithoutCancel(ctx), argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	wk := &worker{cfg: cfg, cmd: cmd, stdin: stdin, done: make(chan struct{}), acks: make(chan string, 4)}
	go func() {
		defer close(wk.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var r Record
			switch {
			case json.Unmarshal(sc.Bytes(), &r) != nil:
			case r.Kind == KindPhase && (r.Phase == ackQuiesced || r.Phase == ackProbed):
				wk.acks <- r.Phase
			default:
				h.Add(r)
			}
		}
	}()
	return wk, nil
}

// Worker commands (lines on its stdin) and their acknowledgements.
const (
	cmdQuiesce  = "quiesce"
	cmdProbe    = "probe"
	ackQuiesced = "quiesced"
	ackProbed   = "probed"
)

// command sends cmd and waits for want (or the worker's end).
func (wk *worker) command(cmd, want string) {
	if _, err := io.WriteString(wk.stdin, cmd+"\n"); err != nil {
		return
	}
	for {
		select {
		case a := <-wk.acks:
			if a == want {
				return
			}
		case <-wk.done:
			return
		case <-time.After(30 * time.Second):
			return
		}
	}
}

func (wk *worker) quiesce()                { wk.command(cmdQuiesce, ackQuiesced) }
func (wk *worker) probe(_ context.Context) { wk.command(cmdProbe, ackProbed) }

// stop closes the worker's stdin: it lets its operations in flight
// complete, closes its engines and exits.
func (wk *worker) stop() {
	_ = wk.stdin.Close()
	select {
	case <-wk.done:
	case <-time.After(10 * time.Second):
		_ = wk.cmd.Process.Kill()
		<-wk.done
	}
	_ = wk.cmd.Wait()
}

// crash kills the worker (SIGKILL): slots held, refunds pending.
func (wk *worker) crash() {
	_ = wk.cmd.Process.Kill()
	<-wk.done
	_ = wk.cmd.Wait()
}

// IsWorker reports whether this process was started as a worker.
func IsWorker() bool { return os.Getenv(WorkerEnv) != "" }

// Worker runs this process as a worker: one application instance, its
// records as JSON lines on out, until in reaches its end (the parent
// closed it, or died).
func Worker(in io.Reader, out io.Writer) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &cfg); err != nil {
		return fmt.Errorf("chaos: worker configuration: %w", err)
	}
	// Each record is one write on the pipe: what was written survives the
	// worker's SIGKILL.
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	var encErr error
	emit := func(r Record) {
		mu.Lock()
		defer mu.Unlock()
		if encErr == nil {
			encErr = enc.Encode(r)
		}
	}
	base := cfg.Instance.Base
	clock := func() int64 { return time.Now().UnixMicro() - base }
	inst, err := newInstance(cfg.Instance, cfg.Client.client(), nil, clock, emit)
	if err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go watchStalls(wctx, cfg.Instance.ID, clock, emit)
	inst.start(context.Background())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case cmdQuiesce:
			inst.quiesce()
			emit(Record{Kind: KindPhase, Phase: ackQuiesced, Inst: cfg.Instance.ID})
		case cmdProbe:
			inst.probe(context.Background())
			emit(Record{Kind: KindPhase, Phase: ackProbed, Inst: cfg.Instance.ID})
		}
	}
	inst.stop()
	mu.Lock()
	defer mu.Unlock()
	return encErr
}
