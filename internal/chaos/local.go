package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/chaos/world"
	"github.com/redlimit/redlimit/internal/redistest"
)

// local is the smallest World: one redis-server, no proxy, and the faults
// a lone process can take without help (SIGKILL and restart, SIGSTOP and
// SIGCONT, SCRIPT FLUSH, CLIENT KILL). It serves the harness until a
// richer world is given (Options.StartWorld), and its own tests.
type local struct {
	srv *redistest.Server

	mu     sync.Mutex
	closed bool
}

var _ world.World = (*local)(nil)

// startLocal starts a local world; its topology is world.Single.
func startLocal(topology string) (world.World, error) {
	if topology != world.Single {
		return nil, fmt.Errorf("chaos: topology %q: this build runs only %q", topology, world.Single)
	}
	if redistest.Binary() == "" {
		return nil, errors.New("chaos: redis-server is not installed")
	}
	srv, err := redistest.Start()
	if err != nil {
		return nil, err
	}
	return &local{srv: srv}, nil
}

func (l *local) Topology() string { return world.Single }

func (l *local) Kinds() []string {
	return []string{world.Kill, world.Pause, world.ScriptFlush, world.ClientKill}
}

func (l *local) NewClient(opts world.ClientOptions) redis.UniversalClient {
	return redis.NewClient(&redis.Options{
		Addr:                  l.srv.Addr,
		PoolSize:              opts.PoolSize,
		ReadTimeout:           opts.ReadTimeout,
		WriteTimeout:          opts.WriteTimeout,
		DialTimeout:           250 * time.Millisecond,
		MaxRetries:            -1, // a decide script sent again charges twice
		ContextTimeoutEnabled: true,
	})
}

func (l *local) Addrs() []string { return []string{l.srv.Addr} }

func (l *local) Inject(ctx context.Context, kind string, rng *rand.Rand) (world.Event, func(context.Context) error, error) {
	ev := world.Event{Kind: kind, Target: l.srv.Addr, Start: time.Now()}
	nop := func(context.Context) error { return nil }
	switch kind {
	case world.Kill:
		l.srv.Stop()
		return ev, func(ctx context.Context) error {
			if err := l.srv.Restart(); err != nil {
				return err
			}
			return l.Healthy(ctx)
		}, nil
	case world.Pause:
		if err := l.srv.Pause(); err != nil {
			return ev, nop, err
		}
		return ev, func(ctx context.Context) error {
			if err := l.srv.Resume(); err != nil {
				return err
			}
			return l.Healthy(ctx)
		}, nil
	case world.ScriptFlush, world.ClientKill:
		c := l.srv.NodeClient()
		defer c.Close()
		var err error
		if kind == world.ScriptFlush {
			err = c.ScriptFlush(ctx).Err()
		} else {
			err = c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err()
		}
		return ev, nop, err
	}
	return ev, nop, fmt.Errorf("chaos: the local world cannot inject %q", kind)
}

func (l *local) Healthy(ctx context.Context) error {
	c := l.srv.NodeClient()
	defer c.Close()
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (l *local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		_ = l.srv.Resume() // a paused server would not die of SIGKILL until continued on some kernels
		l.srv.Close()
	}
	return nil
}
