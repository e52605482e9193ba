package conformance

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
	_ "github.com/tripodmq/tripod/coord/raft" // registers the "raft" backend
	"github.com/tripodmq/tripod/internal/faultnet"
)

// Raft timeouts of the harness. A crashed leader is replaced in about a
// second, well within the suite's session timeout + 1 s (5-node elections
// with pre-vote take up to two heartbeat and two election timeouts, so
// 600 ms was already tight). The lease is shorter than the heartbeat
// timeout, so a cut-off leader steps down before the others can elect a
// new one, yet long enough that a loaded CI machine running -race does not
// depose a healthy leader of a 2-node cluster in the middle of a
// 10 000-partition commit (a 300 ms lease did, about one run in seven).
const (
	harnessRaftHeartbeat = 500 * time.Millisecond
	harnessRaftElection  = 500 * time.Millisecond
	harnessRaftLease     = 400 * time.Millisecond
)

// NewRaftHarness returns the Harness of the embedded Raft backend: each
// NewCluster starts n Raft nodes (voters 1..n) on free loopback ports in
// the test's temporary directory. Its clusters implement QuorumLoser.
// opts adjust every node's Config.
func NewRaftHarness(sessionTimeout time.Duration, opts ...HarnessOption) Harness {
	return raftHarness{sessionTimeout: sessionTimeout, opts: opts}
}

// NewRaftHarnessWithObservers is NewRaftHarness whose clusters also run
// two observers: Raft nodes of brokers 1001 and 1002, not among the
// voters, that join the quorum, receive the log and count toward no
// majority. The cases never use them (Backend(i) is voter i+1): they
// show that the contract holds with observers in the quorum, that
// stopping a majority of the voters stops the cluster though most of
// its nodes are up, and that the observers' joins and reports disturb
// nothing.
func NewRaftHarnessWithObservers(sessionTimeout time.Duration, opts ...HarnessOption) Harness {
	return raftHarness{sessionTimeout: sessionTimeout, observers: 2, opts: opts}
}

type raftHarness struct {
	sessionTimeout time.Duration
	// observers is how many observers each cluster runs beside its
	// voters.
	observers int
	opts      []HarnessOption
}

// firstObserver is the broker of a cluster's first observer, above the
// brokers the cases register.
const firstObserver coord.BrokerID = 1001

// Name implements Harness.
func (h raftHarness) Name() string { return "raft" }

// SessionTimeout implements Harness.
func (h raftHarness) SessionTimeout() time.Duration { return h.sessionTimeout }

// NewCluster implements Harness.
func (h raftHarness) NewCluster(t T, n int) Cluster {
	t.Helper()
	nodes := n + h.observers
	c := &raftCluster{
		h:        h,
		dir:      t.TempDir(),
		n:        n,
		voters:   map[coord.BrokerID]string{},
		addrs:    make([]string, nodes),
		nets:     make([]*faultnet.Net, nodes),
		backends: make([]coord.Backend, nodes),
		logger:   raftTestLogger(t),
	}
	listeners := make([]net.Listener, nodes)
	for i := range nodes {
		c.nets[i] = faultnet.New()
		ln, err := c.nets[i].Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range listeners[:i] {
				l.Close()
			}
			t.Fatalf("raft harness: listen for node %d: %v", c.brokerOf(i), err)
		}
		listeners[i] = ln
		c.addrs[i] = ln.Addr().String()
		if i < n {
			c.voters[coord.BrokerID(i+1)] = c.addrs[i]
		}
	}
	t.Cleanup(c.close)
	for i := range nodes {
		b, err := c.open(i, listeners[i])
		if err != nil {
			for _, l := range listeners[i+1:] {
				l.Close()
			}
			t.Fatalf("raft harness: open node %d: %v", c.brokerOf(i), err)
		}
		c.backends[i] = b
	}
	return c
}

// raftCluster is n Raft voters, one per broker, then the harness's
// observers, each behind its own faultnet.Net.
type raftCluster struct {
	h   raftHarness
	dir string
	// n is the number of voters, brokers 1..n.
	n      int
	voters map[coord.BrokerID]string
	// addrs and nets are node i's Raft address and network, voters
	// first.
	addrs  []string
	nets   []*faultnet.Net
	logger hclog.Logger

	mu sync.Mutex
	// backends are the voters' (Backend(i)), then the observers'.
	backends []coord.Backend
}

