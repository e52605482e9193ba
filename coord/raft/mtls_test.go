package raft

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/testca"
)

// withMutualTLS gives cfg the Raft transport's mutual TLS with a
// certificate of ca for its broker.
func withMutualTLS(t testing.TB, ca *testca.CA, cfg *coord.Config) {
	name := fmt.Sprintf("raft-%d", cfg.BrokerID)
	cfg.RaftServerTLS = ca.ServerConfig(t, name, true)
	cfg.RaftClientTLS = ca.ClientConfig(t, name)
}

// logBuffer collects log lines for a test to look for.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// rogueStream is the hraft.StreamLayer of a node outside the cluster
// that speaks tripod's Raft transport (TLS, then the protocol byte and
// the tag of a quorum started on Raft) with
// a TLS configuration of its own.
type rogueStream struct {
	net.Listener
	tls *tls.Config
}

func (s rogueStream) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	cfg := s.tls.Clone()
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := tc.Write(append([]byte{protoRaft}, make([]byte, len(quorumTag{}))...)); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// openLoggedNodes opens a node of each of cfgs, which log warnings and
// above to logs; the nodes backends holds when t ends are closed then.
func openLoggedNodes(t *testing.T, cfgs []coord.Config, logs *logBuffer) (backends []*Backend) {
	t.Helper()
	backends = make([]*Backend, 0, len(cfgs))
	t.Cleanup(func() {
		for _, b := range backends {
			b.Close()
		}
	})
	for i := range cfgs {
		cfgs[i].Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs}).With("broker", cfgs[i].BrokerID)
		b, err := Open(cfgs[i])
		if err != nil {
			t.Fatalf("open node %d: %v", cfgs[i].BrokerID, err)
		}
		backends = append(backends, b)
	}
	return backends
}

// commitAsController registers leader's broker, wins a term on it and
// commits topic, of 3 partitions; it returns the term, whose session
// ends with t.
func commitAsController(t *testing.T, ctx context.Context, leader *Backend, topic string) coord.Term {
	t.Helper()
	s, err := leader.Register(ctx, coord.Broker{ID: leader.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	ctrl, err := leader.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	create, _ := topicOf(topic, 3)
	if err := leader.Commit(ctx, ctrl, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return ctrl
}

// rogueTransport is a hashicorp/raft network transport dialing with
// tlsCfg; closed when t ends.
func rogueTransport(t *testing.T, tlsCfg *tls.Config) *hraft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("rogue listener: %v", err)
	}
	trans := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: rogueStream{Listener: ln, tls: tlsCfg}, MaxPool: 1, Timeout: 2 * time.Second,
		Logger: hclog.NewNullLogger(),
	})
	t.Cleanup(func() { trans.Close() })
	return trans
}

// raftTerm is node b's current Raft term.
func raftTerm(t *testing.T, b *Backend) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(b.raft.Stats()["term"], 10, 64)
	if err != nil {
		t.Fatalf("node %d: term %q: %v", b.id, b.raft.Stats()["term"], err)
	}
	return n
}

