package world

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is an in-process TCP proxy in front of one data node. Clients made
// by [World.NewClient] reach the node only through it, so it can add
// latency to the node's replies, stall its traffic, and close or reset its
// connections, also in the middle of a reply.
//
// Bytes from the node travel through a delay line: each chunk read is
// written to the client no earlier than the latency set when it was read,
// and not while the proxy is stalled. Bytes to the node are held while it
// is stalled. A cut window makes every chunk from the node end its
// connection after half of it has been forwarded.
type proxy struct {
	target string // the node's real address
	addr   string // the proxy's address
	ln     net.Listener

	mu       sync.Mutex
	links    map[*link]struct{}
	latency  time.Duration
	stallEnd time.Time
	stallCh  chan struct{} // closed when a stall is lifted
	cutEnd   time.Time
	cutRST   bool
	closed   bool
	wg       sync.WaitGroup
	accepted atomic.Int64 // connections accepted, ever
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	once           sync.Once
}

// chunk is a piece of a reply read from the node, due at due.
type chunk struct {
	b   []byte
	due time.Time
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{target: target, addr: ln.Addr().String(), ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	s, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		c.Close() // the node is down: the client sees its connection end
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close(false)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { p.up(l) })
	wg.Go(func() { p.down(l) })
	wg.Wait()
}

// up forwards the client's commands to the node, holding them while the
// proxy is stalled.
func (p *proxy) up(l *link) {
	defer l.close(false)
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			p.waitStall()
			if _, werr := l.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down forwards the node's replies to the client through the delay line.
func (p *proxy) down(l *link) {
	defer l.close(false)
	line := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range line {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			p.waitStall()
			if cut, rst := p.cutting(); cut {
				l.client.Write(ch.b[:len(ch.b)/2]) // part of a reply, then the end
				l.close(rst)
				return
			}
			if _, err := l.client.Write(ch.b); err != nil {
				l.close(false)
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			due := time.Now().Add(p.latency)
			p.mu.Unlock()
			select {
			case line <- chunk{b: append([]byte(nil), buf[:n]...), due: due}:
			case <-done:
				return
			}
		}
		if err != nil {
			break
		}
	}
	close(line)
	<-done
}

// waitStall returns once the proxy is not stalled.
func (p *proxy) waitStall() {
	for {
		p.mu.Lock()
		d, ch := time.Until(p.stallEnd), p.stallCh
		p.mu.Unlock()
		if d <= 0 || ch == nil {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ch:
		}
		t.Stop()
	}
}

func (p *proxy) cutting() (cut, rst bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.cutEnd), p.cutRST
}

// close ends both connections of l; rst resets the client's (RST instead
// of FIN).
func (l *link) close(rst bool) {
	l.once.Do(func() {
		if tc, ok := l.client.(*net.TCPConn); ok && rst {
			tc.SetLinger(0)
		}
		l.client.Close()
		l.server.Close()
	})
}

// addLatency adds d (negative: takes it off) to the delay of every chunk
// of reply read from now on. The latency and slow faults each add their
// own and take it off when they heal, so that they may overlap.
func (p *proxy) addLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(p.latency+d, 0)
	p.mu.Unlock()
}

// stall holds the traffic of every connection, both ways, for d or until
// unstall.
func (p *proxy) stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallCh == nil {
		p.stallCh = make(chan struct{})
	}
	p.stallEnd = time.Now().Add(d)
}

// unstall lets held traffic through.
func (p *proxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallCh != nil {
		close(p.stallCh)
		p.stallCh = nil
	}
	p.stallEnd = time.Time{}
}

// cut closes every open connection now (reset: with RST), and for window
// ends every connection on its next chunk of reply after forwarding half
// of it. It returns how many connections it closed at once.
func (p *proxy) cut(window time.Duration, reset bool) int {
	p.mu.Lock()
	p.cutEnd, p.cutRST = time.Now().Add(window), reset
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close(reset)
	}
	return len(links)
}

// uncut ends a cut window early.
func (p *proxy) uncut() {
	p.mu.Lock()
	p.cutEnd = time.Time{}
	p.mu.Unlock()
}

// close stops the proxy and ends its connections; it waits for its
// goroutines.
func (p *proxy) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	p.unstall()
	err := p.ln.Close()
	for _, l := range links {
		l.close(false)
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// latencyNow returns the latency added to replies read from now on.
func (p *proxy) latencyNow() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}
