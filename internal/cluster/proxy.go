package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP forwarder on a free loopback port in front of one
// address. A cluster started with Config.Proxies puts one in front of
// every broker's Kafka listener and makes the broker advertise it, so that
// every Kafka connection to the broker (clients, the controller's
// requests, other brokers' fetches) passes through it. Cut takes the
// broker off the Kafka network as a network partition would: every
// connection through the proxy is closed and new ones are refused, while
// the broker process and its coordination session (ZooKeeper, etcd, Raft:
// not proxied) live on. Heal lets connections through again.
//
// Proxy owns one accept goroutine and two copy goroutines per forwarded
// connection; Close ends them all and waits for them. Its methods are safe
// for concurrent use.
type Proxy struct {
	// Addr is the proxy's own listen address, host:port.
	Addr string
	// Target is the address connections are forwarded to.
	Target string

	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards every connection
// to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy for %s: listen: %w", target, err)
	}
	p := &Proxy{Addr: ln.Addr().String(), Target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// accept serves the listener until Close.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(client) {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward dials the target for client and copies both ways until either
// side closes or the proxy is cut.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.Target, time.Second)
	if err != nil {
		p.untrack(client)
		client.Close()
		return
	}
	if !p.track(server) {
		p.untrack(client)
		client.Close()
		server.Close()
		return
	}
	var copies sync.WaitGroup
	copies.Add(2)
	pipe := func(dst, src net.Conn) {
		defer copies.Done()
		io.Copy(dst, src)
		// Either direction ending ends the connection, as a broker or
		// client that closes its socket would.
		dst.Close()
		src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	copies.Wait()
	p.untrack(client)
	p.untrack(server)
}

// track registers conn unless the proxy is cut or closed, and reports
// whether it did.
func (p *Proxy) track(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[conn] = struct{}{}
	return true
}

func (p *Proxy) untrack(conn net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, conn)
}

// Cut closes every connection through the proxy and refuses new ones
// (they are accepted and closed at once, as a peer whose packets are
// reset) until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for conn := range p.conns {
		conn.Close()
	}
}

// Heal lets new connections through again after Cut.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// IsCut reports whether the proxy is cut.
func (p *Proxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Close stops the proxy: it stops listening, closes every connection and
// waits for its goroutines. Closing twice is a no-op.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for conn := range p.conns {
		conn.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
