package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// brokerZNode is the JSON of /brokers/ids/N, Kafka's version 5.
type brokerZNode struct {
	Version                     int               `json:"version"`
	Host                        string            `json:"host"`
	Port                        int32             `json:"port"`
	Endpoints                   []string          `json:"endpoints"`
	ListenerSecurityProtocolMap map[string]string `json:"listener_security_protocol_map"`
	Rack                        string            `json:"rack,omitempty"`
	JMXPort                     int               `json:"jmx_port"`
	Timestamp                   string            `json:"timestamp"`
}

// encodeBroker writes b as Kafka's /brokers/ids/N: every endpoint as
// "LISTENER://host:port" with the listeners' security protocols in
// listener_security_protocol_map, host and port the inter-broker
// listener's. A broker without Endpoints has one PLAINTEXT listener at
// Host:Port (coord.Broker.ListenerEndpoint).
func encodeBroker(b coord.Broker) []byte {
	endpoints := b.Endpoints
	if len(endpoints) == 0 {
		endpoints = []coord.Endpoint{{Listener: "PLAINTEXT", Host: b.Host, Port: b.Port, SecurityProtocol: "PLAINTEXT"}}
	}
	z := brokerZNode{
		Version:                     5,
		Host:                        b.Host,
		Port:                        b.Port,
		ListenerSecurityProtocolMap: map[string]string{},
		Rack:                        b.Rack,
		JMXPort:                     -1,
		Timestamp:                   strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
	for _, ep := range endpoints {
		z.Endpoints = append(z.Endpoints, ep.String())
		z.ListenerSecurityProtocolMap[ep.Listener] = ep.SecurityProtocol
	}
	data, _ := json.Marshal(z)
	return data
}

// decodeBroker reads /brokers/ids/N; its broker epoch is the znode's czxid,
// as in Kafka. The one PLAINTEXT endpoint at host:port that encodeBroker
// writes for a broker without Endpoints is read back as none.
func decodeBroker(id coord.BrokerID, data []byte, stat *zk.Stat) (coord.Broker, error) {
	var z brokerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return coord.Broker{}, fmt.Errorf("decode /brokers/ids/%d: %w", id, err)
	}
	br := coord.Broker{ID: id, Host: z.Host, Port: z.Port, Rack: z.Rack, Epoch: stat.Czxid}
	for _, s := range z.Endpoints {
		ep, err := parseEndpoint(s, z.ListenerSecurityProtocolMap)
		if err != nil {
			return coord.Broker{}, fmt.Errorf("decode /brokers/ids/%d: %w", id, err)
		}
		br.Endpoints = append(br.Endpoints, ep)
	}
	if len(br.Endpoints) == 1 {
		implied := coord.Endpoint{Listener: "PLAINTEXT", Host: br.Host, Port: br.Port, SecurityProtocol: "PLAINTEXT"}
		if br.Endpoints[0] == implied {
			br.Endpoints = nil
		}
	}
	return br, nil
}

// parseEndpoint reads one of Kafka's "LISTENER://host:port" endpoints; its
// security protocol is the listener's in protocols, or the listener's name
// when the map lacks it (Kafka's brokers before listener names).
func parseEndpoint(s string, protocols map[string]string) (coord.Endpoint, error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return coord.Endpoint{}, fmt.Errorf("endpoint %q: want LISTENER://host:port", s)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return coord.Endpoint{}, fmt.Errorf("endpoint %q: %w", s, err)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		return coord.Endpoint{}, fmt.Errorf("endpoint %q: port: %w", s, err)
	}
	protocol, ok := protocols[name]
	if !ok {
		protocol = name
	}
	return coord.Endpoint{Listener: name, Host: host, Port: int32(port), SecurityProtocol: protocol}, nil
}

// session is a broker registration: the ephemeral /brokers/ids/N of one
// ZooKeeper session.
type session struct {
	b      *Backend
	zs     *zsession
	broker coord.Broker
	// czxid is the registration's own (its epoch less the broker base).
	czxid int64
	// replaced is the epoch of the registration Register replaced, or 0.
	replaced int64
	path     string
	done     chan struct{}

	mu    sync.Mutex
	err   error
	terms map[*term]struct{}
}

