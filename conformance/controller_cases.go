package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// The controller cases run the one controller.Controller on a backend,
// with brokers reduced to what the controller sees of them: a
// registration and a campaign loop. They prove that leadership decisions
// are the same on every backend (the decisions themselves are table
// tested in controller/); the broker processes are tested in broker/.
// `go test ./conformance/` runs them on all three backends
// (controller_test.go), and on clusters migrated between backends
// (MigratedHarness); `tripod conformance` runs them after the backend's
// own cases (RunAll), with --migrate-from on migrated clusters
// (RunAllWith).

// RunController runs the controller cases against h, each on a fresh
// cluster of 3.
func RunController(t *testing.T, h Harness) {
	for _, tc := range controllerCases() {
		t.Run(tc.fullName(), func(t *testing.T) { tc.run(t, h) })
	}
}

// controllerGroup is the group of the controller cases.
const controllerGroup = "Controller"

func controllerCases() []testCase {
	return []testCase{
		{controllerGroup, "TopicLeadersSpreadEvenly", needsNothing, testControllerSpreadsLeaders},
		{controllerGroup, "BrokerCrashMovesLeadershipWithinISR", needsNothing, testControllerBrokerCrash},
		{controllerGroup, "ControllerCrashNewControllerTakesOver", needsNothing, testControllerCrash},
		{controllerGroup, "AllReplicasDownThenISRMemberReturns", needsNothing, testControllerAllReplicasDown},
		{controllerGroup, "ControlledShutdownMovesLeadership", needsNothing, testControllerControlledShutdown},
		{controllerGroup, "PreferredLeaderRebalance", needsNothing, testControllerPreferredRebalance},
		{controllerGroup, "OfflineReplicaLosesLeadershipAndISR", needsNothing, testControllerOfflineReplica},
		{controllerGroup, "DeposedControllerStops", needsNothing, testControllerDeposed},
	}
}

// recordingSender keeps the last request of each kind sent to each broker.
type recordingSender struct {
	mu   sync.Mutex
	sent map[coord.BrokerID][]controller.Request
}

func (s *recordingSender) Send(to coord.Broker, req controller.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[coord.BrokerID][]controller.Request{}
	}
	s.sent[to.ID] = append(s.sent[to.ID], req)
}

func (s *recordingSender) Drop(id coord.BrokerID) {}

// leaderAndIsrFor returns the last LeaderAndIsr state of tp sent to id.
func (s *recordingSender) leaderAndIsrFor(id coord.BrokerID, tp coord.TopicPartition) (controller.PartitionInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reqs := s.sent[id]
	for i := len(reqs) - 1; i >= 0; i-- {
		if r, ok := reqs[i].(*controller.LeaderAndIsrRequest); ok {
			for _, p := range r.Partitions {
				if p.TopicPartition() == tp {
					return p, true
				}
			}
		}
	}
	return controller.PartitionInfo{}, false
}

// liveInLastUpdateMetadata returns the live brokers of the last
// UpdateMetadata sent to id, and false if none was sent.
func (s *recordingSender) liveInLastUpdateMetadata(id coord.BrokerID) ([]coord.BrokerID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reqs := s.sent[id]
	for i := len(reqs) - 1; i >= 0; i-- {
		if r, ok := reqs[i].(*controller.UpdateMetadataRequest); ok {
			var ids []coord.BrokerID
			for _, b := range r.Live {
				ids = append(ids, b.ID)
			}
			return ids, true
		}
	}
	return nil, false
}

// updateMetadata counts the UpdateMetadata requests of controller epoch
// epoch sent to id that hold at least partitions partition states.
func (s *recordingSender) updateMetadata(id coord.BrokerID, epoch int64, partitions int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, req := range s.sent[id] {
		if r, ok := req.(*controller.UpdateMetadataRequest); ok && r.ControllerEpoch == epoch && len(r.Partitions) >= partitions {
			n++
		}
	}
	return n
}

// controllerNode is broker i+1 as the controller sees it: registered, and
// campaigning in a loop; when it wins it runs a controller.Controller.
type controllerNode struct {
	index   int
	id      coord.BrokerID
	backend coord.Backend
	sender  *recordingSender
	cancel  context.CancelFunc
	done    chan struct{}

	mu         sync.Mutex
	session    coord.Session
	controller *controller.Controller
}

