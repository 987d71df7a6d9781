package world

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

// FaketimeEnv returns the environment that runs a redis-server under
// libfaketime with its wall clock offset by offset (negative: behind),
// running at normal speed; the monotonic clock is left alone. Debian's
// redis-server (jemalloc) hangs under libfaketime alone on "Unexpected
// recursive calls to clock_gettime()": glibc's libc_malloc_debug is
// preloaded first, which avoids it. It fails when either library is not
// installed (Debian: apt-get install faketime).
func FaketimeEnv(offset time.Duration) ([]string, error) {
	ft, err := findLib("faketime/libfaketime.so.1")
	if err != nil {
		return nil, err
	}
	md, err := findLib("libc_malloc_debug.so.0")
	if err != nil {
		return nil, err
	}
	sign := "+" // libfaketime reads an unsigned offset as an absolute date
	if offset < 0 {
		sign = ""
	}
	return []string{
		"LD_PRELOAD=" + md + " " + ft,
		"FAKETIME=" + sign + strconv.FormatFloat(offset.Seconds(), 'f', 3, 64) + "s",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}

// findLib looks for a shared library under the usual library directories.
func findLib(name string) (string, error) {
	for _, pattern := range []string{"/usr/lib/*/", "/lib/*/", "/usr/lib/", "/usr/local/lib/", "/lib64/", "/usr/lib64/"} {
		if m, _ := filepath.Glob(pattern + name); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("world: %s not found (install faketime)", name)
}

// drawSkew draws a clock offset from Options.Skews, negative when behind.
func (w *world) drawSkew(ahead bool, rng *rand.Rand) time.Duration {
	d := w.opts.Skews[rng.IntN(len(w.opts.Skews))]
	if d < 0 {
		d = -d
	}
	if !ahead {
		d = -d
	}
	return d
}

// startSkewed starts a node whose clock is offset by skew, behind a proxy,
// with extra arguments; Close removes it with the world.
func (w *world) startSkewed(skew time.Duration, cluster bool, extra ...string) (*redistest.Server, error) {
	env, err := FaketimeEnv(skew)
	if err != nil {
		return nil, err
	}
	var s *redistest.Server
	if cluster {
		s, err = redistest.StartClusterNode(env)
	} else {
		args := append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
		if w.opts.AOF {
			args = append(args, aofArgs...)
		}
		s, err = redistest.StartEnv(env, args...)
	}
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.extra[s.Addr] = s
	}
	w.mu.Unlock()
	if closed {
		s.Close()
		return nil, errors.New("world: closed")
	}
	if _, err := w.addProxy(s.Addr); err != nil {
		return s, err
	}
	return s, nil
}

// removeSkewed stops a node startSkewed started, and its proxy.
func (w *world) removeSkewed(s *redistest.Server) {
	w.mu.Lock()
	delete(w.extra, s.Addr)
	p := w.proxies[s.Addr]
	delete(w.proxies, s.Addr)
	w.mu.Unlock()
	if p != nil {
		p.close()
	}
	s.Close()
}

// injectClock starts a node whose clock is behind (or ahead), makes it a
// replica of a master, and once it has the master's writes promotes it;
// heal fails back to the original master and removes the skewed node.
func (w *world) injectClock(ctx context.Context, ahead bool, rng *rand.Rand, ev *Event) (healFunc, error) {
	skew := w.drawSkew(ahead, rng)
	ev.Hold = w.drawHold(rng)
	if w.topo == Sentinel {
		return w.clockSentinel(ctx, skew, ev)
	}
	return w.clockCluster(ctx, skew, rng, ev)
}

// roleOf returns the role of the node at addr as INFO replication says.
func roleOf(ctx context.Context, addr string) (string, error) {
	repl, err := info(ctx, addr, "replication")
	if err != nil {
		return "", err
	}
	return infoField(repl, "role"), nil
}

// linkUp returns nil once the node at addr is a replica whose link to its
// master is up.
func linkUp(ctx context.Context, addr string) error {
	repl, err := info(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if infoField(repl, "role") != "slave" || infoField(repl, "master_link_status") != "up" {
		return fmt.Errorf("%s: role %s, link %s", addr, infoField(repl, "role"), infoField(repl, "master_link_status"))
	}
	return nil
}
