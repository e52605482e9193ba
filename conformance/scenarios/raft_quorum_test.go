package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// The scenarios of this file are the operator's steps of "The Raft
// quorum" in docs/operations.md, on embedded Raft only: the other
// backends keep their quorums outside the brokers.

// TestRaftRetireBrokerThenLoseAnother: four brokers on Raft, of which
// brokers 1..3 vote and broker 4 observes. A topic of 6 partitions with 3
// replicas each, some of them on broker 4 (two led by it), takes acks=all
// writes on every partition throughout. Broker 4 is retired as the
// operations guide says: `tripod reassign --drain 4 --wait`, then a clean
// stop; being an observer it needs no remove-voter. Then the controller,
// a voter, is killed with SIGKILL. When every broker voted, this sequence
// left 2 live voters of 4, no majority, and the cluster stopped; with
// broker 4 observing, 2 of 3 voters live: a new controller is elected,
// every partition gets a live leader, a topic can be created, and every
// record acknowledged before and after is read back at its offset.
func TestRaftRetireBrokerThenLoseAnother(t *testing.T) {
	retireThenLoseAnother(t, 3)
}

// TestRaftRetireVoterThenLoseAnother: the same steps on four brokers that
// all vote (the quorum before observers existed), with broker 4's voter
// removed (`tripod quorum remove-voter 4`) after the drain and before the
// stop, as the operations guide says for a voter: 3 voters remain, so
// the controller's death leaves 2 of 3 live and the cluster goes on.
func TestRaftRetireVoterThenLoseAnother(t *testing.T) {
	retireThenLoseAnother(t, 4)
}

// retireThenLoseAnother runs the retirement of broker 4 on a cluster of
// four brokers of which brokers 1..voters vote (3 or 4), then kills the
// controller.
func retireThenLoseAnother(t *testing.T, voters int) {
	c := startClusterWith(t, "raft", 4, func(cfg *cluster.Config) { cfg.Voters = voters })
	if voters == 4 {
		waitQuorum(t, c, "brokers 1..4 vote", []int32{1, 2, 3, 4}, nil)
	} else {
		waitQuorum(t, c, "brokers 1..3 vote, broker 4 observes", []int32{1, 2, 3}, []int32{4})
	}
	createAssigned(t, c, "retire", [][]int32{{4, 1, 2}, {1, 4, 3}, {2, 3, 4}, {3, 1, 2}, {4, 2, 3}, {1, 2, 3}})
	loads := make([]*load, 6)
	for p := range loads {
		loads[p] = startLoad(t, c, "retire", int32(p))
	}
	for _, l := range loads {
		l.waitAcked(t, 10)
	}

	t.Logf("step 1: drain broker 4 (4 of 6 partitions have a replica on it)")
	drained := time.Now()
	out := runCLI(t, c, "reassign", "--drain", "4", "--wait")
	if !strings.Contains(out, "Reassignment of 4 partition") {
		t.Fatalf("reassign --drain 4 printed:\n%s", out)
	}
	waitEvery(t, c, settle, "every replica off broker 4, all in sync", func(md *cluster.Metadata) error {
		for _, p := range md.Partitions["retire"] {
			if len(p.Replicas) != 3 || slices.Contains(p.Replicas, 4) || !sameIDs(p.ISR, p.Replicas) || p.Leader < 0 || p.Leader == 4 {
				return fmt.Errorf("retire/%d: leader %d replicas %v ISR %v, want 3 replicas in sync off broker 4", p.Partition, p.Leader, p.Replicas, p.ISR)
			}
		}
		return nil
	}, "retire")
	t.Logf("broker 4 drained in %v", time.Since(drained).Round(time.Millisecond))

	if voters == 4 {
		t.Logf("step 1b: remove broker 4's voter")
		quorumCLI(t, c, "remove-voter", 4)
		waitQuorum(t, c, "brokers 1..3 vote, broker 4 observes", []int32{1, 2, 3}, []int32{4})
	}

	t.Logf("step 2: stop broker 4 for good")
	if err := c.Broker(4).Stop(settle); err != nil {
		t.Fatal(err)
	}
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}

	ctrl := controller(t, c)
	t.Logf("step 3: SIGKILL the controller, broker %d", ctrl)
	killed := time.Now()
	if err := c.Broker(ctrl).Kill(); err != nil {
		t.Fatal(err)
	}
	dead := []int32{4, ctrl}
	waitEvery(t, c, sessionTimeout+settle, "a new controller and every partition led by a live broker", func(md *cluster.Metadata) error {
		if md.ControllerID < 0 || slices.Contains(dead, md.ControllerID) {
			return fmt.Errorf("controller %d, want a live broker", md.ControllerID)
		}
		for _, p := range md.Partitions["retire"] {
			if p.Leader < 0 || slices.Contains(dead, p.Leader) {
				return fmt.Errorf("retire/%d: leader %d, want a live broker", p.Partition, p.Leader)
			}
		}
		return nil
	}, "retire")
	t.Logf("new controller %d, every partition led, %v after the kill", controller(t, c), time.Since(killed).Round(time.Millisecond))
	createTopic(t, c, "after-retire", 2, 2)

	t.Logf("step 4: read back every acknowledged record")
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}
	total := checkReadBack(t, c, "retire", loads)
	t.Logf("%d records acknowledged in all; every one read back", total)
}