// TestMutualTLSRefusesOutsiders: a 3-node cluster with mutual TLS elects,
// registers and commits; then a node whose certificate comes from
// another CA (where one of the cluster's CA is answered) cannot have its
// RequestVote or AppendEntries accepted (the
// handshake is refused before a byte of Raft is read), nor can a client
// with the cluster's CA but no certificate, nor plain TCP speaking the
// protocol byte; a tripod node of another CA that campaigns to join is
// refused by every node; and the cluster's term, configuration, leader
// and metadata stay as they were.
func TestMutualTLSRefusesOutsiders(t *testing.T) {
	ca := testca.New(t, "cluster CA")
	other := testca.New(t, "another CA")
	logs := &logBuffer{}
	cfgs := testConfigs(t, 3)
	for i := range cfgs {
		withMutualTLS(t, ca, &cfgs[i])
	}
	backends := openLoggedNodes(t, cfgs, logs)
	leader := backends[leaderOf(t, backends)]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commitAsController(t, ctx, leader, "orders")
	// A follower forwards over the same mutual TLS.
	follower := backends[(leaderIndex(backends, leader)+1)%3]
	if md, err := follower.Load(ctx); err != nil || len(md.Topics) != 1 {
		t.Fatalf("Load through follower %d: got %v, %v; want the topic", follower.id, md, err)
	}
	termBefore := raftTerm(t, leader)

	victim := backends[(leaderIndex(backends, leader)+1)%3]
	target := hraft.ServerID(serverID(victim.id))
	addr := hraft.ServerAddress(cfgs[victim.id-1].RaftListen)

	// The rogue's requests would depose the leader if accepted: a far
	// higher term and a longer log.
	vote := &hraft.RequestVoteRequest{RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte("127.0.0.1:1")},
		Term: termBefore + 100, LastLogIndex: 1 << 40, LastLogTerm: termBefore + 100}
	appendReq := &hraft.AppendEntriesRequest{RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte("127.0.0.1:1")},
		Term: termBefore + 100, LeaderCommitIndex: 1 << 40,
		Entries: []*hraft.Log{{Index: 1 << 40, Term: termBefore + 100, Type: hraft.LogCommand, Data: []byte("x")}}}
	t.Run("cluster certificate (control)", func(t *testing.T) {
		// The same transport with a certificate of the cluster's CA is
		// answered; a stale term changes nothing.
		peer := rogueTransport(t, ca.ClientConfig(t, "raft-4"))
		stale := *vote
		stale.Term, stale.LastLogIndex, stale.LastLogTerm = 0, 0, 0
		var resp hraft.RequestVoteResponse
		if err := peer.RequestVote(target, addr, &stale, &resp); err != nil || resp.Granted || resp.Term < termBefore {
			t.Fatalf("RequestVote with a stale term: got %+v, %v; want an answer refusing the vote at term >= %d", resp, err, termBefore)
		}
	})
	otherCert := ca.ClientConfig(t, "")
	otherCert.Certificates = other.ClientConfig(t, "raft-4").Certificates
	for name, tlsCfg := range map[string]*tls.Config{
		"certificate of another CA": otherCert,
		"no client certificate":     ca.ClientConfig(t, ""),
	} {
		t.Run(name, func(t *testing.T) {
			refusedBefore := logs.count("refused a Raft connection")
			rogue := rogueTransport(t, tlsCfg)
			var voteResp hraft.RequestVoteResponse
			if err := rogue.RequestVote(target, addr, vote, &voteResp); err == nil {
				t.Errorf("RequestVote: got %+v, want the connection refused", voteResp)
			}
			var appendResp hraft.AppendEntriesResponse
			if err := rogue.AppendEntries(target, addr, appendReq, &appendResp); err == nil {
				t.Errorf("AppendEntries: got %+v, want the connection refused", appendResp)
			}
			waitFor(t, 10*time.Second, "the node logging the refused handshakes", func() bool {
				return logs.count("refused a Raft connection") >= refusedBefore+2
			})
		})
	}

	t.Run("plain TCP", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", string(addr), 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		c.Write([]byte{protoRaft, 0, 0, 0, 0, 0, 0, 0, 0})
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("read: timed out, want the connection closed")
		}
		if len(got) > 0 {
			t.Errorf("read: got %q, want nothing", got)
		}
	})

	t.Run("tripod node of another CA", func(t *testing.T) {
		refusedBefore := logs.count("refused a Raft connection")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		voters := map[coord.BrokerID]string{4: ln.Addr().String()}
		for id, a := range cfgs[0].RaftVoters {
			voters[id] = a
		}
		cfg := coord.DefaultConfig()
		cfg.BrokerID = 4
		cfg.SessionTimeout = 2 * time.Second
		cfg.RaftListen = ln.Addr().String()
		cfg.RaftVoters = voters
		cfg.RaftDir = filepath.Join(t.TempDir(), "rogue")
		cfg.RaftHeartbeatTimeout, cfg.RaftElectionTimeout, cfg.RaftLeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		cfg.Listen = func(string, string) (net.Listener, error) { return ln, nil }
		withMutualTLS(t, other, &cfg)
		rogue, err := Open(cfg)
		if err != nil {
			t.Fatalf("open the rogue node: %v", err)
		}
		defer rogue.Close()
		// It campaigns: every node of the cluster refuses it.
		waitFor(t, 15*time.Second, "the cluster refusing the rogue node's connections", func() bool {
			return logs.count("refused a Raft connection") >= refusedBefore+3
		})
		if st := rogue.raft.State(); st == hraft.Leader {
			t.Errorf("rogue node: state %v, want no leadership", st)
		}
	})

	// Nothing changed: the leader, its term (no rogue term adopted), the
	// configuration and the metadata.
	if got := raftTerm(t, leader); got >= termBefore+100 {
		t.Errorf("leader's term: got %d, want below the rogue's %d", got, termBefore+100)
	}
	for _, b := range backends {
		if got := raftTerm(t, b); got >= termBefore+100 {
			t.Errorf("node %d term: got %d, want below the rogue's %d", b.id, got, termBefore+100)
		}
		f := b.raft.GetConfiguration()
		if err := f.Error(); err != nil || len(f.Configuration().Servers) != 3 {
			t.Errorf("node %d configuration: got %v, %v; want the 3 voters", b.id, f.Configuration().Servers, err)
		}
		md, err := b.Load(ctx)
		if err != nil || len(md.Topics) != 1 || len(md.Partitions) != 3 {
			t.Errorf("node %d metadata: got %v, %v; want orders and its 3 partitions", b.id, md, err)
		}
	}
	if leader.raft.State() != hraft.Leader {
		t.Logf("node %d lost leadership during the test (load); the rogue's terms were refused all the same", leader.id)
	}
}

