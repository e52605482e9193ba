package raft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/faultnet"
)

// quorumNet is a cluster of in-process Raft nodes on loopback, each
// behind its own faultnet.Net: voters 1..v (raft.voters) and observers
// after them (not in raft.voters, joining through them). t.Cleanup
// closes every node.
type quorumNet struct {
	t      testing.TB
	voters map[coord.BrokerID]string
	nodes  []*quorumNode // node i+1 at i

	mu sync.Mutex
}

// quorumNode is one node of a quorumNet.
type quorumNode struct {
	cfg coord.Config
	net *faultnet.Net
	b   *Backend // nil while stopped
}

// newQuorumNet opens v voters and o observers; configure, when not nil,
// adjusts each node's Config.
func newQuorumNet(t testing.TB, v, o int, configure func(*coord.Config)) *quorumNet {
	t.Helper()
	qn := &quorumNet{t: t, voters: map[coord.BrokerID]string{}}
	dir := t.TempDir()
	listeners := make([]net.Listener, v+o)
	for i := range v + o {
		fn := faultnet.New()
		ln, err := fn.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen for node %d: %v", i+1, err)
		}
		listeners[i] = ln
		if i < v {
			qn.voters[coord.BrokerID(i+1)] = ln.Addr().String()
		}
		qn.nodes = append(qn.nodes, &quorumNode{net: fn})
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range qn.nodes {
			if n.b != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n.b.Close()
				}()
			}
		}
		wg.Wait()
	})
	for i, n := range qn.nodes {
		id := coord.BrokerID(i + 1)
		cfg := coord.DefaultConfig()
		cfg.BrokerID = id
		cfg.SessionTimeout = 2 * time.Second
		cfg.RaftListen = listeners[i].Addr().String()
		cfg.RaftVoters = qn.voters
		cfg.RaftDir = filepath.Join(dir, fmt.Sprint(id))
		cfg.RaftHeartbeatTimeout = 500 * time.Millisecond
		cfg.RaftElectionTimeout = 500 * time.Millisecond
		cfg.RaftLeaderLeaseTimeout = 300 * time.Millisecond
		cfg.Logger = testLogger(t, id)
		cfg.Dialer = n.net.Dial
		// The first Open takes the listener that reserved the port; a
		// reopen listens on the same address again.
		var once sync.Mutex
		ln := listeners[i]
		t.Cleanup(func() {
			once.Lock()
			defer once.Unlock()
			if ln != nil {
				ln.Close()
			}
		})
		fn := n.net
		cfg.Listen = func(network, address string) (net.Listener, error) {
			once.Lock()
			defer once.Unlock()
			if l := ln; l != nil {
				ln = nil
				return l, nil
			}
			return fn.Listen(network, address)
		}
		if configure != nil {
			configure(&cfg)
		}
		n.cfg = cfg
	}
	for i := range qn.nodes {
		qn.start(coord.BrokerID(i + 1))
	}
	return qn
}

// node returns node id's backend.
func (qn *quorumNet) node(id coord.BrokerID) *Backend {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	return qn.nodes[id-1].b
}

// start opens node id from its directory, with its network healed.
func (qn *quorumNet) start(id coord.BrokerID) *Backend {
	qn.t.Helper()
	n := qn.nodes[id-1]
	n.net.Heal()
	b, err := Open(n.cfg)
	if err != nil {
		qn.t.Fatalf("open node %d: %v", id, err)
	}
	qn.mu.Lock()
	n.b = b
	qn.mu.Unlock()
	return b
}

// stop closes node id cleanly.
func (qn *quorumNet) stop(id coord.BrokerID) {
	qn.t.Helper()
	qn.mu.Lock()
	n := qn.nodes[id-1]
	b := n.b
	n.b = nil
	qn.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			qn.t.Fatalf("close node %d: %v", id, err)
		}
	}
}

// crash cuts node id off as a SIGKILL would: its connections drop and it
// reaches no one (the backend stays open, alone, until heal or cleanup).
func (qn *quorumNet) crash(id coord.BrokerID) { qn.nodes[id-1].net.Cut() }

// heal undoes crash.
func (qn *quorumNet) heal(id coord.BrokerID) { qn.nodes[id-1].net.Heal() }

