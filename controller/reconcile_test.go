package controller

import (
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestMembersElections drives Members with a new live set and checks the
// elections and ISR changes it commits (R11): clean, unclean and none.
func TestMembersElections(t *testing.T) {
	full := part{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 2, isr: ids(1, 2, 3), leaderEpoch: 4, partitionEpoch: 9}
	tests := []struct {
		name    string
		policy  Policy
		config  string // the topic's unclean.leader.election.enable, if set
		parts   []part
		live    []coord.BrokerID // before; after: next
		next    []coord.BrokerID
		wantOps []string
	}{
		{
			name: "clean: the first live ISR member in assignment order leads",
			live: ids(1, 2, 3), next: ids(1, 3), parts: []part{full},
			wantOps: []string{"drop 2", "--", "set t-0 leader 1 epoch 5 isr [1 3] if 9"},
		},
		{
			name: "clean: a follower gone only leaves the ISR, the leader epoch stays",
			live: ids(1, 2, 3), next: ids(1, 2), parts: []part{full},
			wantOps: []string{"drop 3", "--", "set t-0 leader 2 epoch 4 isr [1 2] if 9"},
		},
		{
			name: "clean: an ISR member that is not first in assignment order",
			live: ids(1, 2, 3), next: ids(1, 3),
			parts:   []part{{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "--", "set t-0 leader 3 epoch 5 isr [3] if 9"},
		},
		{
			name: "none: no live ISR member and unclean off: leader -1, the last ISR kept",
			live: ids(1, 2, 3), next: ids(1, 3),
			parts:   []part{{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "--", "set t-0 leader -1 epoch 5 isr [2] if 9"},
		},
		{
			name: "unclean: the cluster default lets the first live replica lead alone",
			live: ids(1, 2, 3), next: ids(1, 3), policy: Policy{UncleanLeaderElection: true},
			parts:   []part{{topic: "t", p: 0, replicas: ids(3, 2, 1), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "--", "set t-0 leader 3 epoch 5 isr [3] if 9"},
		},
		{
			name: "unclean: the topic's config turns it on against the cluster default",
			live: ids(1, 2, 3), next: ids(1, 3), config: "true",
			parts:   []part{{topic: "t", p: 0, replicas: ids(3, 2, 1), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "--", "set t-0 leader 3 epoch 5 isr [3] if 9"},
		},
		{
			name: "none: the topic's config turns unclean off against the cluster default",
			live: ids(1, 2, 3), next: ids(1, 3), config: "false", policy: Policy{UncleanLeaderElection: true},
			parts:   []part{{topic: "t", p: 0, replicas: ids(3, 2, 1), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "--", "set t-0 leader -1 epoch 5 isr [2] if 9"},
		},
		{
			name: "none: no replica live, even unclean: leader -1, the last ISR kept",
			live: ids(1, 2, 3), next: ids(1), policy: Policy{UncleanLeaderElection: true},
			parts:   []part{{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9}},
			wantOps: []string{"drop 2", "drop 3", "--", "set t-0 leader -1 epoch 5 isr [2 3] if 9"},
		},
		{
			name: "the last ISR member returns and leads without an unclean election",
			live: ids(1), next: ids(1, 3),
			parts:   []part{{topic: "t", p: 0, replicas: ids(2, 3), leader: coord.NoBroker, isr: ids(3), leaderEpoch: 5, partitionEpoch: 10}},
			wantOps: []string{"set t-0 leader 3 epoch 6 isr [3] if 10"},
		},
		{
			name: "an out-of-sync replica returning may not lead",
			live: ids(1), next: ids(1, 2),
			parts:   []part{{topic: "t", p: 0, replicas: ids(2, 3), leader: coord.NoBroker, isr: ids(3), leaderEpoch: 5, partitionEpoch: 10}},
			wantOps: nil,
		},
		{
			name: "a broker joining changes no partition",
			live: ids(1, 2), next: ids(1, 2, 3), parts: []part{full},
			wantOps: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(tt.policy, tt.live, tt.parts...)
			if tt.config != "" {
				withTopicConfig(s, "t", "unclean.leader.election.enable", tt.config)
			}
			brokers := make([]coord.Broker, len(tt.next))
			for i, id := range tt.next {
				brokers[i] = testBroker(id)
			}
			checkLines(t, opLines(render(t, s, s.Members(brokers))), tt.wantOps)
		})
	}
}

// TestMembersPropagation checks what the brokers are told when a broker
// leaves, joins and restarts: the new roles to the live replicas, the new
// states and live set to every live broker, full state to a newcomer.
func TestMembersPropagation(t *testing.T) {
	t0 := part{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9}
	t1 := part{topic: "t", p: 1, replicas: ids(3, 1), leader: 3, isr: ids(3, 1), leaderEpoch: 2, partitionEpoch: 3}
	tests := []struct {
		name string
		live []coord.BrokerID
		next []coord.Broker
		want []string
	}{
		{
			name: "a broker leaves",
			live: ids(1, 2, 3), next: []coord.Broker{testBroker(1), testBroker(3)},
			want: []string{
				"drop 2",
				"--",
				"set t-0 leader 3 epoch 5 isr [3] if 9",
				"to 1: UpdateMetadata live [1 3] t-0",
				"to 3: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"to 3: UpdateMetadata live [1 3] t-0",
				"--",
				"to 1: UpdateMetadata live [1 3]",
				"to 3: UpdateMetadata live [1 3]",
			},
		},
		{
			name: "a broker joins: its full state, then every broker learns the live set",
			live: ids(1, 3), next: []coord.Broker{testBroker(1), testBroker(2), testBroker(3)},
			want: []string{
				"to 2: UpdateMetadata live [1 2 3] t-0 t-1",
				"to 2: LeaderAndIsr t-0 leader 2 epoch 4 isr [2 3]",
				"--",
				"to 1: UpdateMetadata live [1 2 3]",
				"to 2: UpdateMetadata live [1 2 3]",
				"to 3: UpdateMetadata live [1 2 3]",
			},
		},
		{
			name: "a broker restarts (new broker epoch): fenced as gone, then synced and elected as new",
			live: ids(1, 2, 3),
			next: []coord.Broker{testBroker(1), {ID: 2, Host: "127.0.0.1", Port: 9002, Epoch: 500}, testBroker(3)},
			want: []string{
				"drop 2",
				"--",
				// Step 1: broker 2's old incarnation loses its leadership
				// and ISR place; the new one is told with everyone.
				"set t-0 leader 3 epoch 5 isr [3] if 9",
				"to 1: UpdateMetadata live [1 2 3] t-0",
				"to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"to 2: UpdateMetadata live [1 2 3] t-0",
				"to 3: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"to 3: UpdateMetadata live [1 2 3] t-0",
				"--",
				// Step 2: its full state, as the first step leaves it.
				"to 2: UpdateMetadata live [1 2 3] t-0 t-1",
				"to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"--",
				// Step 4: the live set (the same IDs, a new epoch).
				"to 1: UpdateMetadata live [1 2 3]",
				"to 2: UpdateMetadata live [1 2 3]",
				"to 3: UpdateMetadata live [1 2 3]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, tt.live, t0, t1)
			checkLines(t, render(t, s, s.Members(tt.next)), tt.want)
		})
	}
}

// TestRestartedBrokerOnlyReplica: the only replica of a partition
// restarts. Its old incarnation is fenced (leader -1 at a new leader
// epoch), then the new one leads at a newer epoch still: a restarted
// broker never resumes its old incarnation's leader epoch.
func TestRestartedBrokerOnlyReplica(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2), part{topic: "t", p: 0, replicas: ids(2), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9})
	restarted := coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9002, Epoch: 500}
	plan := s.Members([]coord.Broker{testBroker(1), restarted})
	var ops []string
	for _, step := range plan.Steps {
		for _, op := range step.Ops {
			ops = append(ops, renderOp(t, op)...)
		}
	}
	checkLines(t, ops, []string{
		"set t-0 leader -1 epoch 5 isr [2] if 9",
		"set t-0 leader 2 epoch 6 isr [2] if 10",
	})
	commitAll(s, plan)
	if got := state(s, "t", 0); got.Leader != 2 || got.LeaderEpoch != 6 || got.PartitionEpoch != 11 {
		t.Errorf("after the plan: got %s partition epoch %d, want leader 2 epoch 6 partition epoch 11", renderState(got), got.PartitionEpoch)
	}
	if len(s.restarted) != 0 || len(s.unsynced) != 0 || s.liveChanged {
		t.Errorf("after the plan: restarted %v unsynced %v liveChanged %v, want no owed work", s.restarted, s.unsynced, s.liveChanged)
	}
}

// TestReconcileRedoesOwedWork: when the commit of a restarted broker's
// fencing fails, nothing after it is done; the next Reconcile (after the
// reload) plans the fencing, the full state and the live set again.
func TestReconcileRedoesOwedWork(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2, 3), part{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9})
	restarted := coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9002, Epoch: 500}
	first := s.Members([]coord.Broker{testBroker(1), restarted, testBroker(3)})
	// Only the drop step is carried out; the fencing commit fails.
	s.Committed(first.Steps[0])
	again := render(t, s, s.Reconcile())
	checkLines(t, opLines(again), []string{"set t-0 leader 3 epoch 5 isr [3] if 9"})
	if want := "to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]"; !contains(again, want) {
		t.Errorf("second plan:\n%v\nwant it to hold %q (the full state)", again, want)
	}
	commitAll(s, s.Reconcile())
	if plan := s.Reconcile(); !plan.Empty() {
		t.Errorf("after the owed work: got plan %v, want nothing to do", render(t, s, plan))
	}
}