// leaderIndex is the index of leader in backends.
func leaderIndex(backends []*Backend, leader *Backend) int {
	for i, b := range backends {
		if b == leader {
			return i
		}
	}
	return -1
}

// TestMutualTLSNeedsBoth: a Config with only one side of the Raft TLS is
// refused.
func TestMutualTLSNeedsBoth(t *testing.T) {
	ca := testca.New(t, "cluster CA")
	cfg := testConfigs(t, 1)[0]
	cfg.RaftServerTLS = ca.ServerConfig(t, "raft-1", true)
	if b, err := Open(cfg); err == nil {
		b.Close()
		t.Fatalf("Open with RaftServerTLS only: got nil error, want one naming raft.ssl.*")
	}
}

// TestMutualTLSObserverJoins: joins and reports travel on the Raft port,
// behind its mutual TLS. Of three voters and two observers, all with the
// cluster's CA, the observer with a certificate of it joins, registers
// and reads; the one that offers no client certificate is refused at
// the handshake by every node it asks, and never enters the
// configuration.
func TestMutualTLSObserverJoins(t *testing.T) {
	ca := testca.New(t, "cluster CA")
	logs := &logBuffer{}
	qn := newQuorumNet(t, 3, 2, func(cfg *coord.Config) {
		withMutualTLS(t, ca, cfg)
		if cfg.BrokerID == 5 {
			cfg.RaftClientTLS = ca.ClientConfig(t, "")
		}
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs}).With("broker", cfg.BrokerID)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4]")
	s, err := qn.node(4).Register(ctx, coord.Broker{ID: 4, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register on observer 4: %v", err)
	}
	defer s.Close()
	if members, err := qn.node(4).Members(ctx); err != nil || len(members) != 1 {
		t.Fatalf("Members on observer 4: got %v, %v; want its registration", members, err)
	}
	// Observer 5 asks each of the three voters in turn.
	waitFor(t, 20*time.Second, "the voters refusing observer 5's connections", func() bool {
		return logs.count("refused a Raft connection") >= 3
	})
	if got := membership(qn.leader()); got != "voters [1 2 3] observers [4]" {
		t.Fatalf("configuration with observer 5 refused: got %s, want voters [1 2 3] observers [4]", got)
	}
	if _, err := qn.node(5).Members(ctx); err == nil {
		t.Fatalf("Members on observer 5, refused by the cluster: got nil error, want ErrUnavailable")
	}
}