// leader waits for a leader among the nodes that are open and not cut
// off, and returns it.
func (qn *quorumNet) leader() *Backend {
	qn.t.Helper()
	var leader *Backend
	waitFor(qn.t, 20*time.Second, "a raft leader", func() bool {
		qn.mu.Lock()
		defer qn.mu.Unlock()
		for _, n := range qn.nodes {
			if n.b != nil && !n.net.IsCut() && n.b.raft.State() == hraft.Leader && n.b.currentLead() != nil {
				leader = n.b
				return true
			}
		}
		return false
	})
	return leader
}

// membership is b's configuration as "voters [..] observers [..]".
func membership(b *Backend) string {
	var voters, observers []coord.BrokerID
	for _, s := range b.configuration().Servers {
		id, _ := brokerOf(s.ID)
		if s.Suffrage == hraft.Voter {
			voters = append(voters, id)
		} else {
			observers = append(observers, id)
		}
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return fmt.Sprintf("voters %v observers %v", voters, observers)
}

// waitMembership waits until the leader's configuration is want.
func (qn *quorumNet) waitMembership(d time.Duration, want string) {
	qn.t.Helper()
	var got string
	waitFor(qn.t, d, "the raft configuration "+want, func() bool {
		got = membership(qn.leader())
		return got == want
	})
}

// memberIDs are the IDs of ms.
func memberIDs(ms []coord.QuorumMember) []coord.BrokerID {
	ids := make([]coord.BrokerID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// controllerOn registers broker b.id on b and campaigns until it holds a
// term.
func controllerOn(t testing.TB, ctx context.Context, b *Backend) (coord.Session, coord.Term) {
	t.Helper()
	var s coord.Session
	waitFor(t, 15*time.Second, fmt.Sprintf("broker %d registered", b.id), func() bool {
		var err error
		s, err = b.Register(ctx, coord.Broker{ID: b.id, Host: "127.0.0.1", Port: 9092})
		if err != nil && !errors.Is(err, coord.ErrExists) && !errors.Is(err, coord.ErrUnavailable) {
			t.Fatalf("Register of broker %d: %v", b.id, err)
		}
		return err == nil
	})
	term, err := b.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign of broker %d: %v", b.id, err)
	}
	return s, term
}

// TestObserversReadWriteAndLeave: of five nodes, three are voters and two
// observers. The observers join, register, read the metadata the
// controller commits and write (producer ids) through the leader; one
// campaigning waits without asking for leadership. DescribeQuorum, on
// the leader and through an observer, lists the voters and observers
// with the leader's log end once they have caught up. The leader and
// both observers crash: the two other voters elect a leader that
// commits, and that leader removes the crashed observers once their
// registrations have expired. A healed observer joins again, a restarted
// one too, and one closed cleanly leaves at once.
func TestObserversReadWriteAndLeave(t *testing.T) {
	qn := newQuorumNet(t, 3, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4 5]")

	// Observers register through the leader and read their own writes.
	var sessions []coord.Session
	for _, id := range []coord.BrokerID{4, 5} {
		s, err := qn.node(id).Register(ctx, coord.Broker{ID: id, Host: "127.0.0.1", Port: 9092})
		if err != nil {
			t.Fatalf("Register on observer %d: %v", id, err)
		}
		sessions = append(sessions, s)
		members, err := qn.node(id).Members(ctx)
		if err != nil || !slices.ContainsFunc(members, s.Broker().Equal) {
			t.Fatalf("Members on observer %d: got %v, %v; want its own registration", id, members, err)
		}
	}
	leader := qn.leader()
	_, term := controllerOn(t, ctx, leader)
	create, _ := topicOf("orders", 3)
	if err := leader.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, id := range []coord.BrokerID{4, 5} {
		md, err := qn.node(id).Load(ctx)
		if err != nil || len(md.Topics) != 1 || len(md.Partitions) != 3 {
			t.Fatalf("Load on observer %d: got %v, %v; want orders and its 3 partitions", id, md, err)
		}
		if _, err := qn.node(id).AllocateProducerIDs(ctx, id); err != nil {
			t.Fatalf("AllocateProducerIDs on observer %d: %v", id, err)
		}
	}

	// An observer's campaign waits, asking the leader for nothing.
	campaignCtx, campaignCancel := context.WithTimeout(ctx, time.Second)
	if got, err := qn.node(4).Campaign(campaignCtx, sessions[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign on observer 4: got %v, %v; want the context's deadline", got, err)
	}
	campaignCancel()
	if _, asked := leader.interestedNode(); asked {
		t.Fatalf("the leader heard a request for leadership, want none from an observer")
	}

	// DescribeQuorum on the leader and through an observer.
	for _, via := range []coord.BrokerID{leader.id, 4} {
		var q coord.QuorumState
		waitFor(t, 10*time.Second, fmt.Sprintf("DescribeQuorum through node %d showing every member caught up", via), func() bool {
			var err error
			q, err = qn.node(via).DescribeQuorum(ctx)
			if err != nil {
				t.Fatalf("DescribeQuorum through node %d: %v", via, err)
			}
			leo := q.Voters[slices.IndexFunc(q.Voters, func(m coord.QuorumMember) bool { return m.ID == leader.id })].LogEndOffset
			for _, m := range append(slices.Clone(q.Voters), q.Observers...) {
				if m.LogEndOffset != leo || m.LastCaughtUp.IsZero() || time.Since(m.LastFetch) > leader.liveWindow() {
					return false
				}
			}
			return q.HighWatermark == leo
		})
		if q.LeaderID != leader.id || q.LeaderEpoch != int64(raftTerm(t, leader)) {
			t.Fatalf("DescribeQuorum through node %d: leader %d epoch %d, want %d epoch %d", via, q.LeaderID, q.LeaderEpoch, leader.id, raftTerm(t, leader))
		}
		if got := fmt.Sprint(memberIDs(q.Voters), memberIDs(q.Observers)); got != "[1 2 3] [4 5]" {
			t.Fatalf("DescribeQuorum through node %d: voters and observers %s, want [1 2 3] [4 5]", via, got)
		}
		for _, m := range append(slices.Clone(q.Voters), q.Observers...) {
			if m.Address != qn.nodes[m.ID-1].cfg.RaftListen {
				t.Fatalf("DescribeQuorum through node %d: member %d at %s, want %s", via, m.ID, m.Address, qn.nodes[m.ID-1].cfg.RaftListen)
			}
		}
	}

	// The leader and both observers crash: two voters of three remain.
	qn.crash(leader.id)
	qn.crash(4)
	qn.crash(5)
	next := qn.leader()
	if next == leader {
		t.Fatalf("the crashed node %d still leads", leader.id)
	}
	_, nextTerm := controllerOn(t, ctx, next)
	after, _ := topicOf("after-crash", 1)
	if err := next.Commit(ctx, nextTerm, after); err != nil {
		t.Fatalf("Commit on the new leader %d: %v", next.id, err)
	}
	// Crashed observers are removed once their registrations expired and
	// they have not reported for a session timeout.
	qn.waitMembership(5*qn.nodes[0].cfg.SessionTimeout, "voters [1 2 3] observers []")

	// A healed observer joins again, and so does a restarted one.
	qn.heal(4)
	qn.stop(5)
	qn.start(5)
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4 5]")
	if md, err := qn.node(5).Load(ctx); err != nil || len(md.Topics) != 2 {
		t.Fatalf("Load on the restarted observer 5: got %v, %v; want orders and after-crash", md, err)
	}

	// A clean Close leaves at once, well within a session timeout.
	closed := time.Now()
	qn.stop(4)
	qn.waitMembership(qn.nodes[0].cfg.SessionTimeout, "voters [1 2 3] observers [5]")
	t.Logf("observer 4 left the configuration %v after its Close began", time.Since(closed).Round(time.Millisecond))
}

// TestQuorumGrowsAndShrinks: a controller commits topics without pause
// while two observers become voters (one change asked through an
// observer, forwarded) and are removed again (one asking for its own
// removal); the live ones stay observers. Requests naming a voter to add
// or a stranger are refused with their sentinels, changes made right
// after one another are each conditioned on the last, and an observer
// cut off is not made a voter (ErrNotCaughtUp). Every commit that
// returned is on every live node at the end, and commits went on through
// every change.
func TestQuorumGrowsAndShrinks(t *testing.T) {
	qn := newQuorumNet(t, 3, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4 5]")

	controller := qn.node(1)
	s, term := controllerOn(t, ctx, controller)
	var (
		mu        sync.Mutex
		committed []string
		failures  []error
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(committed)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("t%05d", i)
			create, _ := topicOf(name, 1)
			for {
				err := controller.Commit(ctx, term, create)
				if err == nil || errors.Is(err, coord.ErrExists) {
					mu.Lock()
					committed = append(committed, name)
					mu.Unlock()
					break
				}
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				// Leadership moved (a loaded machine): campaign again and
				// retry the same topic.
				if term.Context().Err() != nil {
					if term, err = controller.Campaign(ctx, s); err != nil {
						return
					}
				}
			}
		}
	}()
	flowing := func(step string) {
		t.Helper()
		before := count()
		waitFor(t, 20*time.Second, "commits flowing after "+step, func() bool { return count() >= before+5 })
	}
	flowing("the start")

	if err := qn.node(5).AddVoter(ctx, 4); err != nil {
		t.Fatalf("AddVoter(4) through observer 5: %v", err)
	}
	flowing("adding voter 4")
	if err := qn.node(1).AddVoter(ctx, 5); err != nil {
		t.Fatalf("AddVoter(5): %v", err)
	}
	flowing("adding voter 5")
	qn.waitMembership(5*time.Second, "voters [1 2 3 4 5] observers []")
	q, err := qn.node(3).DescribeQuorum(ctx)
	if err != nil || len(q.Voters) != 5 || len(q.Observers) != 0 {
		t.Fatalf("DescribeQuorum with five voters: got %+v, %v", q, err)
	}

	if err := qn.node(2).AddVoter(ctx, 4); !errors.Is(err, coord.ErrDuplicateVoter) {
		t.Fatalf("AddVoter of voter 4: got %v, want ErrDuplicateVoter", err)
	}
	if err := qn.node(2).AddVoter(ctx, 42); !errors.Is(err, coord.ErrVoterNotFound) {
		t.Fatalf("AddVoter of a broker that never joined: got %v, want ErrVoterNotFound", err)
	}
	if err := qn.node(2).RemoveVoter(ctx, 42); !errors.Is(err, coord.ErrVoterNotFound) {
		t.Fatalf("RemoveVoter of a broker that never joined: got %v, want ErrVoterNotFound", err)
	}

	if err := qn.node(2).RemoveVoter(ctx, 5); err != nil {
		t.Fatalf("RemoveVoter(5): %v", err)
	}
	flowing("removing voter 5")
	if err := qn.node(4).RemoveVoter(ctx, 4); err != nil {
		t.Fatalf("RemoveVoter(4) asked by broker 4 itself: %v", err)
	}
	flowing("removing voter 4")
	qn.waitMembership(5*time.Second, "voters [1 2 3] observers [4 5]")
	if err := qn.node(2).RemoveVoter(ctx, 4); !errors.Is(err, coord.ErrVoterNotFound) {
		t.Fatalf("RemoveVoter of observer 4: got %v, want ErrVoterNotFound", err)
	}

	// Changes right after one another are each conditioned on the last.
	if err := qn.node(1).AddVoter(ctx, 4); err != nil {
		t.Fatalf("AddVoter(4) again: %v", err)
	}
	if err := qn.node(1).RemoveVoter(ctx, 4); err != nil {
		t.Fatalf("RemoveVoter(4) right after its AddVoter: %v", err)
	}

	// An observer that stopped reporting is not made a voter. Its broker
	// registered (through node 1) keeps it in the configuration.
	s5, err := qn.node(1).Register(ctx, coord.Broker{ID: 5, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register of broker 5: %v", err)
	}
	defer s5.Close()
	qn.crash(5)
	waitFor(t, 10*time.Second, "the leader no longer hearing from observer 5", func() bool {
		leader := qn.leader()
		lead := leader.currentLead()
		return lead != nil && !leader.heardFrom(lead, 5)
	})
	shortCtx, shortCancel := context.WithTimeout(ctx, time.Second)
	err = qn.node(2).AddVoter(shortCtx, 5)
	shortCancel()
	if !errors.Is(err, coord.ErrNotCaughtUp) {
		t.Fatalf("AddVoter of observer 5, cut off: got %v, want ErrNotCaughtUp", err)
	}
	t.Logf("refused: %v", err)
	qn.waitMembership(time.Second, "voters [1 2 3] observers [4 5]")

	close(stop)
	<-done
	mu.Lock()
	want := slices.Clone(committed)
	t.Logf("%d topics committed across the changes, %d commit attempts retried: %v", len(want), len(failures), failures)
	mu.Unlock()
	for id := coord.BrokerID(1); id <= 4; id++ {
		md, err := qn.node(id).Load(ctx)
		if err != nil {
			t.Fatalf("Load on node %d: %v", id, err)
		}
		for _, name := range want {
			if _, ok := md.Topics[name]; !ok {
				t.Fatalf("Load on node %d: topic %s missing of the %d committed", id, name, len(want))
			}
		}
	}
}

// TestRemoveVoterKeepsALiveMajority follows the majority rule down from
// four voters. With one of four dead, removing it leaves three live
// voters: done, and it comes back as an observer. With one of three
// dead, removing a live one would leave one live voter of two: refused,
// naming the rule; removing the dead one leaves two live: done. Then one
// of two live goes, and the last voter is refused. The quorum commits
// after every change.
func TestRemoveVoterKeepsALiveMajority(t *testing.T) {
	qn := newQuorumNet(t, 4, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// heard reports whether the current leader heard from node id within
	// its live window.
	heard := func(id coord.BrokerID) bool {
		leader := qn.leader()
		lead := leader.currentLead()
		return lead != nil && leader.heardFrom(lead, id)
	}
	// crashFollower crashes a voter that does not lead, and waits until
	// the leader counts it dead.
	crashFollower := func() coord.BrokerID {
		t.Helper()
		leader := qn.leader()
		voters := voterIDs(leader.configuration())
		waitFor(t, 10*time.Second, "the leader hearing from every voter", func() bool {
			return !slices.ContainsFunc(voters, func(id coord.BrokerID) bool { return !heard(id) })
		})
		dead := voters[slices.IndexFunc(voters, func(id coord.BrokerID) bool { return id != leader.id })]
		qn.crash(dead)
		waitFor(t, 10*time.Second, fmt.Sprintf("the leader no longer hearing from node %d", dead), func() bool { return !heard(dead) })
		return dead
	}
	commits := func(when string) {
		t.Helper()
		if _, err := qn.leader().AllocateProducerIDs(ctx, 1); err != nil {
			t.Fatalf("a write %s: %v", when, err)
		}
	}

	dead := crashFollower()
	if err := qn.leader().RemoveVoter(ctx, dead); err != nil {
		t.Fatalf("RemoveVoter of dead voter %d of four: %v", dead, err)
	}
	if _, ok := findServer(qn.leader().configuration(), dead); ok {
		t.Fatalf("configuration after removing dead voter %d: %s, want it gone", dead, membership(qn.leader()))
	}
	commits("with three voters")
	qn.heal(dead)
	waitFor(t, 20*time.Second, fmt.Sprintf("node %d back as an observer", dead), func() bool {
		srv, ok := findServer(qn.leader().configuration(), dead)
		return ok && srv.Suffrage == hraft.Nonvoter
	})

	dead = crashFollower()
	leader := qn.leader()
	live := voterIDs(leader.configuration())[slices.IndexFunc(voterIDs(leader.configuration()), func(id coord.BrokerID) bool { return id != leader.id && id != dead })]
	err := leader.RemoveVoter(ctx, live)
	if !errors.Is(err, coord.ErrNoLiveMajority) || !strings.Contains(err.Error(), "a majority of the new voters live") {
		t.Fatalf("RemoveVoter of live voter %d with voter %d dead: got %v, want ErrNoLiveMajority naming the rule", live, dead, err)
	}
	t.Logf("refused: %v", err)
	if err := leader.RemoveVoter(ctx, dead); err != nil {
		t.Fatalf("RemoveVoter of dead voter %d of three: %v", dead, err)
	}
	commits("with two voters")
	if err := leader.RemoveVoter(ctx, live); err != nil {
		t.Fatalf("RemoveVoter of live voter %d of two: %v", live, err)
	}
	last := voterIDs(qn.leader().configuration())
	if len(last) != 1 || !slices.Contains([]coord.BrokerID{leader.id, live}, last[0]) {
		t.Fatalf("voters after removing %d: got %v, want one of %d and %d", live, last, leader.id, live)
	}
	if srv, ok := findServer(qn.leader().configuration(), live); !ok || srv.Suffrage != hraft.Nonvoter {
		t.Fatalf("live voter %d after its removal: got %+v in %s, want an observer", live, srv, membership(qn.leader()))
	}
	err = qn.leader().RemoveVoter(ctx, last[0])
	if !errors.Is(err, coord.ErrNoLiveMajority) || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("RemoveVoter of the last voter: got %v, want ErrNoLiveMajority naming the last voter", err)
	}
	commits("with one voter")
}

// TestRestartKeepsRecordedQuorum: the quorum changes (4 added, 3
// demoted), every node stops, and every node starts again with the
// original raft.voters: each one whose flags disagree says so at WARN,
// once, and the recorded quorum wins (3 does not vote, 4 does).
func TestRestartKeepsRecordedQuorum(t *testing.T) {
	logs := &logBuffer{}
	qn := newQuorumNet(t, 3, 1, func(cfg *coord.Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs}).With("broker", cfg.BrokerID)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4]")
	if err := qn.node(1).AddVoter(ctx, 4); err != nil {
		t.Fatalf("AddVoter(4): %v", err)
	}
	if err := qn.node(1).RemoveVoter(ctx, 3); err != nil {
		t.Fatalf("RemoveVoter(3): %v", err)
	}
	qn.waitMembership(5*time.Second, "voters [1 2 4] observers [3]")
	waitFor(t, 10*time.Second, "every node knowing the new quorum", func() bool {
		for id := coord.BrokerID(1); id <= 4; id++ {
			if membership(qn.node(id)) != "voters [1 2 4] observers [3]" {
				return false
			}
		}
		return true
	})
	const warning = "raft.voters differs from the quorum recorded in raft.dir"
	if n := logs.count(warning); n != 0 {
		t.Fatalf("warnings before the restart: %d, want 0", n)
	}
	for id := coord.BrokerID(1); id <= 4; id++ {
		qn.stop(id)
	}
	for id := coord.BrokerID(1); id <= 4; id++ {
		qn.start(id)
	}
	leader := qn.leader()
	if leader.id == 3 {
		t.Fatalf("node 3, demoted, leads after the restart")
	}
	qn.waitMembership(20*time.Second, "voters [1 2 4] observers [3]")
	_, term := controllerOn(t, ctx, leader)
	create, _ := topicOf("after-restart", 1)
	if err := leader.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit after the restart: %v", err)
	}
	// Nodes 1..3 were started with raft.voters 1,2,3 (node 4 as an
	// observer of them too): all four disagree with the record.
	if n := logs.count(warning); n != 4 {
		t.Fatalf("warnings after the restart: got %d, want one per node (4)", n)
	}
}

