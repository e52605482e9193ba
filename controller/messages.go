package controller

import (
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// The requests decisions address to brokers, built from the state as it
// will be once the step's ops are committed.

// propagate tells every live replica of the changed partitions its new
// role (LeaderAndIsr) and every live broker the new metadata
// (UpdateMetadata), including deleted topics. changed holds the states as
// they will be committed.
func (s *State) propagate(changed []PartitionInfo, deleted []string) []Message {
	live := s.liveBrokers()
	perBroker := map[coord.BrokerID][]PartitionInfo{}
	for _, info := range changed {
		tp := info.TopicPartition()
		for _, r := range info.Replicas {
			// An offline replica is not told: its broker cannot act on
			// it until it restarts and gets its full state.
			if s.reachable(r) && !s.offline[r][tp] {
				perBroker[r] = append(perBroker[r], info)
			}
		}
	}
	var msgs []Message
	for _, b := range live {
		if parts := perBroker[b.ID]; len(parts) > 0 {
			msgs = append(msgs, Message{To: b, Request: &LeaderAndIsrRequest{
				ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
				Partitions: parts, Leaders: live,
			}})
		}
		msgs = append(msgs, Message{To: b, Request: &UpdateMetadataRequest{
			ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
			Live: live, Partitions: changed, Deleted: deleted,
		}})
	}
	return msgs
}

// fullStates sends each broker of bs, which just joined, every partition
// state (UpdateMetadata) and its own replicas (LeaderAndIsr). The
// UpdateMetadata requests share one list of partitions.
func (s *State) fullStates(bs []coord.Broker) []Message {
	if len(bs) == 0 {
		return nil
	}
	all := s.sortedPartitions()
	infos := make([]PartitionInfo, 0, len(all))
	for _, tp := range all {
		infos = append(infos, s.info(tp))
	}
	live := s.liveBrokers()
	var msgs []Message
	for _, b := range bs {
		msgs = append(msgs, Message{To: b, Request: &UpdateMetadataRequest{
			ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
			Live: live, Partitions: infos,
		}})
		var mine []PartitionInfo
		for _, info := range infos {
			if slices.Contains(info.Replicas, b.ID) {
				mine = append(mine, info)
			}
		}
		if len(mine) > 0 {
			msgs = append(msgs, Message{To: b, Request: &LeaderAndIsrRequest{
				ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
				Partitions: mine, Leaders: live,
			}})
		}
	}
	return msgs
}

// statesStep is the step that commits SetPartition ops and tells the
// brokers the states they commit.
func (s *State) statesStep(ops []coord.Op) Step {
	if len(ops) == 0 {
		return Step{}
	}
	changed := make([]PartitionInfo, 0, len(ops))
	for _, op := range ops {
		st := committedState(op.(coord.SetPartition), s.md.PartitionBase)
		changed = append(changed, partitionInfo(s.md.Topics[st.Topic], st))
	}
	return Step{Ops: ops, Messages: s.propagate(changed, nil)}
}
