package network

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what the connection layer needs of the broker's
// configuration, read once when the Server is made.
type Config struct {
	// ConnectionsMaxIdle closes a connection on which no complete request
	// arrives for that long while no answer is awaited
	// (connections.max.idle.ms).
	ConnectionsMaxIdle time.Duration
	// SocketRequestMaxBytes is the largest request frame accepted
	// (socket.request.max.bytes).
	SocketRequestMaxBytes int32
	// SASLServerMaxReceiveSize is the largest request frame accepted
	// before the client has authenticated (sasl.server.max.receive.size).
	SASLServerMaxReceiveSize int32
	// QueuedMaxRequestBytes bounds the bytes of requests being read or
	// waiting to be handled across all connections
	// (queued.max.request.bytes, request_pool.go).
	QueuedMaxRequestBytes int64
	// MaxConnections, MaxConnectionsPerIP and
	// MaxConnectionsPerIPOverrides are max.connections,
	// max.connections.per.ip and max.connections.per.ip.overrides
	// (connlimit.go).
	MaxConnections               int32
	MaxConnectionsPerIP          int32
	MaxConnectionsPerIPOverrides map[string]int32
	// MaxConnectionCreationRate is max.connection.creation.rate: the
	// connections per second all listeners but a protected one accept
	// (0 or 2147483647: no limit). ConnectionCreationRate returns an address's
	// connection_creation_rate client quota (its own, else the default
	// ip's); ok is false when it has none, and a nil func is no quota.
	// Both are measured over QuotaWindowNum samples of QuotaWindowSize
	// (quota.window.num, quota.window.size.seconds; connrate.go).
	MaxConnectionCreationRate int32
	ConnectionCreationRate    func(ip string) (quota float64, ok bool)
	QuotaWindowNum            int
	QuotaWindowSize           time.Duration
	// Closing is closed when the broker closes: the accept loops stop and
	// every connection closes.
	Closing <-chan struct{}
	// AcceptErrors counts failed accepts; ConnectionsRefused counts
	// connections closed at once for max.connections.per.ip;
	// ConnectionsThrottled counts connections closed unserved, after a
	// delay, for their address's connection_creation_rate.
	AcceptErrors         prometheus.Counter
	ConnectionsRefused   prometheus.Counter
	ConnectionsThrottled prometheus.Counter
}

// Handler is what the broker does with a connection: the connection layer
// reads and writes frames, the Handler gives them their meaning. A
// Handler serves the connections of one listener; its methods are called
// from the connection's goroutines, several connections at once.
type Handler interface {
	// Open makes a connection just accepted ready for requests: on a TLS
	// listener it runs the handshake and returns the connection to read
	// and write (whose Close closes nc at once), with the state that
	// says who the client is. On error it has logged why to log and
	// closed nc, and the connection ends. ctx ends when the broker
	// closes.
	Open(ctx context.Context, nc net.Conn, log hclog.Logger) (net.Conn, Conn, error)
	// Handle decodes and handles one request frame of size bytes (without
	// its size prefix). An error with no Response.Answer closes the
	// connection at once; an error wrapping ErrAnswerThenClose with an
	// Answer closes it once that answer and those before are written.
	Handle(ctx context.Context, c Conn, frame []byte, size int) (Response, error)
	// RawToken answers a bare SASL token read when c.RawSASL(): the
	// size-prefixed answer, or an error that closes the connection.
	RawToken(ctx context.Context, c Conn, token []byte) ([]byte, error)
	// Closed is called when the connection ends with an error wrapping
	// ErrAnswerThenClose, once every answer before has been written and
	// before the connection closes: it may write a last answer on conn
	// (a failed authentication's, after its delay). ctx ends when the
	// broker closes.
	Closed(ctx context.Context, conn net.Conn, c Conn, err error)
}

// Conn is the state a Handler keeps for a connection, as far as the
// connection layer asks about it before a request is decoded.
type Conn interface {
	// IsAuthenticated reports whether the client has authenticated;
	// before it has, frames are bounded by sasl.server.max.receive.size and
	// each frame's api key is admitted before its body is read.
	IsAuthenticated() bool
	// RawSASL reports whether the next frame is a bare SASL token (after
	// a SaslHandshake v0) rather than a request.
	RawSASL() bool
	// Admit returns an error, closing the connection, when the
	// connection may not send a request of api key.
	Admit(key int16) error
	// MutedUntil returns when the connection's throttle for a client
	// quota ends: no request is read from it before (Kafka's muted
	// channel, KIP-219). The zero time is no throttle.
	MutedUntil() time.Time
}

// Response is a Handler's answer to one request.
type Response struct {
	// Answer returns the encoded response frame (nil Bytes for none).
	// It is called once, after the request's place in the connection's
	// answer order is taken.
	Answer func(ctx context.Context) Frame
	// Later marks an Answer that waits (a long-poll fetch, an acks=all
	// produce): it runs on a goroutine of its own, while the connection
	// reads on, after the request's bytes are given back to the pool.
	Later bool
	// Fetch marks a Fetch's response: the connection reads nothing more
	// until it has been written (connFlow).
	Fetch bool
	// Serial marks the response of a client under a quota: as Fetch, the
	// connection reads nothing more until it has been written, so that,
	// as in Kafka, a throttle applies from the next request on and no
	// pipelined request slips past it.
	Serial bool
}

