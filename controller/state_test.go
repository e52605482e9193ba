package controller

import (
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestReload: after a failed commit the controller reloads the metadata,
// and tells the brokers what the commit's applied chunks changed, which
// the plan that failed never sent.
func TestReload(t *testing.T) {
	before := []part{
		{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3), leaderEpoch: 4, partitionEpoch: 9},
		{topic: "t", p: 1, replicas: ids(3, 2), leader: 3, isr: ids(3, 2), leaderEpoch: 1, partitionEpoch: 1},
		{topic: "d", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2)},
	}
	tests := []struct {
		name   string
		change func(md *coord.Metadata)
		want   []string
	}{
		{
			name:   "nothing was applied",
			change: func(md *coord.Metadata) {},
			want:   nil,
		},
		{
			name: "the first chunk of an election was applied",
			change: func(md *coord.Metadata) {
				md.Partitions[coord.TopicPartition{Topic: "t"}] = coord.PartitionState{Topic: "t", Leader: 3, ISR: ids(3), LeaderEpoch: 5, PartitionEpoch: 10}
			},
			want: []string{
				"to 1: UpdateMetadata live [1 2 3] t-0",
				"to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"to 2: UpdateMetadata live [1 2 3] t-0",
				"to 3: LeaderAndIsr t-0 leader 3 epoch 5 isr [3]",
				"to 3: UpdateMetadata live [1 2 3] t-0",
			},
		},
		{
			name: "the first chunk of a topic creation was applied",
			change: func(md *coord.Metadata) {
				md.Topics["n"] = coord.Topic{Name: "n", Assignment: [][]coord.BrokerID{{3}, {1}}}
				md.Partitions[coord.TopicPartition{Topic: "n"}] = coord.PartitionState{Topic: "n", Leader: 3, ISR: ids(3)}
			},
			want: []string{
				"to 1: UpdateMetadata live [1 2 3] n-0",
				"to 2: UpdateMetadata live [1 2 3] n-0",
				"to 3: LeaderAndIsr n-0 leader 3 epoch 0 isr [3]",
				"to 3: UpdateMetadata live [1 2 3] n-0",
			},
		},
		{
			name: "a topic deletion was applied",
			change: func(md *coord.Metadata) {
				delete(md.Topics, "d")
				delete(md.Partitions, coord.TopicPartition{Topic: "d"})
			},
			want: []string{
				"to 1: StopReplica delete d-0",
				"to 2: StopReplica delete d-0",
				"to 1: UpdateMetadata live [1 2 3] deleted d",
				"to 2: UpdateMetadata live [1 2 3] deleted d",
				"to 3: UpdateMetadata live [1 2 3] deleted d",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3), before...)
			md := copyMetadata(s.md)
			tt.change(md)
			plan := s.Reload(md)
			for _, step := range plan.Steps {
				if len(step.Ops) > 0 {
					t.Errorf("reload plan commits %d ops, want none", len(step.Ops))
				}
			}
			checkLines(t, render(t, s, plan), tt.want)
			if s.Metadata() != md {
				t.Errorf("after Reload the state holds other metadata than the reloaded")
			}
		})
	}
}