// TestRaftQuorumGrowsAndShrinksUnderLoad: five brokers on Raft, brokers
// 1..3 voting and 4 and 5 observing, take acks=all writes throughout.
// `tripod quorum add-voter` promotes 4, then 5: DescribeQuorum lists 5
// voters and no observer. `tripod quorum remove-voter` removes 4, then 5:
// 3 voters again, and 4 and 5 observe. The controller stays elected
// through every change (broker 1, polled every 100 ms, never names no
// live controller for longer than controllerGap), the producers go on,
// and every acknowledged record is read back at its offset.
func TestRaftQuorumGrowsAndShrinksUnderLoad(t *testing.T) {
	c := startClusterWith(t, "raft", 5, func(cfg *cluster.Config) { cfg.Voters = 3 })
	waitQuorum(t, c, "brokers 1..3 vote, 4 and 5 observe", []int32{1, 2, 3}, []int32{4, 5})
	createTopic(t, c, "quorum-load", 3, 3)
	loads := make([]*load, 3)
	for p := range loads {
		loads[p] = startLoad(t, c, "quorum-load", int32(p))
	}
	progress := func(what string) {
		t.Helper()
		for _, l := range loads {
			l.waitAcked(t, l.ackedCount()+5)
		}
		t.Logf("%s: controller %d, producers going on", what, controller(t, c))
	}
	progress("before any change")
	watch := watchController(t, c, 1)

	t.Logf("step 1: add voters 4 and 5")
	started := time.Now()
	for _, id := range []int32{4, 5} {
		quorumCLI(t, c, "add-voter", id)
		progress("broker " + strconv.Itoa(int(id)) + " added")
	}
	waitQuorum(t, c, "5 voters", []int32{1, 2, 3, 4, 5}, nil)

	t.Logf("step 2: remove voters 4 and 5")
	for _, id := range []int32{4, 5} {
		quorumCLI(t, c, "remove-voter", id)
		progress("broker " + strconv.Itoa(int(id)) + " removed")
	}
	waitQuorum(t, c, "3 voters, 4 and 5 observing", []int32{1, 2, 3}, []int32{4, 5})
	t.Logf("quorum grew to 5 voters and shrank to 3 in %v", time.Since(started).Round(time.Millisecond))
	if gap := watch(); gap > controllerGap {
		t.Errorf("broker 1 named no live controller for %v at a stretch, want at most %v", gap, controllerGap)
	} else {
		t.Logf("broker 1 named no live controller for %v at most", gap)
	}

	t.Logf("step 3: read back every acknowledged record")
	total := checkReadBack(t, c, "quorum-load", loads)
	t.Logf("%d records acknowledged in all; every one read back", total)
}