// Register implements coord.Registrar. The broker epoch is the czxid of
// /brokers/ids/N raised by the broker base; b.Replaces is taken back
// minus it, and one from before the base (a registration on the backend
// a migration came from) replaces nothing.
func (b *Backend) Register(ctx context.Context, br coord.Broker) (coord.Session, error) {
	if br.ID < 0 {
		return nil, fmt.Errorf("register broker %d: broker id must be >= 0", br.ID)
	}
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	path := b.path(fmt.Sprintf("/brokers/ids/%d", br.ID))
	base := b.bases().Broker
	replaces := br.Replaces - base
	if br.Replaces == 0 || replaces <= 0 {
		replaces = 0
	}
	for {
		zs := b.current()
		if zs == nil {
			return nil, fmt.Errorf("%w: register broker %d", coord.ErrClosed, br.ID)
		}
		var stat *zk.Stat
		var replaced int64
		err := zs.call(ctx, path, func(c *zk.Conn) error {
			replaced = 0
			_, err := c.Create(path, encodeBroker(br), zk.FlagEphemeral, b.aclFor(path))
			if errors.Is(err, zk.ErrNodeExists) {
				_, old, gerr := c.Get(path)
				switch {
				case gerr != nil:
				case old.EphemeralOwner == zs.sessionID() && !b.registered(path):
					// A registration of this very ZooKeeper session that
					// no live Session holds was left by a Register whose
					// ctx ended mid-call: replace it rather than wait for
					// an expiry that will not come.
					if derr := c.Delete(path, old.Version); derr == nil {
						_, err = c.Create(path, encodeBroker(br), zk.FlagEphemeral, b.aclFor(path))
					}
				case replaces != 0 && old.Czxid == replaces:
					// The caller's previous incarnation, dead: any client
					// may delete another session's ephemeral, and the
					// version makes the delete conditional on its still
					// being that registration.
					if derr := c.Delete(path, old.Version); derr == nil {
						b.releaseDeadController(c, old.EphemeralOwner)
						replaced = old.Czxid + base
						_, err = c.Create(path, encodeBroker(br), zk.FlagEphemeral, b.aclFor(path))
					}
				}
			}
			if err != nil {
				return err
			}
			_, stat, err = c.Get(path)
			return err
		})
		if errors.Is(err, errSessionEnded) {
			continue
		}
		if err != nil {
			return nil, convertError(err, "register "+path)
		}
		if stat.EphemeralOwner != zs.sessionID() {
			// go-zookeeper moved to a new ZooKeeper session under us: the
			// znode belongs to a session this backend is giving up.
			continue
		}
		br.Epoch, br.Replaces = stat.Czxid+base, 0
		s := &session{b: b, zs: zs, broker: br, czxid: stat.Czxid, replaced: replaced, path: path, done: make(chan struct{}), terms: map[*term]struct{}{}}
		b.mu.Lock()
		select {
		case <-zs.done:
			b.mu.Unlock()
			continue
		default:
		}
		if b.closed {
			b.mu.Unlock()
			return nil, fmt.Errorf("%w: register broker %d", coord.ErrClosed, br.ID)
		}
		b.sessions[s] = struct{}{}
		b.mu.Unlock()
		b.log.Debug("broker registered", "broker", br.ID, "epoch", br.Epoch, "replaced", replaced)
		return s, nil
	}
}

// releaseDeadController deletes /controller if the ZooKeeper session owner,
// whose process the caller knows to be dead, holds it, so that the next
// controller is elected without waiting for that session to expire. A
// failure leaves it to expire.
func (b *Backend) releaseDeadController(c *zk.Conn, owner int64) {
	path := b.path("/controller")
	_, stat, err := c.Get(path)
	if err != nil || stat.EphemeralOwner != owner {
		return
	}
	if err := c.Delete(path, stat.Version); err == nil {
		b.log.Info("removed the controller registration of a replaced broker session", "path", path, "session", owner)
	}
}

// registered reports whether a live Session of this backend holds path.
func (b *Backend) registered(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.sessions {
		if s.path == path && s.Err() == nil {
			return true
		}
	}
	return false
}

// Members implements coord.Registrar.
func (b *Backend) Members(ctx context.Context) ([]coord.Broker, error) {
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	var members []coord.Broker
	err := b.do(ctx, "members", func(c *zk.Conn) error {
		var err error
		members, err = b.readMembers(c, false)
		return err
	})
	if err != nil {
		return nil, convertError(err, b.path("/brokers/ids"))
	}
	return members, nil
}

