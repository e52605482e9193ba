// Package zk is tripod's coordination Backend on Apache ZooKeeper, through
// github.com/go-zookeeper/zk. It keeps Kafka's znode layout and JSON, so a
// zkCli user recognises the cluster:
//
//	/brokers/ids/N                           ephemeral broker registration
//	/controller                              ephemeral, the controller's id
//	/controller_epoch                        the controller epoch, as text
//	/brokers/topics/T                        a topic's id and assignment
//	/brokers/topics/T/partitions/P/state     a partition's leader and ISR
//	/config/topics/T                         a topic's config overrides
//	/latest_producer_id_block                the last producer id block reserved
//	/producer_id_key                         the producer id key (tripod's own)
//	/tripod_migration                        the migration record (tripod's own, migrate.go)
//
// all under the chroot of zookeeper.connect ("host:port,host:port/chroot").
// The two znodes Kafka does not have sit beside Kafka's top-level ones, in
// its naming style. The migration record is not /migration: Kafka's
// ZooKeeper-to-KRaft migration keeps its own state there
// (ZkMigrationStateZNode), with another JSON and another meaning, and a
// Kafka tool that found tripod's record there would misread it; the
// tripod_ prefix keeps the record clear of every name Kafka uses. It is
// empty while the backend has no record, and only the brokers may read it
// when zookeeper.set.acl is on (its Target may carry the credentials of
// the backend a migration goes to).
//
// A backend whose record has Bases (it is the target of a migration)
// reports every broker epoch (the czxid of /brokers/ids/N), controller
// epoch (/controller_epoch), partition epoch (the state znode's version)
// and Version (zxids) as its own plus the base, and takes them back
// minus it.
// One ZooKeeper session (one zk.Conn) serves a Backend; broker sessions and
// controller terms are bound to it. When that session expires, or when the
// backend has not heard from ZooKeeper for the session timeout, every
// Session and Term bound to it ends and the backend opens a new ZooKeeper
// session for later calls.
//
// The package owns its goroutines (a monitor, watches, term watchers, the
// go-zookeeper connection) and Close waits for them. It must not import
// broker or replication.
package zk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

func init() {
	coord.RegisterFactory("zk", func(cfg coord.Config) (coord.Backend, error) {
		b, err := Open(cfg)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}

// maxBackoff caps the pause between retries of a failed background read or
// write; the pause starts at a tenth of it.
const maxBackoff = time.Second

// Backend is the ZooKeeper coord.Backend. Use Open; all methods are safe for
// concurrent use.
type Backend struct {
	cfg     coord.Config
	log     hclog.Logger
	servers []string
	root    string // chroot, "" or "/a/b"
	timeout time.Duration
	// acl is the ACL of the znodes the backend creates, privateACL that of
	// the SCRAM credentials (see aclFor).
	acl, privateACL []zk.ACL

	closing chan struct{} // closed by Close
	wg      sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	cur       *zsession
	sessions  map[*session]struct{}
	terms     map[*term]struct{}
	baseReady bool
	// standby is the metadata copy a campaigning broker keeps for Load
	// (standby.go); nil until the first Campaign with MetadataStandby.
	standby *standby
	// rec is the migration record last read (migrate.go), nil before the
	// first read.
	rec atomic.Pointer[recordState]
}

var (
	_ coord.Backend           = (*Backend)(nil)
	_ coord.ControllerEvictor = (*Backend)(nil)
	_ coord.Migrator          = (*Backend)(nil)
)

// Open connects to the ZooKeeper ensemble of cfg.ZKConnect with
// cfg.SessionTimeout. It does not wait for the connection: calls wait for it
// as their contexts allow. The chroot and Kafka's top-level znodes are
// created when first needed.
func Open(cfg coord.Config) (*Backend, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	check := cfg
	check.Backend = "zk"
	if err := check.Validate(); err != nil {
		return nil, err
	}
	servers, root, err := parseConnect(cfg.ZKConnect)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:      cfg,
		log:      cfg.Logger.Named("zk"),
		servers:  servers,
		root:     root,
		timeout:  cfg.SessionTimeout,
		closing:  make(chan struct{}),
		sessions: map[*session]struct{}{},
		terms:    map[*term]struct{}{},
	}
	b.acl, b.privateACL = zk.WorldACL(zk.PermAll), zk.WorldACL(zk.PermAll)
	if cfg.ZKSetACL {
		owner := zk.DigestACL(zk.PermAll, cfg.ZKDigestUsername, cfg.ZKDigestPassword)
		b.acl = slices.Concat(owner, zk.WorldACL(zk.PermRead))
		b.privateACL = owner
	}
	b.mu.Lock()
	b.cur, err = b.newZSessionLocked()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		b.monitor()
	}()
	go func() {
		defer b.wg.Done()
		b.followRecord()
	}()
	return b, nil
}