// TestRaftLosesOneVoterAndTheObservers: five brokers on Raft, brokers
// 1..3 voting and 4 and 5 observing. The controller and both observers
// are killed with SIGKILL at once: three brokers of five, but one voter
// of three. The two live voters elect a controller, the dead brokers'
// registrations end, a topic of 2 replicas is created on the two live
// brokers and takes acks=all writes, which are read back; DescribeQuorum
// from a live broker names the new leader and shows the dead voter
// behind its log (at log end -1, as Kafka answers for a voter the leader
// has never heard from).
func TestRaftLosesOneVoterAndTheObservers(t *testing.T) {
	c := startClusterWith(t, "raft", 5, func(cfg *cluster.Config) { cfg.Voters = 3 })
	waitQuorum(t, c, "brokers 1..3 vote, 4 and 5 observe", []int32{1, 2, 3}, []int32{4, 5})
	ctrl := controller(t, c)

	t.Logf("step 1: SIGKILL the controller, broker %d, and the observers 4 and 5", ctrl)
	dead := []int32{ctrl, 4, 5}
	killed := time.Now()
	for _, id := range dead {
		if err := c.Broker(id).Kill(); err != nil {
			t.Fatal(err)
		}
	}
	live := others(c, dead...)
	waitEvery(t, c, sessionTimeout+settle, "a controller among the live voters, and only they registered", func(md *cluster.Metadata) error {
		if !slices.Contains(live, md.ControllerID) {
			return fmt.Errorf("controller %d, want one of %v", md.ControllerID, live)
		}
		if !sameIDs(md.Brokers, live) {
			return fmt.Errorf("brokers %v, want %v", md.Brokers, live)
		}
		return nil
	})
	newCtrl := controller(t, c)
	t.Logf("controller %d elected, brokers %v registered, %v after the kill", newCtrl, live, time.Since(killed).Round(time.Millisecond))

	t.Logf("step 2: a topic of 2 replicas on the live brokers takes acks=all writes")
	createTopic(t, c, "survivors", 2, 2)
	for _, p := range metadata(t, c, live[0], "survivors").Partitions["survivors"] {
		if !sameIDs(p.Replicas, live) {
			t.Fatalf("survivors/%d: replicas %v, want the live brokers %v", p.Partition, p.Replicas, live)
		}
	}
	cl := kafkaClient(t, c, acksAll...)
	for p := range int32(2) {
		vals := values("survivors-"+strconv.Itoa(int(p)), 10)
		offsets := produceValues(t, cl, "survivors", p, vals...)
		final := readPartition(t, c, "survivors", p)
		for i, o := range offsets {
			if !holds(final, o, vals[i]) {
				t.Errorf("survivors/%d: acknowledged record %d:%s is not in the log %v", p, o, vals[i], final)
			}
		}
	}

	t.Logf("step 3: DescribeQuorum names leader %d and shows voter %d behind", newCtrl, ctrl)
	err := cluster.WaitFor(context.Background(), settle, func() error {
		q, err := describeQuorum(c, live[0])
		if err != nil {
			return err
		}
		if q.LeaderID != newCtrl {
			return fmt.Errorf("leader %d, want %d", q.LeaderID, newCtrl)
		}
		var leader, lost *kmsg.DescribeQuorumResponseTopicPartitionReplicaState
		for i, v := range q.CurrentVoters {
			switch v.ReplicaID {
			case newCtrl:
				leader = &q.CurrentVoters[i]
			case ctrl:
				lost = &q.CurrentVoters[i]
			}
		}
		if leader == nil || lost == nil {
			return fmt.Errorf("voters %v, want the leader %d and the dead voter %d among them", replicaIDs(q.CurrentVoters), newCtrl, ctrl)
		}
		if lost.LogEndOffset >= leader.LogEndOffset {
			return fmt.Errorf("dead voter %d at log end %d, leader at %d: want it behind", ctrl, lost.LogEndOffset, leader.LogEndOffset)
		}
		t.Logf("leader %d at log end %d; dead voter %d at log end %d, last fetch %d, last caught up %d (-1: never heard from by this leader)",
			newCtrl, leader.LogEndOffset, ctrl, lost.LogEndOffset, lost.LastFetchTimestamp, lost.LastCaughtUpTimestamp)
		return nil
	})
	if err != nil {
		t.Fatalf("DescribeQuorum at broker %d: %v", live[0], err)
	}
}