// readMembers lists /brokers/ids (setting a child watch when watch is set)
// and reads every registration, concurrently; their epochs are raised by
// the broker base.
func (b *Backend) readMembers(c *zk.Conn, watch bool) ([]coord.Broker, error) {
	dir := b.path("/brokers/ids")
	var names []string
	var err error
	if watch {
		names, _, _, err = c.ChildrenW(dir)
	} else {
		names, _, err = c.Children(dir)
	}
	if err != nil {
		return nil, err
	}
	brokers := make([]coord.Broker, len(names))
	ok := make([]bool, len(names))
	err = parallel(len(names), func(i int) error {
		id, err := strconv.ParseInt(names[i], 10, 32)
		if err != nil {
			return nil // not a broker id: ignore, as Kafka does
		}
		data, stat, err := c.Get(dir + "/" + names[i])
		if errors.Is(err, zk.ErrNoNode) {
			return nil // gone since the listing
		}
		if err != nil {
			return err
		}
		br, err := decodeBroker(coord.BrokerID(id), data, stat)
		if err != nil {
			return err
		}
		brokers[i], ok[i] = br, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	live := make([]coord.Broker, 0, len(brokers))
	base := b.bases().Broker
	for i, br := range brokers {
		if ok[i] {
			br.Epoch += base
			live = append(live, br)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	return live, nil
}

// Broker implements coord.Session.
func (s *session) Broker() coord.Broker { return s.broker }

// Replaced implements coord.Session.
func (s *session) Replaced() int64 { return s.replaced }

// Done implements coord.Session.
func (s *session) Done() <-chan struct{} { return s.done }

// Err implements coord.Session.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end ends the session with err and every term bound to it; it returns
// false if the session had already ended.
func (s *session) end(err error) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.err = err
	close(s.done)
	terms := s.terms
	s.terms = nil
	s.mu.Unlock()
	for t := range terms {
		t.end(false)
	}
	return true
}

// bindTerm binds t to s; it returns false if s has ended.
func (s *session) bindTerm(t *term) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.terms[t] = struct{}{}
	return true
}

// Close implements coord.Session. It gives up the session's terms and
// deletes its registration at once; if ZooKeeper cannot be reached within
// the session timeout, a background retry deletes it later (or the
// ZooKeeper session ends and takes it along).
func (s *session) Close() error {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil
	}
	terms := make([]*term, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.b.timeout)
	defer cancel()
	for _, t := range terms {
		t.Resign(ctx)
	}
	if !s.end(coord.ErrClosed) {
		return nil
	}
	s.b.mu.Lock()
	delete(s.b.sessions, s)
	s.b.mu.Unlock()
	err := s.deregister(ctx)
	if err == nil {
		return nil
	}
	s.b.log.Warn("cannot remove broker registration now: retrying in the background", "path", s.path, "error", err)
	s.b.goTracked(func() {
		for attempt := 0; ; attempt++ {
			if !wait(context.Background(), s.zs.done, backoff(attempt)) {
				return
			}
			select {
			case <-s.b.closing:
				return
			default:
			}
			if s.deregister(context.Background()) == nil {
				return
			}
		}
	})
	return nil
}

// deregister deletes the registration if it is still this session's.
func (s *session) deregister(ctx context.Context) error {
	err := s.zs.call(ctx, s.path, func(c *zk.Conn) error {
		_, stat, err := c.Get(s.path)
		if err != nil {
			return err
		}
		if stat.EphemeralOwner != s.zs.sessionID() || stat.Czxid != s.czxid {
			return nil // not ours any more
		}
		return c.Delete(s.path, stat.Version)
	})
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, errSessionEnded) || errors.Is(err, coord.ErrClosed) {
		return nil // gone with the session
	}
	return convertError(err, "deregister "+s.path)
}

// parallel runs f(0..n-1) on a bounded pool of goroutines (go-zookeeper
// pipelines their requests on the one connection) and returns the first
// error. It waits for all of them.
func parallel(n int, f func(i int) error) error {
	return parallelOn(n, 1, func(_, i int) error { return f(i) })
}

// parallelOn is parallel over conns connections: f(conn, i) runs with
// conn in 0..conns-1, as many goroutines on each connection as parallel
// runs on one.
func parallelOn(n, conns int, f func(conn, i int) error) error {
	const workers = 64
	if n == 0 {
		return nil
	}
	if n == 1 {
		return f(0, 0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	w := min(workers*conns, n)
	wg.Add(w)
	for worker := range w {
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := f(worker%conns, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
