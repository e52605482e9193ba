// Package etcdserver runs a real etcd (go.etcd.io/etcd/server/v3/embed)
// inside the test process on free loopback ports, for the etcd backend's
// tests and the conformance suite. It can be stopped and started again on
// the same ports and data, as an operator restarting etcd would.
//
// Clients reach etcd through a small TCP relay owned by the Server, so Stop
// drops every client connection at once, as a crashed etcd would, instead of
// waiting for etcd's graceful shutdown to give up on open watch streams. The
// package must not be imported outside tests and internal tools.
package etcdserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long Start and Restart wait for etcd to be ready.
const StartTimeout = 30 * time.Second

// Options are the client-facing security settings of a Server.
type Options struct {
	// CertFile and KeyFile, when set, make the client URL https:// with
	// this server certificate (etcd's --cert-file, --key-file).
	CertFile, KeyFile string
	// TrustedCAFile and ClientCertAuth make etcd require client
	// certificates chaining to these CAs (--trusted-ca-file,
	// --client-cert-auth); with auth enabled, a certificate's common name
	// is its user.
	TrustedCAFile  string
	ClientCertAuth bool
}

// Server is one embedded etcd member with its data directory and ports. Its
// methods are safe for concurrent use.
type Server struct {
	opts       Options
	dir        string
	clientAddr string // relay address handed to clients
	etcdClient string // etcd's own client address, behind the relay
	etcdPeer   string // etcd's peer address (single member)

	mu      sync.Mutex
	etcd    *embed.Etcd
	relay   net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup // relay accept loop and pipes
	closed  bool
	running bool
}

// Start starts a one-member etcd with its data in dir on three free
// loopback ports (client relay, etcd client, etcd peer) and waits until it
// serves. The election timeout is small (heartbeat 50 ms, election 500 ms),
// so the smallest lease TTL etcd grants is 1 s. Fsync is disabled: the data
// survives Stop and Restart, not a machine crash.
func Start(dir string) (*Server, error) { return StartWith(dir, Options{}) }

// StartWith is Start with opts.
func StartWith(dir string, opts Options) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		s := &Server{
			opts:       opts,
			dir:        dir,
			clientAddr: ports[0],
			etcdClient: ports[1],
			etcdPeer:   ports[2],
			conns:      map[net.Conn]struct{}{},
		}
		if err := s.Restart(); err != nil {
			lastErr = err
			if errors.Is(err, syscall.EADDRINUSE) {
				continue // Another process took a port between probe and bind.
			}
			return nil, err
		}
		return s, nil
	}
	return nil, lastErr
}

// Endpoints returns the client URLs to give clientv3: https:// with a
// server certificate.
func (s *Server) Endpoints() []string {
	if s.opts.CertFile != "" {
		return []string{"https://" + s.clientAddr}
	}
	return []string{"http://" + s.clientAddr}
}

// Dir returns the data directory.
func (s *Server) Dir() string { return s.dir }

// Running reports whether etcd is serving (started and not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Stop stops etcd as a crash would for its clients: every client
// connection drops at once and new ones are refused, then etcd closes,
// keeping its data directory and ports for Restart. Stopping a stopped
// server is a no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.running = false
	relay, e := s.relay, s.etcd
	conns := s.conns
	s.relay, s.etcd, s.conns = nil, nil, map[net.Conn]struct{}{}
	s.mu.Unlock()

	relay.Close()
	for c := range conns {
		c.Close()
	}
	s.wg.Wait()
	e.Close()
	select {
	case <-e.Server.StopNotify():
	case <-time.After(StartTimeout):
		return fmt.Errorf("etcd at %s: did not stop within %v", s.etcdClient, StartTimeout)
	}
	return nil
}

// Restart starts etcd again on the same ports and data (stopping it first
// if it runs) and waits until it serves or StartTimeout passes.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("etcd server: closed")
	}
	e, err := s.startEtcd()
	if err != nil {
		return err
	}
	relay, err := listenRetry(s.clientAddr, 5*time.Second)
	if err != nil {
		e.Close()
		return fmt.Errorf("etcd client relay on %s: %w", s.clientAddr, err)
	}
	s.etcd, s.relay, s.running = e, relay, true
	s.wg.Add(1)
	go s.accept(relay)
	return nil
}

// Close stops etcd for good; the data directory is left to its owner.
func (s *Server) Close() error {
	err := s.Stop()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return err
}

func (s *Server) startEtcd() (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "tripod-test"
	cfg.Dir = s.dir
	// etcd logs expected shutdown noise at error level; failures to
	// start are returned instead.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.UnsafeNoFsync = true
	// bcrypt's lowest cost: with auth enabled every client login checks a
	// password, which at the default cost (and more so under the race
	// detector) takes long enough to starve the lease keep-alives of a
	// 1 s TTL on a loaded machine.
	cfg.BcryptCost = 4
	cfg.EnableGRPCGateway = false
	clientURL := url.URL{Scheme: "http", Host: s.etcdClient}
	if s.opts.CertFile != "" {
		clientURL.Scheme = "https"
		cfg.ClientTLSInfo.CertFile = s.opts.CertFile
		cfg.ClientTLSInfo.KeyFile = s.opts.KeyFile
		cfg.ClientTLSInfo.TrustedCAFile = s.opts.TrustedCAFile
		cfg.ClientTLSInfo.ClientCertAuth = s.opts.ClientCertAuth
	}
	peerURL := url.URL{Scheme: "http", Host: s.etcdPeer}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()

	var e *embed.Etcd
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		e, err = embed.StartEtcd(cfg)
		if err == nil {
			break
		}
		// The previous incarnation's sockets may linger for a moment.
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return nil, fmt.Errorf("start etcd in %s on %s: %w", s.dir, s.etcdClient, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd in %s: %w", s.dir, err)
	case <-time.After(StartTimeout):
		e.Close()
		return nil, fmt.Errorf("etcd in %s: not ready within %v", s.dir, StartTimeout)
	}
}

// accept relays every client connection to etcd until the relay closes.
func (s *Server) accept(relay net.Listener) {
	defer s.wg.Done()
	for {
		c, err := relay.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", s.etcdClient, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		s.mu.Lock()
		if s.relay != relay {
			s.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.conns[up] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(2)
		go s.pipe(c, up)
		go s.pipe(up, c)
	}
}

// pipe copies from src to dst and closes both when either side ends.
func (s *Server) pipe(dst, src net.Conn) {
	defer s.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	s.mu.Lock()
	delete(s.conns, dst)
	delete(s.conns, src)
	s.mu.Unlock()
}

func freePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

func listenRetry(addr string, patience time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(patience)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