func startControllerNode(t T, c Cluster, i int) *controllerNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &controllerNode{index: i, id: coord.BrokerID(i + 1), backend: c.Backend(i), sender: &recordingSender{}, cancel: cancel, done: make(chan struct{})}
	go n.loop(ctx)
	t.Cleanup(n.stop)
	return n
}

func (n *controllerNode) loop(ctx context.Context) {
	defer close(n.done)
	for ctx.Err() == nil {
		regCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := n.backend.Register(regCtx, coord.Broker{ID: n.id, Host: "127.0.0.1", Port: 9000 + int32(n.id)})
		cancel()
		if err != nil {
			if !waitOrDone(ctx, 50*time.Millisecond) {
				return
			}
			continue
		}
		n.mu.Lock()
		n.session = s
		n.mu.Unlock()
		for s.Err() == nil && ctx.Err() == nil {
			term, err := n.backend.Campaign(ctx, s)
			if err != nil {
				break
			}
			cfg := controller.DefaultConfig()
			cfg.LeaderImbalanceCheckInterval = 200 * time.Millisecond
			ctrl, err := controller.Start(ctx, cfg, n.backend, term, n.sender)
			if err != nil {
				term.Resign(context.Background())
				continue
			}
			n.mu.Lock()
			n.controller = ctrl
			n.mu.Unlock()
			select {
			case <-ctrl.Done():
			case <-ctx.Done():
				term.Resign(context.Background())
				ctrl.Wait()
			}
			n.mu.Lock()
			n.controller = nil
			n.mu.Unlock()
		}
		s.Close()
	}
}

func (n *controllerNode) stop() {
	n.cancel()
	<-n.done
}

// registration waits for the node's session and returns its broker: the
// backend may list the node live before Register has returned to it.
func (n *controllerNode) registration(t T) coord.Broker {
	t.Helper()
	var b coord.Broker
	waitFor(t, 10*time.Second, fmt.Sprintf("broker %d's session", n.id), func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.session == nil {
			return false
		}
		b = n.session.Broker()
		return true
	})
	return b
}

func (n *controllerNode) currentController() *controller.Controller {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.controller
}

func waitOrDone(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// controllerCluster is three controller nodes on one fresh cluster.
type controllerCluster struct {
	c     Cluster
	nodes []*controllerNode
}

func newControllerCluster(t T, h Harness, n int) *controllerCluster {
	c := h.NewCluster(t, n)
	cc := &controllerCluster{c: c}
	for i := 0; i < n; i++ {
		cc.nodes = append(cc.nodes, startControllerNode(t, c, i))
	}
	cc.waitMembers(t, 0, n, 10*time.Second)
	return cc
}

// controller waits for a node running a controller and returns it,
// skipping the nodes in except.
func (cc *controllerCluster) controller(t T, within time.Duration, except ...int) *controllerNode {
	t.Helper()
	var found *controllerNode
	waitFor(t, within, "a running controller", func() bool {
		for _, n := range cc.nodes {
			if slices.Contains(except, n.index) {
				continue
			}
			if ctrl := n.currentController(); ctrl != nil && ctrl.Err() == nil {
				found = n
				return true
			}
		}
		return false
	})
	return found
}

// waitMembers waits until backend observer lists want live brokers.
func (cc *controllerCluster) waitMembers(t T, observer, want int, within time.Duration) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("%d live brokers", want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ms, err := cc.c.Backend(observer).Members(ctx)
		return err == nil && len(ms) == want
	})
}

