package controller

import (
	"fmt"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// AlterPartitionRequest is a partition leader's request to change its
// ISR (Kafka's AlterPartition).
type AlterPartitionRequest struct {
	BrokerID coord.BrokerID
	// BrokerEpoch is the leader's broker epoch; negative when its request
	// version carries none.
	BrokerEpoch    int64
	Partition      coord.TopicPartition
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []coord.BrokerID
}

// AlterPartitionResult is the outcome of one AlterPartitionRequest: the
// committed state, or why the change was refused (with the current state
// when there is one).
type AlterPartitionResult struct {
	State coord.PartitionState
	Err   error
}

// AlterPartitions decides ISR changes asked by partition leaders, as a
// leader sends them after a broker returns: every valid change goes into
// one Commit and is propagated once. The results are in the order of
// reqs. A refused change has its Err set now; a valid one has Err nil and
// the State the plan commits, and fails only if the plan's commit does.
//
// A change is refused, with the partition's current state, when the
// sender is not the live incarnation of the broker (ErrStaleBrokerEpoch),
// the partition has no state (coord.ErrNotFound), the sender is not its
// leader at the leader epoch it names (ErrFencedLeaderEpoch), the sender
// did not see the latest partition epoch (ErrInvalidUpdateVersion; also
// for a partition named twice), or the new ISR leaves out its leader,
// names an unassigned replica, or adds one that is not live or is offline
// (ErrIneligibleReplica). Members already in the ISR may stay whatever
// their state: shrinking is the leader's call.
func (s *State) AlterPartitions(reqs []AlterPartitionRequest) (Plan, []AlterPartitionResult) {
	res := make([]AlterPartitionResult, len(reqs))
	var ops []coord.Op
	seen := map[coord.TopicPartition]bool{}
	for i, req := range reqs {
		if seen[req.Partition] {
			res[i].Err = fmt.Errorf("%w: partition %s named twice in one request", ErrInvalidUpdateVersion, req.Partition)
			continue
		}
		seen[req.Partition] = true
		next, err := s.checkAlterPartition(req)
		if err != nil {
			res[i] = AlterPartitionResult{State: next, Err: err}
			continue
		}
		op := s.setPartition(next, next.PartitionEpoch)
		ops = append(ops, op)
		res[i] = AlterPartitionResult{State: committedState(op, s.md.PartitionBase)}
		s.log.Debug("ISR change accepted", "partition", req.Partition, "from", s.md.Partitions[req.Partition].ISR, "to", next.ISR)
	}
	var plan Plan
	step := s.statesStep(ops)
	plan.add(step)
	// An ISR that now holds every target replica of a partition being
	// reassigned completes the reassignment.
	var moving []coord.TopicPartition
	for i, req := range reqs {
		if res[i].Err == nil && s.md.Topics[req.Partition.Topic].Reassigning(req.Partition.Partition) {
			moving = append(moving, req.Partition)
		}
	}
	if len(moving) > 0 {
		view := s.clone()
		view.Committed(step)
		plan.add(view.completeStep(moving))
	}
	return plan, res
}

// checkAlterPartition validates one ISR change against the current state
// and returns the state to commit (with the current partition epoch, which
// the commit expects), or the current state and why the change is
// refused.
func (s *State) checkAlterPartition(req AlterPartitionRequest) (coord.PartitionState, error) {
	if err := s.checkIncarnation(req.BrokerID, req.BrokerEpoch); err != nil {
		return coord.PartitionState{}, err
	}
	st, ok := s.md.Partitions[req.Partition]
	replicas := s.replicas(req.Partition)
	if !ok || replicas == nil {
		return coord.PartitionState{}, fmt.Errorf("%w: partition %s", coord.ErrNotFound, req.Partition)
	}
	if st.Leader != req.BrokerID || st.LeaderEpoch != req.LeaderEpoch {
		return st, fmt.Errorf("%w: partition %s: leader %d epoch %d, request from %d at epoch %d",
			ErrFencedLeaderEpoch, req.Partition, st.Leader, st.LeaderEpoch, req.BrokerID, req.LeaderEpoch)
	}
	if st.PartitionEpoch != req.PartitionEpoch {
		return st, fmt.Errorf("%w: partition %s: epoch %d, request based on %d", ErrInvalidUpdateVersion, req.Partition, st.PartitionEpoch, req.PartitionEpoch)
	}
	if !slices.Contains(req.ISR, req.BrokerID) {
		return st, fmt.Errorf("%w: partition %s: the ISR must hold its leader %d", ErrIneligibleReplica, req.Partition, req.BrokerID)
	}
	online := s.online(req.Partition)
	isr := make([]coord.BrokerID, 0, len(req.ISR))
	for _, id := range replicas { // keep assignment order
		if !slices.Contains(req.ISR, id) {
			continue
		}
		if !slices.Contains(st.ISR, id) && !online(id) {
			return st, fmt.Errorf("%w: partition %s: broker %d is not live or its replica is offline", ErrIneligibleReplica, req.Partition, id)
		}
		isr = append(isr, id)
	}
	if len(isr) != len(req.ISR) {
		return st, fmt.Errorf("%w: partition %s: ISR %v names unassigned replicas (%v)", ErrIneligibleReplica, req.Partition, req.ISR, replicas)
	}
	next := st
	next.ISR = isr
	return next, nil
}
