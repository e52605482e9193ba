package controller

import (
	"errors"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestAlterPartitionRefusals checks every reason an ISR change is
// refused, and that a refusal commits nothing and answers with the
// partition's current state.
func TestAlterPartitionRefusals(t *testing.T) {
	// t-0: leader 2 at leader epoch 4, partition epoch 9, ISR [2 3] of
	// replicas [2 3 4]; broker 4 is live, 5 is live but assigned nowhere,
	// 6 is in controlled shutdown, and 3's replica of t-1 is offline.
	parts := []part{
		{topic: "t", p: 0, replicas: ids(2, 3, 4), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9},
		{topic: "t", p: 1, replicas: ids(2, 3, 6), leader: 2, isr: ids(2), leaderEpoch: 1, partitionEpoch: 1},
	}
	t0 := coord.TopicPartition{Topic: "t", Partition: 0}
	t1 := coord.TopicPartition{Topic: "t", Partition: 1}
	valid := AlterPartitionRequest{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: t0, LeaderEpoch: 4, PartitionEpoch: 9, ISR: ids(2, 3, 4)}
	with := func(f func(*AlterPartitionRequest)) AlterPartitionRequest {
		r := valid
		f(&r)
		return r
	}
	tests := []struct {
		name      string
		req       AlterPartitionRequest
		want      error
		wantState bool // the refusal carries t-0's current state
	}{
		{"from another incarnation of the leader", with(func(r *AlterPartitionRequest) { r.BrokerEpoch-- }), ErrStaleBrokerEpoch, false},
		{"from a broker that is not live", with(func(r *AlterPartitionRequest) { r.BrokerID = 9 }), ErrStaleBrokerEpoch, false},
		{"for a partition without a state", with(func(r *AlterPartitionRequest) { r.Partition.Partition = 7 }), coord.ErrNotFound, false},
		{"for a topic that does not exist", with(func(r *AlterPartitionRequest) { r.Partition.Topic = "u" }), coord.ErrNotFound, false},
		{"from a broker that is not the leader", with(func(r *AlterPartitionRequest) { r.BrokerID, r.BrokerEpoch = 3, brokerEpoch(3) }), ErrFencedLeaderEpoch, true},
		{"at an older leader epoch", with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 3 }), ErrFencedLeaderEpoch, true},
		{"at a newer leader epoch", with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 5 }), ErrFencedLeaderEpoch, true},
		{"based on an old partition epoch", with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 8 }), ErrInvalidUpdateVersion, true},
		{"an ISR without its leader", with(func(r *AlterPartitionRequest) { r.ISR = ids(3, 4) }), ErrIneligibleReplica, true},
		{"an ISR naming an unassigned broker", with(func(r *AlterPartitionRequest) { r.ISR = ids(2, 3, 5) }), ErrIneligibleReplica, true},
		{"an ISR naming a broker twice", with(func(r *AlterPartitionRequest) { r.ISR = ids(2, 3, 3) }), ErrIneligibleReplica, true},
		{"none: the request as it should be", valid, nil, false},
		{"none: from a request version without a broker epoch", with(func(r *AlterPartitionRequest) { r.BrokerEpoch = -1 }), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3, 4, 5, 6), parts...)
			plan, res := s.AlterPartitions([]AlterPartitionRequest{tt.req})
			if !errors.Is(res[0].Err, tt.want) || (tt.want == nil) != (res[0].Err == nil) {
				t.Fatalf("got %v, want %v", res[0].Err, tt.want)
			}
			if tt.want == nil {
				return
			}
			if !plan.Empty() {
				t.Errorf("got plan %v, want nothing committed", render(t, s, plan))
			}
			if got := res[0].State; tt.wantState && (got.Leader != 2 || got.PartitionEpoch != 9) {
				t.Errorf("got state %s partition epoch %d, want the current one (leader 2, partition epoch 9)", renderState(got), got.PartitionEpoch)
			}
		})
	}
	// Refusals that depend on the broker being added.
	for _, tt := range []struct {
		name  string
		setup func(s *State)
		req   AlterPartitionRequest
	}{
		{"adding a broker that is not live", func(s *State) { delete(s.live, 4) }, valid},
		{"adding a broker in controlled shutdown", func(s *State) {},
			AlterPartitionRequest{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: t1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: ids(2, 6)}},
		{"adding an offline replica", func(s *State) { s.offline[4] = map[coord.TopicPartition]bool{t0: true} }, valid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3, 4, 5, 6), parts...)
			s.shuttingDown[6] = true
			tt.setup(s)
			plan, res := s.AlterPartitions([]AlterPartitionRequest{tt.req})
			if !errors.Is(res[0].Err, ErrIneligibleReplica) {
				t.Errorf("got %v, want %v", res[0].Err, ErrIneligibleReplica)
			}
			if !plan.Empty() {
				t.Errorf("got plan %v, want nothing committed", render(t, s, plan))
			}
		})
	}
}

