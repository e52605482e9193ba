package controller

import (
	"testing"

	"github.com/tripodmq/tripod/coord"
)

var t0 = coord.TopicPartition{Topic: "t", Partition: 0}

// reassigning marks partition p of topic in s as being reassigned, with
// adding and removing as given (the assignment holds both already).
func reassigning(s *State, topic string, p int32, adding, removing []coord.BrokerID) *State {
	t := s.md.Topics[topic]
	if len(adding) > 0 {
		t.Adding = map[int32][]coord.BrokerID{p: adding}
	}
	if len(removing) > 0 {
		t.Removing = map[int32][]coord.BrokerID{p: removing}
	}
	s.md.Topics[topic] = t
	return s
}

// catchUp is the leader's AlterPartition that adds to t-0's ISR, as its
// state in s has it.
func catchUp(s *State, isr ...coord.BrokerID) AlterPartitionRequest {
	st := state(s, "t", 0)
	return AlterPartitionRequest{BrokerID: st.Leader, BrokerEpoch: brokerEpoch(st.Leader), Partition: t0,
		LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: isr}
}

// TestReassignmentPhases walks partition reassignments through their
// phases: start (target and original replicas together), the new
// replicas joining the ISR, and completion (the leaving replicas dropped
// and stopped, the leadership moved off a leaving leader).
func TestReassignmentPhases(t *testing.T) {
	t.Run("move one replica, the leader leaving", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3, 4), part{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 1, isr: ids(1, 2, 3), leaderEpoch: 3, partitionEpoch: 5})
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(2, 3, 4)}})
		if errs[0] != nil {
			t.Fatalf("got %v, want the reassignment accepted", errs[0])
		}
		checkLines(t, render(t, s, plan), []string{
			"set topic t [[2 3 4 1]] adding map[0:[4]] removing map[0:[1]]",
			"to 1: LeaderAndIsr t-0 leader 1 epoch 3 isr [1 2 3]",
			"to 1: UpdateMetadata live [1 2 3 4] t-0",
			"to 2: LeaderAndIsr t-0 leader 1 epoch 3 isr [1 2 3]",
			"to 2: UpdateMetadata live [1 2 3 4] t-0",
			"to 3: LeaderAndIsr t-0 leader 1 epoch 3 isr [1 2 3]",
			"to 3: UpdateMetadata live [1 2 3 4] t-0",
			"to 4: LeaderAndIsr t-0 leader 1 epoch 3 isr [1 2 3]",
			"to 4: UpdateMetadata live [1 2 3 4] t-0",
		})
		commitAll(s, plan)
		if got := s.Reassignments(nil); len(got) != 1 || got[0].Partition != t0 {
			t.Fatalf("Reassignments: got %v, want t-0 in progress", got)
		}
		// The new replica catches up: the leader adds it to the ISR, and
		// that completes the reassignment in the same plan.
		plan, res := s.AlterPartitions([]AlterPartitionRequest{catchUp(s, 1, 2, 3, 4)})
		if res[0].Err != nil {
			t.Fatalf("AlterPartition: got %v, want nil", res[0].Err)
		}
		checkLines(t, opLines(render(t, s, plan)), []string{
			"set t-0 leader 1 epoch 3 isr [2 3 4 1] if 5",
			"--",
			"set topic t [[2 3 4]]",
			"set t-0 leader 2 epoch 4 isr [2 3 4] if 6",
		})
		lines := render(t, s, plan)
		for _, want := range []string{"to 2: LeaderAndIsr t-0 leader 2 epoch 4 isr [2 3 4]", "to 4: LeaderAndIsr t-0 leader 2 epoch 4 isr [2 3 4]",
			"to 1: UpdateMetadata live [1 2 3 4] t-0", "to 1: StopReplica delete t-0"} {
			if !contains(lines, want) {
				t.Errorf("plan lacks %q:\n%v", want, lines)
			}
		}
		if contains(lines, "to 1: LeaderAndIsr t-0 leader 2 epoch 4 isr [2 3 4]") {
			t.Errorf("the leaving replica 1 is told it follows; want it only stopped")
		}
		commitAll(s, plan)
		if got := s.Reassignments(nil); len(got) != 0 {
			t.Errorf("Reassignments after completion: got %v, want none", got)
		}
	})

	t.Run("raise the replication factor from 1 to 3, the leader staying", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), part{topic: "t", p: 0, replicas: ids(1), leader: 1, isr: ids(1)})
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(1, 2, 3)}})
		if errs[0] != nil {
			t.Fatalf("got %v, want accepted", errs[0])
		}
		checkLines(t, opLines(render(t, s, plan)), []string{"set topic t [[1 2 3]] adding map[0:[2 3]] removing map[]"})
		commitAll(s, plan)
		// One new replica in sync is not enough.
		plan, _ = s.AlterPartitions([]AlterPartitionRequest{catchUp(s, 1, 2)})
		checkLines(t, opLines(render(t, s, plan)), []string{"set t-0 leader 1 epoch 0 isr [1 2] if 0"})
		commitAll(s, plan)
		plan, _ = s.AlterPartitions([]AlterPartitionRequest{catchUp(s, 1, 2, 3)})
		checkLines(t, opLines(render(t, s, plan)), []string{
			"set t-0 leader 1 epoch 0 isr [1 2 3] if 1",
			"--",
			"set topic t [[1 2 3]]",
			"set t-0 leader 1 epoch 1 isr [1 2 3] if 2",
		})
		if lines := render(t, s, plan); contains(lines, "to 1: StopReplica delete t-0") {
			t.Errorf("a replica that stays is stopped: %v", lines)
		}
	})

	t.Run("lower the replication factor: complete at once", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), part{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 1, isr: ids(1, 2, 3), leaderEpoch: 2, partitionEpoch: 2})
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(2)}})
		if errs[0] != nil {
			t.Fatalf("got %v, want accepted", errs[0])
		}
		checkLines(t, opLines(render(t, s, plan)), []string{
			"set topic t [[2 1 3]] adding map[] removing map[0:[1 3]]",
			"--",
			"set topic t [[2]]",
			"set t-0 leader 2 epoch 3 isr [2] if 2",
		})
		lines := render(t, s, plan)
		for _, want := range []string{"to 1: StopReplica delete t-0", "to 3: StopReplica delete t-0", "to 2: LeaderAndIsr t-0 leader 2 epoch 3 isr [2]"} {
			if !contains(lines, want) {
				t.Errorf("plan lacks %q:\n%v", want, lines)
			}
		}
	})

	t.Run("a reorder changes only the preference order", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), part{topic: "t", p: 0, replicas: ids(1, 2, 3), leader: 1, isr: ids(1, 2, 3)})
		plan, _ := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(3, 2, 1)}})
		checkLines(t, opLines(render(t, s, plan)), []string{"set topic t [[3 2 1]]"})
	})

	t.Run("a new target replaces the one in progress", func(t *testing.T) {
		// t-0 is moving from [1 2 3] to [2 3 4], 4 not yet in sync; the
		// new target [2 3 5] drops 4 and adds 5.
		s := reassigning(newTestState(Policy{}, ids(1, 2, 3, 4, 5),
			part{topic: "t", p: 0, replicas: ids(2, 3, 4, 1), leader: 1, isr: ids(2, 3, 1), leaderEpoch: 1, partitionEpoch: 4}), "t", 0, ids(4), ids(1))
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(2, 3, 5)}})
		if errs[0] != nil {
			t.Fatalf("got %v, want accepted", errs[0])
		}
		checkLines(t, opLines(render(t, s, plan)), []string{"set topic t [[2 3 5 1]] adding map[0:[5]] removing map[0:[1]]"})
		if lines := render(t, s, plan); !contains(lines, "to 4: StopReplica delete t-0") || !contains(lines, "to 5: LeaderAndIsr t-0 leader 1 epoch 1 isr [2 3 1]") {
			t.Errorf("want 4 stopped and 5 told it follows: %v", lines)
		}
	})

	t.Run("cancel: back to the original replicas", func(t *testing.T) {
		// 4 was being added and already leads (an election while moving).
		s := reassigning(newTestState(Policy{}, ids(1, 2, 3, 4),
			part{topic: "t", p: 0, replicas: ids(2, 3, 4, 1), leader: 4, isr: ids(2, 4, 1), leaderEpoch: 6, partitionEpoch: 8}), "t", 0, ids(4), ids(1))
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0}})
		if errs[0] != nil {
			t.Fatalf("got %v, want the cancel accepted", errs[0])
		}
		checkLines(t, opLines(render(t, s, plan)), []string{
			"set topic t [[2 3 1]]",
			"set t-0 leader 2 epoch 7 isr [2 1] if 8",
		})
		if lines := render(t, s, plan); !contains(lines, "to 4: StopReplica delete t-0") {
			t.Errorf("want the added replica 4 stopped: %v", lines)
		}
		commitAll(s, plan)
		if got := s.Reassignments(nil); len(got) != 0 {
			t.Errorf("Reassignments after a cancel: got %v, want none", got)
		}
	})
}