// brokerOf is the broker of node i: i+1 for a voter, firstObserver and
// up for an observer.
func (c *raftCluster) brokerOf(i int) coord.BrokerID {
	if i < c.n {
		return coord.BrokerID(i + 1)
	}
	return firstObserver + coord.BrokerID(i-c.n)
}

// open opens node i; ln, when non-nil, is its already open listener.
func (c *raftCluster) open(i int, ln net.Listener) (coord.Backend, error) {
	id := c.brokerOf(i)
	cfg := coord.DefaultConfig()
	cfg.Backend = "raft"
	cfg.BrokerID = id
	cfg.SessionTimeout = c.h.sessionTimeout
	cfg.RaftListen = c.addrs[i]
	cfg.RaftVoters = c.voters
	cfg.RaftDir = filepath.Join(c.dir, fmt.Sprintf("node-%d", id))
	cfg.RaftHeartbeatTimeout = harnessRaftHeartbeat
	cfg.RaftElectionTimeout = harnessRaftElection
	cfg.RaftLeaderLeaseTimeout = harnessRaftLease
	cfg.Logger = c.logger.With("broker", id)
	fn := c.nets[i]
	cfg.Dialer = fn.Dial
	cfg.Listen = func(network, address string) (net.Listener, error) {
		if ln != nil {
			l := ln
			ln = nil
			return l, nil
		}
		return fn.Listen(network, address)
	}
	configure(&cfg, c.h.opts)
	return coord.Open(cfg)
}

// Backend implements Cluster.
func (c *raftCluster) Backend(i int) coord.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backends[i]
}

// Crash implements Cluster.
func (c *raftCluster) Crash(i int) { c.nets[i].Cut() }

// Heal implements Cluster.
func (c *raftCluster) Heal(i int) { c.nets[i].Heal() }

// Restart implements Cluster: it closes node i's backend, which leaves the
// cluster as a stopping broker does, and reopens it from its directory on
// its address.
func (c *raftCluster) Restart(t T, i int) {
	t.Helper()
	c.mu.Lock()
	b := c.backends[i]
	c.backends[i] = nil
	c.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			t.Errorf("raft harness: close node %d: %v", i+1, err)
		}
	}
	nb, err := c.open(i, nil)
	if err != nil {
		t.Fatalf("raft harness: reopen node %d: %v", i+1, err)
	}
	c.mu.Lock()
	c.backends[i] = nb
	c.mu.Unlock()
}

// StopNode implements QuorumLoser: it cuts node i off, then closes its
// backend (which can say no goodbye through the cut network), keeping its
// Raft directory.
func (c *raftCluster) StopNode(t T, i int) {
	t.Helper()
	c.nets[i].Cut()
	c.mu.Lock()
	b := c.backends[i]
	c.backends[i] = nil
	c.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			t.Errorf("raft harness: close node %d: %v", i+1, err)
		}
	}
}

// StartNode implements QuorumLoser: it reopens node i from its directory
// on its address, with the network healed.
func (c *raftCluster) StartNode(t T, i int) {
	t.Helper()
	c.nets[i].Heal()
	b, err := c.open(i, nil)
	if err != nil {
		t.Fatalf("raft harness: restart node %d: %v", i+1, err)
	}
	c.mu.Lock()
	c.backends[i] = b
	c.mu.Unlock()
}

func (c *raftCluster) close() {
	c.mu.Lock()
	backends := append([]coord.Backend(nil), c.backends...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range backends {
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Close()
		}()
	}
	wg.Wait()
}

// raftTestLogger logs the backends' messages through t when
// TRIPOD_RAFT_LOG names a level (e.g. "debug"), and nowhere otherwise:
// Raft reports every refused connection of a fault test as an error.
func raftTestLogger(t T) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("TRIPOD_RAFT_LOG"))
	if level == hclog.NoLevel {
		return hclog.NewNullLogger()
	}
	w := &raftLogWriter{t: t}
	t.Cleanup(w.stop)
	return hclog.New(&hclog.LoggerOptions{Level: level, Output: w})
}

// raftLogWriter writes log lines to a test until stop.
type raftLogWriter struct {
	mu      sync.Mutex
	t       T
	stopped bool
}

func (w *raftLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *raftLogWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}