// TestAlterPartitionAccepted: valid changes of one request, expanding and
// shrinking, go into one commit in assignment order, are propagated once,
// and answer with the state committed; a refused one beside them does
// not hold them up. A member already in the ISR may stay though its
// broker is gone (shrinking is the leader's call).
func TestAlterPartitionAccepted(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2, 3),
		part{topic: "t", p: 0, replicas: ids(2, 3, 1), leader: 2, isr: ids(2), leaderEpoch: 4, partitionEpoch: 9},
		part{topic: "t", p: 1, replicas: ids(2, 3, 4), leader: 2, isr: ids(2, 3, 4), leaderEpoch: 1, partitionEpoch: 3},
		part{topic: "t", p: 2, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
	)
	plan, res := s.AlterPartitions([]AlterPartitionRequest{
		{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: coord.TopicPartition{Topic: "t", Partition: 0}, LeaderEpoch: 4, PartitionEpoch: 9, ISR: ids(1, 2, 3)},
		{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: coord.TopicPartition{Topic: "t", Partition: 1}, LeaderEpoch: 1, PartitionEpoch: 3, ISR: ids(4, 2)},
		{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: coord.TopicPartition{Topic: "t", Partition: 2}, LeaderEpoch: 0, PartitionEpoch: 1, ISR: ids(2)},
		{BrokerID: 2, BrokerEpoch: brokerEpoch(2), Partition: coord.TopicPartition{Topic: "t", Partition: 0}, LeaderEpoch: 4, PartitionEpoch: 9, ISR: ids(2)},
	})
	checkLines(t, opLines(render(t, s, plan)), []string{
		"set t-0 leader 2 epoch 4 isr [2 3 1] if 9",
		"set t-1 leader 2 epoch 1 isr [2 4] if 3",
	})
	if got := res[0].State; res[0].Err != nil || renderState(got) != "t-0 leader 2 epoch 4 isr [2 3 1]" || got.PartitionEpoch != 10 {
		t.Errorf("t-0: got %s partition epoch %d, err %v; want the committed state at partition epoch 10", renderState(got), got.PartitionEpoch, res[0].Err)
	}
	if res[1].Err != nil || res[1].State.PartitionEpoch != 4 {
		t.Errorf("t-1: got partition epoch %d, err %v; want 4, nil", res[1].State.PartitionEpoch, res[1].Err)
	}
	if !errors.Is(res[2].Err, ErrInvalidUpdateVersion) {
		t.Errorf("t-2 at an old partition epoch: got %v, want %v", res[2].Err, ErrInvalidUpdateVersion)
	}
	if !errors.Is(res[3].Err, ErrInvalidUpdateVersion) {
		t.Errorf("t-0 named twice: got %v, want %v", res[3].Err, ErrInvalidUpdateVersion)
	}
	commitAll(s, plan)
	if got := state(s, "t", 0); got.PartitionEpoch != 10 || got.ControllerEpoch != testControllerEpoch {
		t.Errorf("after the commit: got partition epoch %d controller epoch %d, want 10 and %d", got.PartitionEpoch, got.ControllerEpoch, testControllerEpoch)
	}
}