// TestFirstMembers: the controller's first member set sends every broker
// its full state and the live set, and elects where the leader is gone.
func TestFirstMembers(t *testing.T) {
	md := coord.NewMetadata()
	md.Topics["t"] = coord.Topic{Name: "t", Assignment: [][]coord.BrokerID{{3, 1}}}
	md.Partitions[coord.TopicPartition{Topic: "t"}] = coord.PartitionState{Topic: "t", Leader: 3, ISR: ids(3, 1), LeaderEpoch: 1, PartitionEpoch: 2}
	s := NewState(1, testControllerEpoch, md, Policy{}, nil)
	checkLines(t, render(t, s, s.Members([]coord.Broker{testBroker(1)})), []string{
		"to 1: UpdateMetadata live [1] t-0",
		"to 1: LeaderAndIsr t-0 leader 3 epoch 1 isr [3 1]",
		"--",
		"set t-0 leader 1 epoch 2 isr [1] if 2",
		"to 1: LeaderAndIsr t-0 leader 1 epoch 2 isr [1]",
		"to 1: UpdateMetadata live [1] t-0",
		"--",
		"to 1: UpdateMetadata live [1]",
	})
}

// TestReplicasOffline: reported offline replicas lose leadership and ISR
// places and are not told; a stale incarnation's report and a repeated
// one change nothing.
func TestReplicasOffline(t *testing.T) {
	parts := []part{
		{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9},
		{topic: "t", p: 1, replicas: ids(3, 2), leader: 3, isr: ids(3, 2), leaderEpoch: 1, partitionEpoch: 1},
		{topic: "t", p: 2, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
	}
	tests := []struct {
		name    string
		broker  coord.Broker
		offline []coord.TopicPartition
		want    []string
	}{
		{
			name:   "a led and a followed replica",
			broker: testBroker(2), offline: []coord.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}},
			want: []string{
				"set t-0 leader 3 epoch 5 isr [3] if 9",
				"set t-1 leader 3 epoch 1 isr [3] if 1",
				"to 1: UpdateMetadata live [1 2 3] t-0 t-1",
				"to 3: LeaderAndIsr t-0 leader 3 epoch 5 isr [3], t-1 leader 3 epoch 1 isr [3]",
				"to 3: UpdateMetadata live [1 2 3] t-0 t-1",
			},
		},
		{
			name:   "a report from another incarnation",
			broker: coord.Broker{ID: 2, Epoch: brokerEpoch(2) - 1}, offline: []coord.TopicPartition{{Topic: "t", Partition: 0}},
			want: nil,
		},
		{
			name:   "a partition without a state",
			broker: testBroker(2), offline: []coord.TopicPartition{{Topic: "u", Partition: 0}},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3), parts...)
			lines := render(t, s, s.ReplicasOffline(tt.broker, tt.offline))
			// Broker 2 is not told of its offline replicas.
			for _, l := range lines {
				if len(l) > 5 && l[:5] == "to 2:" && l != "to 2: UpdateMetadata live [1 2 3] t-0 t-1" {
					t.Errorf("got %q, want no LeaderAndIsr to the broker whose replicas are offline", l)
				}
			}
			var rest []string
			for _, l := range lines {
				if len(l) < 5 || l[:5] != "to 2:" {
					rest = append(rest, l)
				}
			}
			checkLines(t, rest, tt.want)
		})
	}
	t.Run("reported again", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), parts...)
		commitAll(s, s.ReplicasOffline(testBroker(2), []coord.TopicPartition{{Topic: "t", Partition: 0}}))
		if plan := s.ReplicasOffline(testBroker(2), []coord.TopicPartition{{Topic: "t", Partition: 0}}); !plan.Empty() {
			t.Errorf("got %v, want nothing for a replica known offline", render(t, s, plan))
		}
		// It may not lead again, not even uncleanly.
		_, results := s.ElectLeaders(false, []coord.TopicPartition{{Topic: "t", Partition: 0}})
		if err := results[coord.TopicPartition{Topic: "t", Partition: 0}]; err != ErrElectionNotNeeded {
			t.Errorf("unclean election: got %v, want %v", err, ErrElectionNotNeeded)
		}
		// A restart brings it back.
		plan := s.Members([]coord.Broker{testBroker(1), {ID: 2, Epoch: 900}, testBroker(3)})
		commitAll(s, plan)
		if len(s.offline[2]) != 0 {
			t.Errorf("after a restart: got offline %v, want none", s.offline[2])
		}
	})
}

// TestLogDirFailure: a broker reporting a failed log dir is sent a
// LeaderAndIsr for every replica it holds that is not known offline.
func TestLogDirFailure(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2, 3),
		part{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
		part{topic: "t", p: 1, replicas: ids(3, 1), leader: 3, isr: ids(3, 1)},
		part{topic: "t", p: 2, replicas: ids(3, 2), leader: 3, isr: ids(3)},
	)
	s.offline[2] = map[coord.TopicPartition]bool{{Topic: "t", Partition: 2}: true}
	plan, err := s.LogDirFailure(2, brokerEpoch(2))
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	checkLines(t, render(t, s, plan), []string{"to 2: LeaderAndIsr t-0 leader 2 epoch 0 isr [2 3]"})
	if _, err := s.LogDirFailure(2, brokerEpoch(2)+1); err == nil || !isErr(err, ErrStaleBrokerEpoch) {
		t.Errorf("another incarnation: got %v, want %v", err, ErrStaleBrokerEpoch)
	}
}