// parseConnect splits "host:port,host:port/chroot" into servers and chroot.
func parseConnect(connect string) ([]string, string, error) {
	hosts, root := connect, ""
	if i := strings.IndexByte(connect, '/'); i >= 0 {
		hosts, root = connect[:i], strings.TrimRight(connect[i:], "/")
	}
	var servers []string
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, "", fmt.Errorf("zookeeper.connect %q: server %q: want host:port", connect, h)
		}
		servers = append(servers, h)
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("zookeeper.connect %q: no servers (want host:port[,host:port][/chroot])", connect)
	}
	if root != "" && strings.Contains(root, "//") {
		return nil, "", fmt.Errorf("zookeeper.connect %q: chroot %q has an empty path element", connect, root)
	}
	return servers, root, nil
}

// Close implements coord.Backend. It ends every Session and Term with
// ErrClosed and closes the ZooKeeper session, which removes their ephemeral
// znodes at once, then waits for every goroutine of the backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.closing)
	terms := make([]*term, 0, len(b.terms))
	for t := range b.terms {
		terms = append(terms, t)
	}
	sessions := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.terms, b.sessions = map[*term]struct{}{}, map[*session]struct{}{}
	zs := b.cur
	b.mu.Unlock()

	for _, t := range terms {
		t.end(false)
	}
	for _, s := range sessions {
		s.end(coord.ErrClosed)
	}
	zs.end()
	zs.close()
	b.wg.Wait()
	return nil
}

// goTracked runs f in a goroutine that Close waits for, unless the backend
// is closed (then it returns false and f does not run).
func (b *Backend) goTracked(f func()) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// current returns the ZooKeeper session that new calls use, or nil once the
// backend is closed.
func (b *Backend) current() *zsession {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	return b.cur
}

// path returns p under the chroot.
func (b *Backend) path(p string) string { return b.root + p }

// aclFor returns the ACL of a znode the backend creates at p. Without
// zookeeper.set.acl it is world ALL. With it, as Kafka's secure ACLs: ALL
// for the brokers' digest identity and READ for everyone, except for the
// SCRAM credentials (/config/users and below, Kafka's sensitive path),
// the producer id key and the migration record, which only the brokers
// may read.
func (b *Backend) aclFor(p string) []zk.ACL {
	if users := b.usersPath(); p == users || strings.HasPrefix(p, users+"/") || p == b.producerIDKeyPath() || p == b.migrationPath() {
		return b.privateACL
	}
	return b.acl
}

// aclBytes estimates what acl adds to a create request.
func aclBytes(acl []zk.ACL) int {
	n := 4
	for _, a := range acl {
		n += 12 + len(a.Scheme) + len(a.ID)
	}
	return n
}

// do runs fn, which must be idempotent (reads, creates of what may exist),
// on the current ZooKeeper session, again when the connection drops under
// it (go-zookeeper fails requests in flight; the session moves to another
// server or reconnects) or the session ends, until ctx ends. Errors are
// go-zookeeper's or coord's (ErrClosed, ErrUnavailable, ctx.Err()); callers
// convert them.
func (b *Backend) do(ctx context.Context, key string, fn func(*zk.Conn) error) error {
	for attempt := 0; ; attempt++ {
		zs := b.current()
		if zs == nil {
			return fmt.Errorf("%w: %s", coord.ErrClosed, key)
		}
		err := zs.call(ctx, key, fn)
		switch {
		case errors.Is(err, errSessionEnded):
			continue
		case err != nil && ctx.Err() == nil && !errors.Is(err, coord.ErrClosed) && isConnectionError(err):
			b.log.Debug("retrying after a connection error", "key", key, "error", err)
			if !wait(ctx, b.closing, backoff(attempt)/10) {
				return err
			}
			continue
		}
		return err
	}
}