// TestRaftAddedBrokerTakesReplicas: three brokers on Raft, all voting,
// hold a partition on brokers 1 and 2 with records written under
// acks=all. A fourth broker is added while the cluster runs: it joins the
// quorum as an observer. The partition is reassigned to brokers 4, 1 and
// 2; broker 4 catches up and joins the ISR, and a preferred election
// makes it the leader. It serves every record, old and new.
func TestRaftAddedBrokerTakesReplicas(t *testing.T) {
	c := startCluster(t, "raft", 3)
	createAssigned(t, c, "grown", [][]int32{{1, 2}})
	cl := kafkaClient(t, c, acksAll...)
	vals := values("grown", 20)
	var want []record
	for i, o := range produceValues(t, cl, "grown", 0, vals[:10]...) {
		want = append(want, record{o, vals[i]})
	}

	t.Logf("step 1: add broker 4: it observes the quorum")
	added := time.Now()
	b4, err := c.AddBroker()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(context.Background(), cluster.ServeTimeout); err != nil {
		t.Fatalf("broker %d does not serve: %v", b4.ID, err)
	}
	waitQuorum(t, c, "brokers 1..3 vote, broker 4 observes", []int32{1, 2, 3}, []int32{4})
	waitEvery(t, c, settle, "broker 4 registered", func(md *cluster.Metadata) error {
		if !slices.Contains(md.Brokers, 4) {
			return fmt.Errorf("brokers %v, want 4 among them", md.Brokers)
		}
		return nil
	})
	t.Logf("broker 4 observes and is registered %v after it was added", time.Since(added).Round(time.Millisecond))

	t.Logf("step 2: reassign grown/0 to brokers 4, 1, 2")
	adm := admin(t, c)
	ctx := context.Background()
	err = cluster.WaitFor(ctx, settle, func() error {
		req := kadm.AlterPartitionAssignmentsReq{}
		req.Assign("grown", 0, []int32{4, 1, 2})
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resps.Error()
		}
		if err != nil && !kerr.IsRetriable(err) && !errors.Is(err, kerr.NotController) {
			return cluster.Permanent(err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("reassign grown/0: %v", err)
	}
	waitLeader(t, c, "grown", 0, "broker 4 among the replicas, all in sync", func(p cluster.Partition) error {
		if !sameIDs(p.Replicas, []int32{4, 1, 2}) || !sameIDs(p.ISR, p.Replicas) {
			return errors.New("want replicas 4, 1, 2 all in sync")
		}
		return nil
	})
	waitStored(t, c, 4, "grown", 0, want)

	t.Logf("step 3: a preferred election makes broker 4 the leader")
	for p, err := range electPreferred(t, c, "grown", 0) {
		if err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
			t.Fatalf("preferred election of grown/%d: %v", p, err)
		}
	}
	waitLeader(t, c, "grown", 0, "broker 4 leads", func(p cluster.Partition) error {
		if p.Leader != 4 {
			return errors.New("want leader 4")
		}
		return nil
	})
	for i, o := range produceValues(t, cl, "grown", 0, vals[10:]...) {
		want = append(want, record{o, vals[10+i]})
	}
	final := readPartition(t, c, "grown", 0)
	for _, r := range want {
		if !holds(final, r.offset, r.value) {
			t.Errorf("grown/0: acknowledged record %v is not in the log %v", r, final)
		}
	}
	waitStored(t, c, 4, "grown", 0, want)
	t.Logf("broker 4 leads grown/0 and serves all %d records", len(want))
}

// controllerGap bounds how long a broker may name no live controller
// while the quorum changes: a re-election, should one happen, within a
// few session timeouts.
const controllerGap = 5 * sessionTimeout

// watchController polls broker id's Metadata every 100 ms until the
// returned function is called, which returns the longest stretch during
// which its answers named no live controller (or it did not answer).
func watchController(t *testing.T, c *cluster.Cluster, id int32) func() time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan time.Duration, 1)
	go func() {
		var longest time.Duration
		lastSeen := time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- max(longest, time.Since(lastSeen))
				return
			case <-tick.C:
			}
			mctx, mcancel := context.WithTimeout(ctx, time.Second)
			md, err := c.Metadata(mctx, id)
			mcancel()
			if err == nil {
				if b := c.Broker(md.ControllerID); b != nil && b.Running() {
					longest = max(longest, time.Since(lastSeen))
					lastSeen = time.Now()
				}
			}
		}
	}()
	var once sync.Once
	var longest time.Duration
	stop := func() time.Duration {
		once.Do(func() {
			cancel()
			longest = <-done
		})
		return longest
	}
	t.Cleanup(func() { stop() })
	return stop
}

