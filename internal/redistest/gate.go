package redistest

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// GateProxy is a TCP proxy in front of a redis-server that holds the
// reply to a command naming one of its scripts' SHAs (an EVALSHA of that
// script) until its gate opens, or for a fixed delay ([GateProxy.Delay]),
// and keeps a log of events: each held reply let through, and what the
// test adds. Tests of work done after a response use it to show that the
// response did not wait for that work's reply.
type GateProxy struct {
	ln     net.Listener
	target string
	shas   [][]byte
	gate   chan struct{}
	once   sync.Once
	delay  atomic.Int64 // nanoseconds; 0: hold until the gate opens
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	events []string
}

// NewGateProxy starts a proxy to target (a redis-server's address)
// holding the replies to the scripts shas; it stops when t ends, after
// letting every held reply through.
func NewGateProxy(t testing.TB, target string, shas ...string) *GateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &GateProxy{ln: ln, target: target, gate: make(chan struct{})}
	for _, s := range shas {
		p.shas = append(p.shas, []byte(s))
	}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		p.Open()
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's address, for a client.
func (p *GateProxy) Addr() string { return p.ln.Addr().String() }

// Open lets the held replies through, and every later one.
func (p *GateProxy) Open() { p.once.Do(func() { close(p.gate) }) }

// Delay makes the proxy hold each later reply for d after it arrived
// instead of until the gate opens (0: until the gate opens again). The
// replies on one connection keep their order: the ones behind a held
// reply wait with it.
func (p *GateProxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Event adds e to the log.
func (p *GateProxy) Event(e string) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
}

// Events returns the log: "reply" for each held reply let through, in
// order with what the test added.
func (p *GateProxy) Events() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

func (p *GateProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var hold atomic.Bool
		p.wg.Go(func() { p.up(c, s, &hold) })
		p.wg.Go(func() { p.down(s, c, &hold) })
	}
}

// up forwards commands, noting (before the server can answer) that one
// names a held script.
func (p *GateProxy) up(c, s net.Conn, hold *atomic.Bool) {
	defer s.Close()
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the previous read: a SHA may straddle two
	for {
		n, err := c.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			for _, sha := range p.shas {
				if bytes.Contains(seen, sha) {
					hold.Store(true)
				}
			}
			tail = append(tail[:0], seen[max(0, len(seen)-40):]...)
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down forwards replies, holding a held script's until the gate opens
// (or for the delay).
func (p *GateProxy) down(s, c net.Conn, hold *atomic.Bool) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if hold.Swap(false) {
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d)
				} else {
					<-p.gate
				}
				p.Event("reply")
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