// TestLoneVoterGrows: a lone voter (tripod serve) is joined by an
// observer, which becomes a voter. The lone voter takes the configured
// timeouts when the observer joins, and hands leadership to the new
// voter, its own lease being the lone voter's; the new leader commits and
// the old one reads the commit.
func TestLoneVoterGrows(t *testing.T) {
	qn := newQuorumNet(t, 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lone := qn.node(1)
	if !lone.loneLease {
		t.Fatalf("node 1, alone in raft.voters: loneLease false, want true")
	}
	qn.waitMembership(20*time.Second, "voters [1] observers [2]")
	waitFor(t, 10*time.Second, "the lone voter taking the configured heartbeat timeout", func() bool {
		return lone.raft.ReloadableConfig().HeartbeatTimeout == lone.cfg.RaftHeartbeatTimeout
	})
	if err := lone.AddVoter(ctx, 2); err != nil {
		t.Fatalf("AddVoter(2): %v", err)
	}
	waitFor(t, 20*time.Second, "node 2 leading", func() bool {
		return qn.node(2).currentLead() != nil
	})
	if lone.mayLead() {
		t.Fatalf("node 1, started alone with a short lease, may lead a quorum of two; want not")
	}
	_, term := controllerOn(t, ctx, qn.node(2))
	create, _ := topicOf("grown", 2)
	if err := qn.node(2).Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit on node 2: %v", err)
	}
	if md, err := lone.Load(ctx); err != nil || len(md.Partitions) != 2 {
		t.Fatalf("Load on node 1: got %v, %v; want grown's 2 partitions", md, err)
	}
}