// monitor applies the client-side rules of the coord contract on the
// backend's ZooKeeper session: with no word from ZooKeeper for 2/3 of the
// session timeout the controller terms end (the service may expire the
// session soon after, and a new controller must not overlap), and after the
// session timeout the session itself is given up, which ends every broker
// Session, and replaced by a new one.
func (b *Backend) monitor() {
	tick := b.timeout / 20
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-b.closing:
			return
		case <-ticker.C:
		}
		zs := b.current()
		if zs == nil {
			return
		}
		if !zs.isEstablished() {
			continue
		}
		idle := time.Since(zs.lastContact())
		if idle > b.timeout/6 {
			zs.probe()
		}
		if idle > b.timeout*2/3 {
			b.loseTerms(zs, idle)
		}
		if idle >= b.timeout-tick {
			b.log.Warn("no contact with zookeeper for the session timeout: ending the session",
				"idle", idle, "session_timeout", b.timeout)
			b.endZSession(zs)
		}
	}
}

// probe asks ZooKeeper something cheap when it has been quiet for a sixth
// of the session timeout. go-zookeeper pings every third of it; answers
// twice as often keep a busy machine's scheduling delays far from the
// 2/3 at which terms end.
func (zs *zsession) probe() {
	select {
	case <-zs.authed:
	default:
		return // Nothing goes out before the digest credentials.
	}
	if st, _ := zs.stateNow(); st != zk.StateHasSession || !zs.probing.CompareAndSwap(false, true) {
		return
	}
	if !zs.b.goTracked(func() {
		defer zs.probing.Store(false)
		zs.conn.Exists("/")
	}) {
		zs.probing.Store(false)
	}
}

// loseTerms ends the terms bound to zs because zs cannot be confirmed; each
// term's watcher gives /controller up once ZooKeeper is back.
func (b *Backend) loseTerms(zs *zsession, idle time.Duration) {
	b.mu.Lock()
	var lost []*term
	for t := range b.terms {
		if t.zs == zs {
			lost = append(lost, t)
		}
	}
	b.mu.Unlock()
	for _, t := range lost {
		if t.end(true) {
			b.log.Warn("controller term lost: no contact with zookeeper", "epoch", t.epoch, "idle", idle)
		}
	}
}

