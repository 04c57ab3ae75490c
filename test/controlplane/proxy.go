package controlplane

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy is a loopback TCP proxy in front of the API server. Clients from
// ControlPlane.Config connect to it, so they keep one address while the API
// server behind it restarts on another port, and tests can inject network
// faults between a client and the server.
//
// All methods are safe for concurrent use.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex // guards backend, conns, refuse, down, stalled
	backend string
	conns   map[*proxyConn]struct{}
	refuse  bool // set by the test (SetRefuse)
	down    bool // set while the API server behind is stopped
	stalled bool
	resume  chan struct{} // closed when a stall ends

	accepted atomic.Int64
	wg       sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
}

func newProxy(backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, backend: backend, conns: map[*proxyConn]struct{}{}, resume: make(chan struct{})}
	close(p.resume)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted reports how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

func (p *Proxy) setBackend(addr string) {
	p.mu.Lock()
	p.backend = addr
	p.mu.Unlock()
}

// setDown refuses new connections while the API server behind is stopped
// (down=true), whatever SetRefuse says, and accepts them again (false).
func (p *Proxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// CutAll closes every open connection (both directions) at once, as a
// network failure or a load balancer reset would. New connections are
// accepted as usual.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return len(conns)
}

// SetRefuse makes the proxy close new connections immediately (refuse=true),
// as if the server were unreachable, or accept them again (false).
func (p *Proxy) SetRefuse(refuse bool) {
	p.mu.Lock()
	p.refuse = refuse
	p.mu.Unlock()
}

// SetStalled stops (true) or resumes (false) forwarding bytes on every
// connection, existing and new, without closing any: a black-holed network.
func (p *Proxy) SetStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stalled == p.stalled {
		return
	}
	p.stalled = stalled
	if stalled {
		p.resume = make(chan struct{})
	} else {
		close(p.resume)
	}
}

// OpenConns is the number of connections currently proxied.
func (p *Proxy) OpenConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.SetStalled(false)
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.mu.Lock()
		refuse, backend := p.refuse || p.down, p.backend
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", backend)
		if err != nil {
			_ = c.Close()
			continue
		}
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, c, s)
		go p.pipe(pc, s, c)
	}
}

func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resume := p.resume
			p.mu.Unlock()
			<-resume
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}
