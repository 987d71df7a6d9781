package redisstore_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lossyProxy is a TCP proxy in front of one redis-server that loses the
// reply of every every-th run of each script it forwards (EVALSHA or EVAL
// of one SHA1, counted over all its connections), after the server ran
// it: it reads the reply,
// drops it and closes the connection, as a network that fails between a
// script's run and its reply does. The client sees its connection end
// (EOF), the error go-redis retries by default. Other replies go through.
//
// It reads the commands of each connection (RESP arrays) to know which
// reply answers a script, and the replies (RESP2 and RESP3) to know where
// each ends.
type lossyProxy struct {
	addr   string
	target string
	ln     net.Listener
	every  int64

	scripts atomic.Int64 // script replies read from the server
	lost    atomic.Int64 // script replies lost

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	sent    map[string]int // scripts sent, by SHA1
	replies map[string]int // script replies read, by SHA1
	lostBy  map[string]int // script replies lost, by SHA1
	wg      sync.WaitGroup
}

// newLossyProxy starts a proxy to target that loses one script reply in
// every (0: none), and stops it when t ends.
func newLossyProxy(t testing.TB, target string, every int64) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{addr: ln.Addr().String(), target: target, ln: ln, every: every, conns: map[net.Conn]struct{}{}, sent: map[string]int{}, replies: map[string]int{}, lostBy: map[string]int{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *lossyProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *lossyProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *lossyProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		client.Close()
		server.Close()
		return
	}
	end := func() { client.Close(); server.Close() }
	// names holds the names of the commands sent and not yet answered, in
	// order; the channel is large enough for any pipeline the tests send.
	names := make(chan [2]string, 1<<16) // name, SHA1 of a script
	var wg sync.WaitGroup
	wg.Go(func() {
		defer end()
		r := bufio.NewReader(client)
		for {
			raw, name, arg, err := readCommand(r)
			if err != nil {
				return
			}
			switch name {
			case "eval":
				arg = fmt.Sprintf("%x", sha1.Sum([]byte(arg)))
				fallthrough
			case "evalsha":
				p.mu.Lock()
				p.sent[arg]++
				p.mu.Unlock()
			}
			names <- [2]string{name, arg}
			if _, err := server.Write(raw); err != nil {
				return
			}
		}
	})
	wg.Go(func() {
		defer end()
		r := bufio.NewReader(server)
		for {
			raw, push, err := readReply(r)
			if err != nil {
				return
			}
			if !push {
				if cmd := <-names; cmd[0] == "evalsha" || cmd[0] == "eval" {
					p.scripts.Add(1)
					p.mu.Lock()
					p.replies[cmd[1]]++
					lose := p.every > 0 && p.replies[cmd[1]]%int(p.every) == 0
					if lose {
						p.lostBy[cmd[1]]++
					}
					p.mu.Unlock()
					if lose {
						p.lost.Add(1)
						return // the script ran; its reply is lost with the connection
					}
				}
			}
			if _, err := client.Write(raw); err != nil {
				return
			}
		}
	})
	wg.Wait()
}

func (p *lossyProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// dialer is a go-redis Dialer that reaches each address through a lossy
// proxy of its own, made on first use: a cluster client learns its nodes'
// real addresses from CLUSTER SLOTS, and dials them through it.
type lossyDialer struct {
	t     testing.TB
	every int64

	mu      sync.Mutex
	proxies map[string]*lossyProxy
}

func (d *lossyDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	p, ok := d.proxies[addr]
	if !ok {
		p = newLossyProxy(d.t, addr, d.every)
		d.proxies[addr] = p
	}
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, p.addr)
}

// counts returns how many scripts of SHA1 sha the proxies in ps sent to
// their servers, and how many of their replies they lost.
func counts(sha string, ps ...*lossyProxy) (sent, lost int) {
	for _, p := range ps {
		p.mu.Lock()
		sent += p.sent[sha]
		lost += p.lostBy[sha]
		p.mu.Unlock()
	}
	return sent, lost
}

// all returns the dialer's proxies.
func (d *lossyDialer) all() []*lossyProxy {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := make([]*lossyProxy, 0, len(d.proxies))
	for _, p := range d.proxies {
		ps = append(ps, p)
	}
	return ps
}

// readCommand reads one command, a RESP array of bulk strings, and
// returns its bytes, its name in lower case and its first argument.
func readCommand(r *bufio.Reader) (raw []byte, name, first string, err error) {
	line, err := readLine(r)
	if err != nil {
		return nil, "", "", err
	}
	if len(line) < 3 || line[0] != '*' {
		return nil, "", "", fmt.Errorf("proxy: command %q is not an array", line)
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return nil, "", "", err
	}
	raw = line
	for i := range n {
		arg, err := readLine(r)
		if err != nil {
			return nil, "", "", err
		}
		if arg[0] != '$' {
			return nil, "", "", fmt.Errorf("proxy: argument %q is not a bulk string", arg)
		}
		size, err := strconv.Atoi(string(arg[1 : len(arg)-2]))
		if err != nil {
			return nil, "", "", err
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, "", "", err
		}
		switch i {
		case 0:
			name = strings.ToLower(string(body[:size]))
		case 1:
			first = string(body[:size])
		}
		raw = append(append(raw, arg...), body...)
	}
	return raw, name, first, nil
}

// readReply reads one reply, RESP2 or RESP3, and returns its bytes and
// whether it is a push message (which answers no command).
func readReply(r *bufio.Reader) (raw []byte, push bool, err error) {
	line, err := readLine(r)
	if err != nil {
		return nil, false, err
	}
	if len(line) < 3 {
		return nil, false, fmt.Errorf("proxy: short reply line %q", line)
	}
	raw = line
	head := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return raw, false, nil
	case '$', '=', '!':
		size, err := strconv.Atoi(head)
		if err != nil || size < 0 {
			return raw, false, err // -1: a null bulk string
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, false, err
		}
		return append(raw, body...), false, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil || n < 0 {
			return raw, false, err // -1: a null array
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			el, _, err := readReply(r)
			if err != nil {
				return nil, false, err
			}
			raw = append(raw, el...)
		}
		if line[0] == '|' { // an attribute precedes the reply it annotates
			rest, push, err := readReply(r)
			return append(raw, rest...), push, err
		}
		return raw, line[0] == '>', nil
	}
	return nil, false, fmt.Errorf("proxy: unknown reply type %q", line)
}

// readLine reads one line, its CRLF included.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("proxy: line without CRLF")
	}
	return line, nil
}