// TestReassignmentResumesOnANewController checks that a controller that
// loads a reassignment in progress completes it once its targets are in
// sync, and waits while they are not.
func TestReassignmentResumesOnANewController(t *testing.T) {
	inSync := reassigning(newTestState(Policy{}, nil, part{topic: "t", p: 0, replicas: ids(2, 3, 4, 1), leader: 1, isr: ids(2, 3, 4, 1), leaderEpoch: 2, partitionEpoch: 3}), "t", 0, ids(4), ids(1))
	inSync.membersSeen = false
	plan := inSync.Members([]coord.Broker{testBroker(1), testBroker(2), testBroker(3), testBroker(4)})
	checkLines(t, opLines(render(t, inSync, plan)), []string{
		"set topic t [[2 3 4]]",
		"set t-0 leader 2 epoch 3 isr [2 3 4] if 3",
	})

	behind := reassigning(newTestState(Policy{}, nil, part{topic: "t", p: 0, replicas: ids(2, 3, 4, 1), leader: 1, isr: ids(2, 3, 1), leaderEpoch: 2, partitionEpoch: 3}), "t", 0, ids(4), ids(1))
	behind.membersSeen = false
	plan = behind.Members([]coord.Broker{testBroker(1), testBroker(2), testBroker(3), testBroker(4)})
	if ops := opLines(render(t, behind, plan)); len(ops) != 0 {
		t.Errorf("got ops %v, want none while 4 is behind", ops)
	}
	// Its full state tells 4 to follow, so it catches up.
	if lines := render(t, behind, plan); !contains(lines, "to 4: LeaderAndIsr t-0 leader 1 epoch 2 isr [2 3 1]") {
		t.Errorf("want broker 4 told it follows t-0: %v", lines)
	}
	// A leader lost while moving: the election among the ISR may choose
	// a leaving replica, and the reassignment waits for 4 still.
	commitAll(behind, plan)
	plan = behind.Members([]coord.Broker{testBroker(1), testBroker(3), testBroker(4)})
	checkLines(t, opLines(render(t, behind, plan)), []string{"drop 2", "--", "set t-0 leader 1 epoch 2 isr [3 1] if 3"})
}