// describeQuorum asks broker id for the quorum (DescribeQuorum) and
// returns the partition's state, or its error.
func describeQuorum(c *cluster.Cluster, id int32) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := c.Request(context.Background(), id, req)
	if err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	dq := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(dq.ErrorCode); err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("broker %d: %w", id, err)
	}
	if len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("broker %d answered %d topics, want one partition of one", id, len(dq.Topics))
	}
	p := dq.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return p, fmt.Errorf("broker %d: %w", id, err)
	}
	return p, nil
}

// replicaIDs returns the ids of a DescribeQuorum answer's members.
func replicaIDs(states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	out := make([]int32, len(states))
	for i, s := range states {
		out[i] = s.ReplicaID
	}
	return out
}

// waitQuorum waits until DescribeQuorum at every live broker names a live
// leader, exactly voters among the voters and exactly observers among the
// observers.
func waitQuorum(t *testing.T, c *cluster.Cluster, what string, voters, observers []int32) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		for _, b := range c.Live() {
			q, err := describeQuorum(c, b.ID)
			if err != nil {
				return err
			}
			if l := c.Broker(q.LeaderID); l == nil || !l.Running() {
				return fmt.Errorf("broker %d: leader %d, want a live broker", b.ID, q.LeaderID)
			}
			if got := replicaIDs(q.CurrentVoters); !sameIDs(got, voters) {
				return fmt.Errorf("broker %d: got voters %v, want %v", b.ID, got, voters)
			}
			if got := replicaIDs(q.Observers); !sameIDs(got, observers) {
				return fmt.Errorf("broker %d: got observers %v, want %v", b.ID, got, observers)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for the quorum (%s): %v", what, err)
	}
}

// quorumCLI runs `tripod quorum verb id` (add-voter or remove-voter) on
// c, again while the answer is one the operations guide says to retry
// (REQUEST_TIMED_OUT: the observer is still catching up;
// NOT_LEADER_OR_FOLLOWER: no leader right now), and fails the test on any
// other error.
func quorumCLI(t *testing.T, c *cluster.Cluster, verb string, id int32) {
	t.Helper()
	args := []string{"quorum", verb, strconv.Itoa(int(id)), "--bootstrap", strings.Join(c.Bootstrap(), ","), "--timeout", "10s"}
	var out []byte
	err := cluster.WaitFor(context.Background(), settle, func() error {
		var err error
		out, err = exec.Command(env.Binary, args...).CombinedOutput()
		if err == nil {
			return nil
		}
		if s := string(out); strings.Contains(s, "REQUEST_TIMED_OUT") || strings.Contains(s, "NOT_LEADER_OR_FOLLOWER") {
			return fmt.Errorf("%w: %s", err, s)
		}
		return cluster.Permanent(fmt.Errorf("%w: %s", err, out))
	})
	if err != nil {
		t.Fatalf("tripod %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("tripod quorum %s %d: %s", verb, id, strings.TrimSpace(string(out)))
}