// createTopic creates a topic through whichever node is the controller.
func (cc *controllerCluster) createTopic(t T, spec controller.TopicSpec) {
	t.Helper()
	waitFor(t, 15*time.Second, "topic "+spec.Name+" created", func() bool {
		n := cc.controller(t, 10*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := n.currentController().CreateTopic(ctx, spec)
		return err == nil || errors.Is(err, coord.ErrExists)
	})
}

// state loads partition tp from backend i.
func (cc *controllerCluster) state(t T, i int, tp coord.TopicPartition) (coord.PartitionState, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	md, err := cc.c.Backend(i).Load(ctx)
	if err != nil {
		return coord.PartitionState{}, false
	}
	st, ok := md.Partitions[tp]
	return st, ok
}

func waitFor(t T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: got nothing, want it", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tp(topic string, p int32) coord.TopicPartition {
	return coord.TopicPartition{Topic: topic, Partition: p}
}

// testControllerSpreadsLeaders: 3 brokers, 6 partitions, RF 3: each broker
// leads 2, every ISR is full, and every replica was told its role.
func testControllerSpreadsLeaders(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	// Before any topic exists, every broker is told of all three.
	ctrl := cc.controller(t, 5*time.Second)
	for _, n := range cc.nodes {
		waitFor(t, 5*time.Second, fmt.Sprintf("UpdateMetadata listing 3 live brokers sent to broker %d", n.id), func() bool {
			live, ok := ctrl.sender.liveInLastUpdateMetadata(n.id)
			return ok && slices.Equal(live, []coord.BrokerID{1, 2, 3})
		})
	}
	cc.createTopic(t, controller.TopicSpec{Name: "spread", Partitions: 6, ReplicationFactor: 3})
	led := map[coord.BrokerID]int{}
	for p := int32(0); p < 6; p++ {
		st, ok := cc.state(t, 1, tp("spread", p))
		if !ok {
			t.Fatalf("partition %d: no state on backend 2", p)
		}
		if len(st.ISR) != 3 {
			t.Errorf("partition %d: got ISR %v, want 3 replicas", p, st.ISR)
		}
		led[st.Leader]++
		waitFor(t, 5*time.Second, fmt.Sprintf("LeaderAndIsr for partition %d at its leader", p), func() bool {
			info, ok := ctrl.sender.leaderAndIsrFor(st.Leader, tp("spread", p))
			return ok && info.Leader == st.Leader
		})
	}
	for id := coord.BrokerID(1); id <= 3; id++ {
		if led[id] != 2 {
			t.Errorf("broker %d leads %d partitions, want 2 (all: %v)", id, led[id], led)
		}
	}
}

// testControllerBrokerCrash: the broker leading partition 0 (not the
// controller) crashes; within the session timeout + 2 s every partition
// it led has a new leader from its ISR, and it has left every ISR.
func testControllerBrokerCrash(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	cc.createTopic(t, controller.TopicSpec{Name: "crash", Partitions: 6, ReplicationFactor: 3})
	ctrl := cc.controller(t, 5*time.Second)
	// Pick a victim that leads something and is not the controller.
	victim := coord.NoBroker
	var led []int32
	for p := int32(0); p < 6; p++ {
		st, _ := cc.state(t, 0, tp("crash", p))
		if st.Leader != ctrl.id && (victim == coord.NoBroker || st.Leader == victim) {
			victim = st.Leader
			led = append(led, p)
		}
	}
	before := map[int32]coord.PartitionState{}
	for _, p := range led {
		before[p], _ = cc.state(t, 0, tp("crash", p))
	}
	crashedAt := time.Now()
	cc.c.Crash(int(victim) - 1)
	observer := ctrl.index
	waitFor(t, h.SessionTimeout()+2*time.Second, fmt.Sprintf("new leaders for the partitions broker %d led", victim), func() bool {
		for _, p := range led {
			st, ok := cc.state(t, observer, tp("crash", p))
			if !ok || st.Leader == victim || st.Leader == coord.NoBroker {
				return false
			}
		}
		return true
	})
	t.Logf("leadership moved off crashed broker %d in %v", victim, time.Since(crashedAt).Round(time.Millisecond))
	for _, p := range led {
		st, _ := cc.state(t, observer, tp("crash", p))
		if !slices.Contains(before[p].ISR, st.Leader) {
			t.Errorf("partition %d: new leader %d not from the old ISR %v", p, st.Leader, before[p].ISR)
		}
		if slices.Contains(st.ISR, victim) {
			t.Errorf("partition %d: crashed broker %d still in ISR %v", p, victim, st.ISR)
		}
		if st.LeaderEpoch <= before[p].LeaderEpoch {
			t.Errorf("partition %d: got leader epoch %d, want above %d", p, st.LeaderEpoch, before[p].LeaderEpoch)
		}
	}
}

// testControllerCrash: the controller's broker crashes; another is elected
// and moves the partitions the crashed broker led.
func testControllerCrash(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	cc.createTopic(t, controller.TopicSpec{Name: "ctrl", Partitions: 6, ReplicationFactor: 3})
	old := cc.controller(t, 5*time.Second)
	cc.c.Crash(old.index)
	next := cc.controller(t, h.SessionTimeout()+2*time.Second, old.index)
	waitFor(t, h.SessionTimeout()+2*time.Second, "no partition led by the crashed controller", func() bool {
		for p := int32(0); p < 6; p++ {
			st, ok := cc.state(t, next.index, tp("ctrl", p))
			if !ok || st.Leader == old.id || st.Leader == coord.NoBroker {
				return false
			}
		}
		return true
	})
	if next.currentController().Epoch() <= 0 {
		t.Errorf("new controller epoch %d, want > 0", next.currentController().Epoch())
	}
}

// testControllerAllReplicasDown: a partition of two replicas; the
// follower goes down, then the leader: leader -1; the out-of-sync replica
// returns and may not lead; the last ISR member returns and leads.
func testControllerAllReplicasDown(t T, h Harness) {
	// Five brokers, so that with embedded Raft two of them down still
	// leave a majority; the partition's two replicas are not the
	// controller.
	cc := newControllerCluster(t, h, 5)
	ctrl := cc.controller(t, 5*time.Second)
	var replicas []coord.BrokerID
	for _, n := range cc.nodes {
		if n.index != ctrl.index && len(replicas) < 2 {
			replicas = append(replicas, n.id)
		}
	}
	cc.createTopic(t, controller.TopicSpec{Name: "down", Assignment: [][]coord.BrokerID{replicas}})
	p0 := tp("down", 0)
	// The second replica crashes first: it leaves the ISR, the first stays
	// the leader and the last in-sync replica.
	cc.c.Crash(int(replicas[1]) - 1)
	waitFor(t, h.SessionTimeout()+2*time.Second, "ISR shrunk to the leader", func() bool {
		st, ok := cc.state(t, ctrl.index, p0)
		return ok && slices.Equal(st.ISR, []coord.BrokerID{replicas[0]})
	})
	cc.c.Crash(int(replicas[0]) - 1)
	waitFor(t, h.SessionTimeout()+2*time.Second, "leader -1", func() bool {
		st, ok := cc.state(t, ctrl.index, p0)
		return ok && st.Leader == coord.NoBroker
	})
	// The out-of-sync replica returns first: it may not lead.
	cc.c.Heal(int(replicas[1]) - 1)
	cc.waitMembers(t, ctrl.index, 4, h.SessionTimeout()+5*time.Second)
	if st, _ := cc.state(t, ctrl.index, p0); st.Leader != coord.NoBroker {
		t.Errorf("out-of-sync replica returned: got leader %d, want -1 (unclean election is off)", st.Leader)
	}
	// The last ISR member returns: it leads.
	cc.c.Heal(int(replicas[0]) - 1)
	waitFor(t, h.SessionTimeout()+5*time.Second, fmt.Sprintf("broker %d leads again", replicas[0]), func() bool {
		st, ok := cc.state(t, ctrl.index, p0)
		return ok && st.Leader == replicas[0]
	})
}

// testControllerControlledShutdown: a broker asks to shut down; every
// partition it led moves to another ISR member at once, without waiting
// for its session to end.
func testControllerControlledShutdown(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	cc.createTopic(t, controller.TopicSpec{Name: "shut", Partitions: 30, ReplicationFactor: 3})
	ctrl := cc.controller(t, 5*time.Second)
	leaving := cc.nodes[(ctrl.index+1)%3]
	epoch := leaving.registration(t).Epoch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	remaining, err := ctrl.currentController().ControlledShutdown(ctx, leaving.id, epoch)
	if err != nil {
		t.Fatalf("controlled shutdown: %v", err)
	}
	t.Logf("controlled shutdown of broker %d took %v", leaving.id, time.Since(start).Round(time.Millisecond))
	if len(remaining) != 0 {
		t.Errorf("got %d partitions still led by the leaving broker, want 0", len(remaining))
	}
	for p := int32(0); p < 30; p++ {
		st, _ := cc.state(t, ctrl.index, tp("shut", p))
		if st.Leader == leaving.id || slices.Contains(st.ISR, leaving.id) {
			t.Errorf("partition %d: leader %d ISR %v still hold leaving broker %d", p, st.Leader, st.ISR, leaving.id)
		}
	}
}

// testControllerPreferredRebalance: a broker crashes and returns; its
// preferred partitions' leadership comes back to it once it is in the
// ISR again (here: once an ElectLeaders-free rebalance finds it live and
// the leader's AlterPartition has put it back in the ISR).
func testControllerPreferredRebalance(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	cc.createTopic(t, controller.TopicSpec{Name: "pref", Partitions: 6, ReplicationFactor: 3})
	ctrl := cc.controller(t, 5*time.Second)
	victim := cc.nodes[(ctrl.index+1)%3]
	cc.c.Crash(victim.index)
	waitFor(t, h.SessionTimeout()+2*time.Second, "victim out of every ISR", func() bool {
		for p := int32(0); p < 6; p++ {
			st, ok := cc.state(t, ctrl.index, tp("pref", p))
			if !ok || slices.Contains(st.ISR, victim.id) {
				return false
			}
		}
		return true
	})
	cc.c.Heal(victim.index)
	cc.waitMembers(t, ctrl.index, 3, h.SessionTimeout()+5*time.Second)
	// Followers rejoin the ISR through their leader's AlterPartition; act
	// as those leaders.
	var victimEpoch int64
	waitFor(t, 5*time.Second, "victim re-registered", func() bool {
		victim.mu.Lock()
		defer victim.mu.Unlock()
		if victim.session == nil || victim.session.Err() != nil {
			return false
		}
		victimEpoch = victim.session.Broker().Epoch
		return true
	})
	_ = victimEpoch
	for p := int32(0); p < 6; p++ {
		st, _ := cc.state(t, ctrl.index, tp("pref", p))
		leader := cc.nodes[int(st.Leader)-1]
		leader.mu.Lock()
		leaderEpoch := leader.session.Broker().Epoch
		leader.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := ctrl.currentController().AlterPartition(ctx, controller.AlterPartitionRequest{
			BrokerID: st.Leader, BrokerEpoch: leaderEpoch, Partition: tp("pref", p),
			LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: append(slices.Clone(st.ISR), victim.id),
		})
		cancel()
		if err != nil {
			t.Fatalf("partition %d: AlterPartition adding %d: %v", p, victim.id, err)
		}
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("broker %d leads its preferred partitions again", victim.id), func() bool {
		for p := int32(0); p < 6; p++ {
			st, _ := cc.state(t, ctrl.index, tp("pref", p))
			topicMD, _ := cc.c.Backend(ctrl.index).Load(context.Background())
			if topicMD == nil {
				return false
			}
			if topicMD.Topics["pref"].Assignment[p][0] == victim.id && st.Leader != victim.id {
				return false
			}
		}
		return true
	})
}

// testControllerOfflineReplica: a broker answers KAFKA_STORAGE_ERROR for
// some of its replicas (ReplicasOffline): those leave their ISRs, their
// leaderships move to other ISR members, the broker's other replicas keep
// theirs, and a report from another incarnation of the broker changes
// nothing.
func testControllerOfflineReplica(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	cc.createTopic(t, controller.TopicSpec{Name: "disk", Partitions: 6, ReplicationFactor: 3})
	ctrl := cc.controller(t, 5*time.Second)
	failing := cc.nodes[(ctrl.index+1)%3]
	broker := failing.registration(t)
	var offline, kept []coord.TopicPartition
	for p := int32(0); p < 6; p++ {
		st, _ := cc.state(t, ctrl.index, tp("disk", p))
		switch {
		case st.Leader == failing.id && len(offline) == 0:
			offline = append(offline, st.TopicPartition())
		case st.Leader == failing.id:
			kept = append(kept, st.TopicPartition())
		case len(offline) < 2 && st.Leader != failing.id && len(kept) > 0:
			offline = append(offline, st.TopicPartition()) // a followed replica
		}
	}
	if len(offline) == 0 || len(kept) == 0 {
		t.Fatalf("got broker %d leading %d partitions, want at least 2", failing.id, len(offline)+len(kept))
	}
	before := map[coord.TopicPartition]coord.PartitionState{}
	for _, p := range append(slices.Clone(offline), kept...) {
		before[p], _ = cc.state(t, ctrl.index, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ctrl.currentController().ReplicasOffline(ctx, broker, offline); err != nil {
		t.Fatalf("ReplicasOffline: got %v, want nil", err)
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("broker %d out of the ISRs of %v", failing.id, offline), func() bool {
		for _, p := range offline {
			st, _ := cc.state(t, ctrl.index, p)
			if st.Leader == failing.id || slices.Contains(st.ISR, failing.id) {
				return false
			}
		}
		return true
	})
	for _, p := range offline {
		st, _ := cc.state(t, ctrl.index, p)
		if st.Leader == coord.NoBroker || !slices.Contains(before[p].ISR, st.Leader) {
			t.Errorf("partition %s: got leader %d, want one of the old ISR %v", p, st.Leader, before[p].ISR)
		}
		if before[p].Leader == failing.id && st.LeaderEpoch <= before[p].LeaderEpoch {
			t.Errorf("partition %s: got leader epoch %d, want above %d", p, st.LeaderEpoch, before[p].LeaderEpoch)
		}
	}
	for _, p := range kept {
		st, _ := cc.state(t, ctrl.index, p)
		if st.Leader != failing.id || st.LeaderEpoch != before[p].LeaderEpoch {
			t.Errorf("partition %s: got leader %d epoch %d, want broker %d's leadership kept at epoch %d",
				p, st.Leader, st.LeaderEpoch, failing.id, before[p].LeaderEpoch)
		}
	}
	// The new leader is online, so an unclean election has nothing to do.
	results, err := ctrl.currentController().ElectLeaders(ctx, false, offline[:1])
	if err != nil {
		t.Fatalf("ElectLeaders: got %v, want nil", err)
	}
	if err := results[offline[0]]; !errors.Is(err, controller.ErrElectionNotNeeded) {
		t.Errorf("unclean election of %s: got %v, want %v", offline[0], err, controller.ErrElectionNotNeeded)
	}
	// A report from another incarnation changes nothing.
	stale := broker
	stale.Epoch--
	if err := ctrl.currentController().ReplicasOffline(ctx, stale, kept); err != nil {
		t.Fatalf("ReplicasOffline of a stale incarnation: got %v, want nil", err)
	}
	for _, p := range kept {
		if st, _ := cc.state(t, ctrl.index, p); st.Leader != failing.id {
			t.Errorf("partition %s after a stale report: got leader %d, want %d", p, st.Leader, failing.id)
		}
	}
}

// testControllerDeposed: a broker refuses the controller's epoch as stale
// (Deposed): the controller stops with ErrFenced, as a fenced commit stops
// it.
func testControllerDeposed(t T, h Harness) {
	cc := newControllerCluster(t, h, 3)
	ctrl := cc.controller(t, 5*time.Second)
	c := ctrl.currentController()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Deposed(ctx, cc.nodes[(ctrl.index+1)%3].id, c.Epoch()+1); err != nil {
		t.Fatalf("Deposed for another epoch: got %v, want nil", err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("after Deposed for another epoch: got controller error %v, want it running", err)
	}
	if err := c.Deposed(ctx, cc.nodes[(ctrl.index+1)%3].id, c.Epoch()); err != nil && !errors.Is(err, controller.ErrNotController) {
		t.Fatalf("Deposed: got %v, want nil or %v", err, controller.ErrNotController)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatalf("controller still running 10 s after Deposed, want it stopped")
	}
	if err := c.Err(); !errors.Is(err, coord.ErrFenced) {
		t.Errorf("got controller error %v, want %v", err, coord.ErrFenced)
	}
}