// TestReassignmentRefusals checks each reason a reassignment is refused,
// and that a refusal changes nothing.
func TestReassignmentRefusals(t *testing.T) {
	parts := []part{
		{topic: "t", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2)},
		{topic: "t", p: 1, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
		// u-1 has no state: u's creation (or deletion) was cut off.
		{topic: "u", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2)},
	}
	tests := []struct {
		name string
		req  Reassignment
		want error
	}{
		{"an empty target", Reassignment{Partition: t0, Target: []coord.BrokerID{}}, ErrInvalidReplicaAssignment},
		{"a broker twice", Reassignment{Partition: t0, Target: ids(1, 3, 1)}, ErrInvalidReplicaAssignment},
		{"a broker that does not exist", Reassignment{Partition: t0, Target: ids(1, 9)}, ErrInvalidReplicaAssignment},
		{"a topic that does not exist (deleted)", Reassignment{Partition: coord.TopicPartition{Topic: "gone"}, Target: ids(1)}, coord.ErrNotFound},
		{"a partition that does not exist", Reassignment{Partition: coord.TopicPartition{Topic: "t", Partition: 5}, Target: ids(1)}, coord.ErrNotFound},
		{"a topic whose deletion was cut off", Reassignment{Partition: coord.TopicPartition{Topic: "u"}, Target: ids(2, 3)}, coord.ErrNotFound},
		{"a cancel with nothing in progress", Reassignment{Partition: t0}, ErrNoReassignmentInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3), parts...)
			u := s.md.Topics["u"]
			u.Assignment = append(u.Assignment, ids(2, 3))
			s.md.Topics["u"] = u
			plan, errs := s.AlterReassignments([]Reassignment{tt.req})
			if !isErr(errs[0], tt.want) {
				t.Fatalf("got %v, want %v", errs[0], tt.want)
			}
			if !plan.Empty() {
				t.Errorf("got plan %v, want nothing changed", render(t, s, plan))
			}
		})
	}
	t.Run("one refused among accepted ones", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), parts...)
		t1 := coord.TopicPartition{Topic: "t", Partition: 1}
		plan, errs := s.AlterReassignments([]Reassignment{{Partition: t0, Target: ids(1, 3)}, {Partition: t1, Target: ids(2, 2)}, {Partition: t0, Target: ids(2, 3)}})
		if errs[0] != nil || !isErr(errs[1], ErrInvalidReplicaAssignment) || !isErr(errs[2], ErrInvalidReplicaAssignment) {
			t.Fatalf("got %v, want nil, then two invalid (a broker twice, a partition twice)", errs)
		}
		checkLines(t, opLines(render(t, s, plan)), []string{"set topic t [[1 3 2] [2 3]] adding map[0:[3]] removing map[0:[2]]"})
	})
}