// endZSession ends zs: every Session and Term bound to it ends with
// ErrSessionExpired, watches resynchronise on a new ZooKeeper session, and
// zs's connection is closed in the background.
func (b *Backend) endZSession(zs *zsession) {
	b.mu.Lock()
	if zs.ending {
		b.mu.Unlock()
		return
	}
	zs.ending = true
	var sessions []*session
	for s := range b.sessions {
		if s.zs == zs {
			sessions = append(sessions, s)
			delete(b.sessions, s)
		}
	}
	var terms []*term
	for t := range b.terms {
		if t.zs == zs {
			terms = append(terms, t)
			delete(b.terms, t)
		}
	}
	if b.cur == zs && !b.closed {
		nz, err := b.newZSessionLocked()
		if err != nil {
			// newZSessionLocked fails only on a bad server list, which Open
			// has already accepted.
			b.log.Error("cannot open a new zookeeper session", "error", err)
		} else {
			b.cur = nz
		}
	}
	closed := b.closed
	if !closed {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	// The replacement is current before zs ends, so whoever sees zs end
	// and asks for the current session gets the new one.
	zs.end()

	for _, t := range terms {
		t.end(false)
	}
	for _, s := range sessions {
		s.end(coord.ErrSessionExpired)
	}
	if !closed {
		go func() {
			defer b.wg.Done()
			zs.close()
		}()
	}
}

// zsession is one ZooKeeper session: a go-zookeeper connection from its
// first session until that session expires or is given up. go-zookeeper
// would silently start a new session on the same connection after an
// expiry; the backend opens a new zsession instead, so everything bound to
// the old one ends.
type zsession struct {
	b        *Backend
	conn     *zk.Conn
	hosts    *hostProvider
	drained  chan struct{} // closed when go-zookeeper's event channel closed
	lastRecv atomic.Int64  // unix nanoseconds of the last bytes from ZooKeeper
	probing  atomic.Bool   // a probe is in flight

	established     chan struct{} // closed at the first StateHasSession
	establishedOnce sync.Once
	// authed is closed once the digest credentials are registered on the
	// connection (at once without credentials): calls wait for it, so no
	// request goes out unauthenticated.
	authed    chan struct{}
	done      chan struct{} // closed when the session has ended
	doneOnce  sync.Once
	closeOnce sync.Once
	ending    bool // guarded by b.mu: endZSession has begun
	// oneConnection ends the session when its first connection drops,
	// instead of letting go-zookeeper reconnect (set before Connect).
	oneConnection bool

	mu      sync.Mutex
	id      int64 // the ZooKeeper session id, once known
	netConn net.Conn
	closing bool // close has begun: no new connections
	state   zk.State
	stateCh notify.Broadcast // announces every state change
	subs    map[*subscriber]struct{}
}

// errSessionEnded says a call could not be sent because its zsession ended.
var errSessionEnded = errors.New("zookeeper session ended")

// newZSessionLocked opens a new ZooKeeper session. b.mu must be held and
// the backend open.
func (b *Backend) newZSessionLocked() (*zsession, error) {
	return b.newZSessionLockedWith(false)
}

// newZSessionLockedWith is newZSessionLocked, for a session that ends when its
// first connection drops when oneConnection is set.
func (b *Backend) newZSessionLockedWith(oneConnection bool) (*zsession, error) {
	zs := &zsession{
		oneConnection: oneConnection,
		b:             b,
		hosts:         newHostProvider(),
		drained:       make(chan struct{}),
		established:   make(chan struct{}),
		authed:        make(chan struct{}),
		done:          make(chan struct{}),
		state:         zk.StateDisconnected,
		subs:          map[*subscriber]struct{}{},
	}
	zs.lastRecv.Store(time.Now().UnixNano())
	conn, events, err := zk.Connect(b.servers, b.timeout,
		zk.WithDialer(zs.dial),
		zk.WithHostProvider(zs.hosts),
		zk.WithLogger(zkLogger{b.log}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(zs.onEvent),
	)
	if err != nil {
		return nil, fmt.Errorf("zookeeper.connect %q: %w", b.cfg.ZKConnect, err)
	}
	zs.conn = conn
	if b.cfg.ZKDigestUsername == "" {
		close(zs.authed)
	} else {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			zs.authenticate()
		}()
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for range events {
			// Events are handled by onEvent; the channel only tells when
			// go-zookeeper's connection loop has ended.
		}
		close(zs.drained)
	}()
	return zs, nil
}

// authenticate registers the digest credentials (zookeeper.digest.*) on
// zs's connection once it has its session, retrying until ZooKeeper
// answers or zs ends, then closes zs.authed. go-zookeeper sends registered
// credentials again, before anything else, on every reconnection.
func (zs *zsession) authenticate() {
	b := zs.b
	auth := []byte(b.cfg.ZKDigestUsername + ":" + b.cfg.ZKDigestPassword)
	for attempt := 0; ; attempt++ {
		for {
			st, changed := zs.stateNow()
			if st == zk.StateHasSession {
				break
			}
			select {
			case <-changed:
			case <-zs.done:
				return
			case <-b.closing:
				return
			}
		}
		err := zs.conn.AddAuth("digest", auth)
		if err == nil {
			close(zs.authed)
			return
		}
		b.log.Debug("zookeeper digest authentication failed; retrying", "user", b.cfg.ZKDigestUsername, "error", err)
		if !wait(context.Background(), zs.done, backoff(attempt)) {
			return
		}
	}
}

// dial makes a connection to a ZooKeeper server through cfg.Dialer when
// set, recording every read as contact with the service.
func (zs *zsession) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var c net.Conn
	var err error
	if d := zs.b.cfg.Dialer; d != nil {
		c, err = d(ctx, network, addr)
	} else {
		var nd net.Dialer
		c, err = nd.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	cc := &contactConn{Conn: c, zs: zs, handshakeWait: zs.b.timeout / 2, maxWait: zs.b.timeout}
	zs.mu.Lock()
	zs.netConn = cc
	closing := zs.closing
	zs.mu.Unlock()
	if closing {
		cc.Close()
		return nil, net.ErrClosed
	}
	return cc, nil
}

// contactConn records the time of every read from ZooKeeper and bounds the
// reads' deadlines. go-zookeeper waits ten read timeouts for the answer to
// its connect request, and a server that accepted the connection while
// starting up may never answer it, which would hold the reconnection past
// the session timeout: the first deadline of a connection (the connect
// request's) is capped at half the session timeout, later ones at the
// session timeout (go-zookeeper's own, 2/3 of the timeout the server
// granted, stay as they are unless the server granted much more than
// asked).
type contactConn struct {
	net.Conn
	zs            *zsession
	handshakeWait time.Duration
	maxWait       time.Duration
	deadlines     atomic.Int32 // SetReadDeadline calls so far
}

func (c *contactConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.zs.lastRecv.Store(time.Now().UnixNano())
	}
	return n, err
}

