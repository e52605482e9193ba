// Package faultnet wraps dialing and listening so a test can cut a process
// off from the network as a crash or a partition would: every open
// connection is closed at once, new dials fail, and accepted connections are
// dropped, until Heal. It owns no goroutines.
package faultnet

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrCut is returned by dials while the network is cut.
var ErrCut = errors.New("faultnet: network cut")

// Net is one process's view of the network. The zero value is not usable;
// use New.
type Net struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// New returns a healed Net.
func New() *Net { return &Net{conns: map[net.Conn]struct{}{}} }

// Cut closes every connection made through n and refuses new ones.
func (n *Net) Cut() {
	n.mu.Lock()
	n.cut = true
	conns := n.conns
	n.conns = map[net.Conn]struct{}{}
	n.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (n *Net) Heal() {
	n.mu.Lock()
	n.cut = false
	n.mu.Unlock()
}

// IsCut reports whether n is cut.
func (n *Net) IsCut() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut
}

func (n *Net) track(c net.Conn) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut {
		c.Close()
		return nil, ErrCut
	}
	tc := &conn{Conn: c, n: n}
	n.conns[tc] = struct{}{}
	return tc, nil
}

func (n *Net) forget(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

// Dial dials through n; it has the signature of coord.Config.Dialer.
func (n *Net) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if n.IsCut() {
		return nil, ErrCut
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return n.track(c)
}

// Listen listens through n; it has the signature of coord.Config.Listen.
func (n *Net) Listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: l, n: n}, nil
}

type conn struct {
	net.Conn
	n *Net
}

func (c *conn) Close() error {
	c.n.forget(c)
	return c.Conn.Close()
}

type listener struct {
	net.Listener
	n *Net
}

// Accept drops connections that arrive while the network is cut.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, err := l.n.track(c)
		if err == nil {
			return tc, nil
		}
	}
}
