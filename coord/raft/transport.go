package raft

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// The first byte of every connection to a node's Raft port says which
// protocol follows, as Consul does: Raft RPCs or tripod forward RPCs;
// the quorum's tag (QuorumFile) follows it.
const (
	protoRaft    byte = 'R'
	protoForward byte = 'F'
)

// QuorumFile, in a Raft directory, names the quorum the directory's node
// belongs to: the migration that formed it (`tripod migrate --to raft`,
// or a rollback to Raft), absent for a cluster started on Raft. Every
// connection carries its quorum's tag after the protocol byte, and a
// node closes one of another quorum: a quorum formed again at the
// addresses of one that is still shutting down (a rollback right after
// a switch away from Raft) never takes a log or a vote from it, nor
// forwards a write to its leader.
const QuorumFile = "migration-id"

// quorumTag identifies a quorum on the wire: the first 8 bytes of the
// SHA-256 of its QuorumFile's content, zero without one.
type quorumTag [8]byte

// readQuorumID returns the tag of the quorum whose node keeps its state
// in dir.
func readQuorumID(dir string) (quorumTag, error) {
	var tag quorumTag
	id, err := os.ReadFile(filepath.Join(dir, QuorumFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return tag, nil
	case err != nil:
		return tag, fmt.Errorf("raft.dir %s: read the quorum's id: %w", dir, err)
	}
	sum := sha256.Sum256(id)
	copy(tag[:], sum[:])
	return tag, nil
}

// handshakeTimeout bounds how long an accepted connection may take to
// complete its TLS handshake (with raft.ssl.*) and send its protocol byte.
const handshakeTimeout = 5 * time.Second

// errDial marks a failure to connect: nothing was sent, so the request
// may be retried elsewhere.
var errDial = errors.New("dial")

// dialFunc makes an outbound connection (coord.Config.Dialer's signature).
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// mux owns the node's listener: it accepts connections, reads their
// protocol byte and hands Raft connections to the raft stream layer and
// forward connections to serveForward. With mutual TLS (serverTLS and
// clientTLS set), every connection in both directions is TLS first, and
// an accepted one whose peer did not present a certificate chaining to
// the truststore is closed before its protocol byte is read: such a node
// can neither join, vote, replicate nor forward. Its goroutines end at
// close.
type mux struct {
	ln        net.Listener
	dial      dialFunc
	serverTLS *tls.Config // nil: plain TCP
	clientTLS *tls.Config
	log       hclog.Logger
	serve     func(net.Conn)
	// quorum is the tag this node's connections carry and accepted ones
	// must carry (set before the first dial).
	quorum  quorumTag
	raftCh  chan net.Conn
	closing chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newMux(ln net.Listener, quorum quorumTag, dial dialFunc, serverTLS, clientTLS *tls.Config, log hclog.Logger, serve func(net.Conn)) *mux {
	m := &mux{
		ln:        ln,
		quorum:    quorum,
		dial:      dial,
		serverTLS: serverTLS,
		clientTLS: clientTLS,
		log:       log,
		serve:     serve,
		raftCh:    make(chan net.Conn),
		closing:   make(chan struct{}),
		conns:     map[net.Conn]struct{}{},
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closing:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error: back off a little and go on.
			select {
			case <-m.closing:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !m.track(c) {
			c.Close()
			return
		}
		m.wg.Add(1)
		go m.handle(c)
	}
}

// track remembers c so close can drop it; false once closing.
func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closing:
		return false
	default:
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) forget(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

func (m *mux) handle(raw net.Conn) {
	defer m.wg.Done()
	drop := func() {
		m.forget(raw)
		raw.Close()
	}
	c := raw
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if m.serverTLS != nil {
		tc := tls.Server(raw, m.serverTLS)
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.Handshake(); err != nil {
			m.log.Warn("refused a Raft connection: TLS handshake failed", "remote", raw.RemoteAddr().String(), "error", err)
			drop()
			return
		}
		if len(tc.ConnectionState().VerifiedChains) == 0 {
			// The server configuration did not require a verified client
			// certificate; the transport does.
			m.log.Warn("refused a Raft connection: no verified client certificate", "remote", raw.RemoteAddr().String())
			drop()
			return
		}
		c.SetWriteDeadline(time.Time{})
		c = tc
	}
	var b [1 + len(quorumTag{})]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		drop()
		return
	}
	raw.SetReadDeadline(time.Time{})
	if quorumTag(b[1:]) != m.quorum {
		m.log.Warn("refused a Raft connection from a node of another quorum (one formed before a migration, at the same address)", "remote", raw.RemoteAddr().String())
		drop()
		return
	}
	switch b[0] {
	case protoRaft:
		// The Raft transport owns the connection from now on; it is still
		// tracked so close drops it.
		select {
		case m.raftCh <- &muxConn{Conn: c, raw: raw, m: m}:
		case <-m.closing:
			drop()
		}
	case protoForward:
		m.serve(c)
		drop()
	default:
		drop()
	}
}

// muxConn is an accepted Raft connection (TLS over raw with raft.ssl.*)
// that the mux forgets when the transport closes it.
type muxConn struct {
	net.Conn
	raw net.Conn // the accepted connection, as the mux tracks it
	m   *mux
}

// Close implements net.Conn.
func (c *muxConn) Close() error {
	c.m.forget(c.raw)
	return c.Conn.Close()
}

// dialProto connects to address and sends the protocol byte and the
// quorum's tag.
func (m *mux) dialProto(ctx context.Context, address string, proto byte) (net.Conn, error) {
	var c net.Conn
	var err error
	if m.dial != nil {
		c, err = m.dial(ctx, "tcp", address)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", address)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errDial, address, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(deadline)
	}
	if m.clientTLS != nil {
		cfg := m.clientTLS
		if cfg.ServerName == "" {
			// The peer's certificate must name the host of its raft.voters
			// address (an IP address SAN for an IP address).
			host, _, _ := net.SplitHostPort(address)
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("%w %s: TLS handshake: %w", errDial, address, err)
		}
		c = tc
	}
	if _, err := c.Write(append([]byte{proto}, m.quorum[:]...)); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w %s: send protocol byte: %w", errDial, address, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// close stops accepting, drops every accepted connection and waits for the
// mux's goroutines.
func (m *mux) close() {
	m.once.Do(func() {
		m.mu.Lock()
		close(m.closing)
		conns := m.conns
		m.conns = map[net.Conn]struct{}{}
		m.mu.Unlock()
		m.ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	m.wg.Wait()
}

// streamLayer is the hraft.StreamLayer of the mux: Raft's side of the
// shared port.
type streamLayer struct {
	m *mux
}

// Accept implements net.Listener.
func (s streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftCh:
		return c, nil
	case <-s.m.closing:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener. The mux is closed by the backend after
// the transport, so this is a no-op.
func (s streamLayer) Close() error { return nil }

// Addr implements net.Listener.
func (s streamLayer) Addr() net.Addr { return s.m.ln.Addr() }

// Dial implements hraft.StreamLayer.
func (s streamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.m.dialProto(ctx, string(address), protoRaft)
}