// SetReadDeadline caps t as contactConn says, and sets a deadline where
// go-zookeeper clears it.
func (c *contactConn) SetReadDeadline(t time.Time) error {
	wait := c.maxWait
	if c.deadlines.Add(1) == 1 {
		wait = c.handshakeWait
	}
	if limit := time.Now().Add(wait); t.IsZero() || t.After(limit) {
		t = limit
	}
	return c.Conn.SetReadDeadline(t)
}

func (zs *zsession) lastContact() time.Time { return time.Unix(0, zs.lastRecv.Load()) }

func (zs *zsession) isEstablished() bool {
	select {
	case <-zs.established:
		return true
	default:
		return false
	}
}

// onEvent receives every go-zookeeper event, on its connection goroutine:
// it must not block.
func (zs *zsession) onEvent(ev zk.Event) {
	if ev.Type == zk.EventSession {
		zs.mu.Lock()
		zs.state = ev.State
		zs.stateCh.Notify()
		zs.mu.Unlock()
		switch ev.State {
		case zk.StateHasSession:
			zs.lastRecv.Store(time.Now().UnixNano())
			zs.establishedOnce.Do(func() { close(zs.established) })
		case zk.StateExpired:
			zs.b.log.Warn("zookeeper session expired")
			zs.b.endZSession(zs)
		case zk.StateDisconnected:
			zs.b.log.Debug("disconnected from zookeeper", "server", ev.Server)
			select {
			case <-zs.established:
				if zs.oneConnection {
					// Called before go-zookeeper dials again, so no dial
					// succeeds: the session ends with its connection.
					zs.mu.Lock()
					zs.closing = true
					zs.mu.Unlock()
					zs.b.endZSession(zs)
				}
			default:
			}
		}
		return
	}
	if ev.Type == zk.EventNotWatching || ev.Path == "" {
		return
	}
	zs.mu.Lock()
	for s := range zs.subs {
		s.push(ev)
	}
	zs.mu.Unlock()
}

// stateNow returns the connection state and a channel closed at its next
// change.
func (zs *zsession) stateNow() (zk.State, <-chan struct{}) {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.state, zs.stateCh.Next()
}

// sessionID returns the ZooKeeper session id, the ephemeralOwner of the
// znodes this session creates (0 before the first call).
func (zs *zsession) sessionID() int64 {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.id
}

// noteSessionID records the ZooKeeper session id once connected. Until zs
// ends, the connection's session is zs's own: go-zookeeper starts another
// only after reporting the expiry that ends zs.
func (zs *zsession) noteSessionID() {
	id := zs.conn.SessionID()
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if zs.id != 0 || id == 0 {
		return
	}
	select {
	case <-zs.done:
	default:
		zs.id = id
	}
}

// end marks zs ended; it returns false if it already was.
func (zs *zsession) end() bool {
	ended := false
	zs.doneOnce.Do(func() {
		close(zs.done)
		ended = true
	})
	if ended {
		zs.mu.Lock()
		for s := range zs.subs {
			s.reset()
		}
		zs.mu.Unlock()
	}
	return ended
}

// close closes the connection (sending closeSession when connected, which
// removes the session's ephemeral znodes at once) and waits for
// go-zookeeper's goroutine.
func (zs *zsession) close() {
	zs.closeOnce.Do(func() {
		zs.hosts.stop()
		zs.mu.Lock()
		zs.closing = true
		nc := zs.netConn
		zs.mu.Unlock()
		if nc != nil && !zs.isHealthy() {
			// A connection that is not serving (mid-handshake, say) would
			// hold go-zookeeper's Close until its read gives up.
			nc.Close()
		}
		zs.conn.Close()
		<-zs.drained
	})
}

// isHealthy reports whether zs is connected with its session, so Close can
// say goodbye (closeSession) over the connection.
func (zs *zsession) isHealthy() bool {
	st, _ := zs.stateNow()
	return st == zk.StateHasSession
}