// ErrAnswerThenClose, wrapped in a Handler's error, asks for the
// handler's response to be sent before the connection closes, as Kafka
// answers a failed SASL exchange before closing.
var ErrAnswerThenClose = errors.New("closing the connection after the answer")

// Listener is one bound Kafka listener whose connections a Server serves.
type Listener struct {
	// Name is the listener's name, for logs.
	Name string
	// Listener accepts the connections.
	Listener net.Listener
	// Protected is set on the inter-broker listener when there are
	// others: it accepts connections beyond max.connections (Kafka's
	// protected listener).
	Protected bool
	// Handler serves the listener's connections.
	Handler Handler
}

// Server serves the connections of a broker's listeners, which share its
// connection limits and request pool.
type Server struct {
	cfg      Config
	logger   hclog.Logger
	limits   *connLimiter
	rates    *connRates
	requests *requestPool
}

// NewServer makes the connection layer of a broker; Serve starts each
// listener's accept loop.
func NewServer(cfg Config, logger hclog.Logger) *Server {
	return &Server{
		cfg:      cfg,
		logger:   logger,
		limits:   newConnLimiter(cfg),
		rates:    newConnRates(cfg),
		requests: newRequestPool(cfg.QueuedMaxRequestBytes, logger),
	}
}

// RequestBytesInUse returns the bytes of the request pool reserved now.
func (s *Server) RequestBytesInUse() int64 { return s.requests.inUse() }

// HostOf returns the IP address of a TCP address, in net.IP's canonical
// form, or the address's string for any other kind: the host that
// max.connections.per.ip counts, and that ACLs name.
func HostOf(addr net.Addr) string { return hostOf(addr) }

// acceptBackoffMin and acceptBackoffMax bound the wait after a failed
// Accept, doubling from the one to the other while Accept keeps failing.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Serve accepts connections on l until it closes or Config.Closing is
// closed, within max.connections and max.connection.creation.rate
// (counted over all listeners, which share limits; a protected listener
// is exempt), max.connections.per.ip and the connection_creation_rate of
// each address, and serves each on goroutines of its own. It returns
// once every connection it accepted has ended.
func (s *Server) Serve(l Listener) {
	var conns sync.WaitGroup
	defer conns.Wait()
	limits := s.limits
	var backoff time.Duration
	for {
		if full, freed := limits.full(); full && !l.Protected {
			s.logger.Warn("not accepting connections: max.connections reached", "listener", l.Name, "max.connections", s.cfg.MaxConnections)
			for full {
				select {
				case <-freed:
				case <-s.cfg.Closing:
					return
				}
				full, freed = limits.full()
			}
		}
		nc, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-s.cfg.Closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				s.logger.Error("listener closed while the broker runs", "listener", l.Name, "error", err)
				return
			}
			// Out of file descriptors (EMFILE, ENFILE) or memory, or a
			// connection that was reset before it was accepted: the
			// listener itself is fine, so wait and accept again rather
			// than stop serving while leading partitions.
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			s.cfg.AcceptErrors.Inc()
			if backoff == acceptBackoffMax || backoff == acceptBackoffMin {
				s.logger.Warn("accept failed, retrying", "listener", l.Name, "error", err, "backoff", backoff)
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.cfg.Closing:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		if !l.Protected {
			if !s.waitAccept(nc) {
				return
			}
		}
		if delay := s.rates.ipDelay(hostOf(nc.RemoteAddr()), time.Now()); delay > 0 {
			s.logger.Debug("connection throttled: connection_creation_rate reached", "listener", l.Name, "remote", nc.RemoteAddr().String(), "delay", delay)
			s.cfg.ConnectionsThrottled.Inc()
			conns.Add(1)
			go func() {
				defer conns.Done()
				s.closeAfter(nc, delay)
			}()
			continue
		}
		if ok, limit := limits.admit(nc.RemoteAddr()); !ok {
			s.logger.Info("connection refused: max.connections.per.ip reached", "listener", l.Name, "remote", nc.RemoteAddr().String(), "limit", limit)
			s.cfg.ConnectionsRefused.Inc()
			nc.Close()
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer limits.release(nc.RemoteAddr())
			s.serveConn(nc, l)
		}()
	}
}

// waitAccept holds the accept loop for as long as the connection just
// accepted is over max.connection.creation.rate, as Kafka's acceptor
// waits for a connection slot. It reports false, having closed nc, when
// the broker closes meanwhile.
func (s *Server) waitAccept(nc net.Conn) bool {
	delay := s.rates.acceptDelay(time.Now())
	if delay <= 0 {
		return true
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.cfg.Closing:
		nc.Close()
		return false
	}
}

// closeAfter closes a throttled connection, unread, once delay has passed
// or the broker closes, as Kafka delays closing a connection over its
// address's connection_creation_rate so that its client does not
// reconnect at once.
func (s *Server) closeAfter(nc net.Conn, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.cfg.Closing:
	}
	nc.Close()
}