// call waits until zs has a live connection, then runs fn in a goroutine so
// the caller can leave when ctx ends (go-zookeeper calls take no context).
func (zs *zsession) call(ctx context.Context, key string, fn func(*zk.Conn) error) error {
	b := zs.b
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, changed := zs.stateNow()
		if st == zk.StateHasSession {
			zs.noteSessionID()
			break
		}
		select {
		case <-changed:
		case <-zs.done:
			return errSessionEnded
		case <-b.closing:
			return fmt.Errorf("%w: %s", coord.ErrClosed, key)
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: not connected to zookeeper: %w", coord.ErrUnavailable, key, ctx.Err())
		}
	}
	select {
	case <-zs.authed:
	case <-zs.done:
		return errSessionEnded
	case <-b.closing:
		return fmt.Errorf("%w: %s", coord.ErrClosed, key)
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: not authenticated to zookeeper: %w", coord.ErrUnavailable, key, ctx.Err())
	}
	result := make(chan error, 1)
	if !b.goTracked(func() { result <- fn(zs.conn) }) {
		return fmt.Errorf("%w: %s", coord.ErrClosed, key)
	}
	select {
	case err := <-result:
		return err
	case <-b.closing:
		return fmt.Errorf("%w: %s", coord.ErrClosed, key)
	case <-ctx.Done():
		if st, _ := zs.stateNow(); st != zk.StateHasSession {
			return fmt.Errorf("%w: %s: lost connection to zookeeper: %w", coord.ErrUnavailable, key, ctx.Err())
		}
		return ctx.Err()
	}
}

// hostProvider hands go-zookeeper the servers round robin. Unlike
// go-zookeeper's own, it pauses only briefly after a round of failed dials
// (so a restarted server is found within a tenth of a second, well inside
// the session timeout) and tells go-zookeeper to give up once stopped.
type hostProvider struct {
	mu      sync.Mutex
	servers []string
	next    int
	tried   int
	quit    chan struct{}
	once    sync.Once
}

func newHostProvider() *hostProvider { return &hostProvider{quit: make(chan struct{})} }

// Init implements zk.HostProvider.
func (h *hostProvider) Init(servers []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers = append([]string(nil), servers...)
	rand.Shuffle(len(h.servers), func(i, j int) { h.servers[i], h.servers[j] = h.servers[j], h.servers[i] })
	return nil
}

// Len implements zk.HostProvider.
func (h *hostProvider) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// Next implements zk.HostProvider.
func (h *hostProvider) Next() (string, bool) {
	h.mu.Lock()
	server := h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	pause := h.tried > len(h.servers)
	if pause {
		h.tried = 1
	}
	h.mu.Unlock()
	select {
	case <-h.quit:
		return server, true // go-zookeeper checks for Close only on a retry start
	default:
	}
	if pause {
		timer := time.NewTimer(100 * time.Millisecond)
		defer timer.Stop()
		select {
		case <-h.quit:
			return server, true
		case <-timer.C:
		}
	}
	return server, false
}

// Connected implements zk.HostProvider.
func (h *hostProvider) Connected() {
	h.mu.Lock()
	h.tried = 0
	h.mu.Unlock()
}

func (h *hostProvider) stop() { h.once.Do(func() { close(h.quit) }) }

// zkLogger routes go-zookeeper's chatty log to hclog at debug.
type zkLogger struct{ log hclog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// backoff returns the pause before retry n (0-based) of a background loop.
func backoff(n int) time.Duration {
	d := maxBackoff / 10
	for i := 0; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	if d > maxBackoff {
		d = maxBackoff
	}
	return d
}

// ensureBase creates the chroot, Kafka's top-level znodes and the
// migration record's znode once, and reads the record: from then on the
// backend knows its bases.
func (b *Backend) ensureBase(ctx context.Context) error {
	b.mu.Lock()
	ready := b.baseReady
	b.mu.Unlock()
	if ready {
		return nil
	}
	var paths []string
	if b.root != "" {
		parts := strings.Split(strings.TrimPrefix(b.root, "/"), "/")
		for i := range parts {
			paths = append(paths, "/"+strings.Join(parts[:i+1], "/"))
		}
	}
	for _, p := range []string{"/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics", "/config/brokers", "/config/changes"} {
		paths = append(paths, b.path(p))
	}
	for _, p := range paths {
		err := b.do(ctx, p, func(c *zk.Conn) error {
			_, err := c.Create(p, nil, 0, b.aclFor(p))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return convertError(err, "create "+p)
		}
	}
	err := b.do(ctx, b.migrationPath(), func(c *zk.Conn) error {
		_, err := b.readRecord(c)
		return err
	})
	if err != nil {
		return convertError(err, "read migration record "+b.migrationPath())
	}
	b.mu.Lock()
	b.baseReady = true
	b.mu.Unlock()
	return nil
}

// wait pauses for d or until ctx or done ends; it reports whether the pause
// ran its course.
func wait(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}
