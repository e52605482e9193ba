package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// Partition reassignment, as Kafka's KIP-455. A partition moves from its
// original replicas (ORS) to its target replicas (TRS) in three phases,
// each a commit the controller makes on an event:
//
//  1. Start (AlterReassignments): the assignment becomes TRS then the
//     original replicas that are leaving, with Adding = TRS − ORS and
//     Removing = ORS − TRS stored beside it; every replica is told its
//     role, so the added ones start fetching from the leader.
//  2. Catch up: the leader adds each new replica to the ISR once it has
//     caught up (AlterPartition), as for any follower.
//  3. Complete (the first event after every target replica is in the
//     ISR: an AlterPartition, a membership change, a reload): the
//     assignment becomes TRS, the ISR drops the leaving replicas, the
//     leadership moves to a target replica if the leader is leaving, the
//     leader epoch grows, and the leaving replicas are stopped with their
//     logs deleted (StopReplica with delete).
//
// The phases are stored with the topic (coord.Topic Adding and
// Removing), so a controller elected in the middle completes the
// reassignment from what it loads: Reconcile checks every reassignment.
// A reassignment given for a partition already moving replaces its
// target (its original replicas stay those it had before the first), and
// a cancel (a nil target) moves it back to its original replicas.

// Reassignment asks to move one partition to Target replicas, in
// preference order; a nil Target cancels the partition's reassignment in
// progress.
type Reassignment struct {
	Partition coord.TopicPartition
	Target    []coord.BrokerID
	// KeepReplicationFactor refuses a Target with another number of
	// replicas than the partition's original replicas (KIP-860's
	// allow_replication_factor_change false).
	KeepReplicationFactor bool
}

// OngoingReassignment is a partition being reassigned, as
// ListPartitionReassignments reports it: all its replicas (target first),
// and which are being added and removed.
type OngoingReassignment struct {
	Partition coord.TopicPartition
	Replicas  []coord.BrokerID
	Adding    []coord.BrokerID
	Removing  []coord.BrokerID
}

// AlterReassignments decides the reassignments reqs ask for and returns
// one error per request, in order (nil: accepted). Every accepted request
// starts (or replaces, or cancels) its partition's reassignment in one
// Commit, which is followed, in the same plan, by the completion of every
// partition whose target replicas are all in its ISR already (a reorder,
// or a move to fewer replicas). A request is refused, changing nothing,
// when its partition has no state or its topic does not exist
// (coord.ErrNotFound: a topic deleted, or one whose deletion or creation
// was cut off midway), when it names the partition twice, when its target
// is empty or names a broker twice or one that is not live
// (ErrInvalidReplicaAssignment), or when it cancels a partition that is
// not being reassigned (ErrNoReassignmentInProgress), or when it keeps
// the replication factor and its target does not
// (ErrInvalidReplicationFactor).
func (s *State) AlterReassignments(reqs []Reassignment) (Plan, []error) {
	errs := make([]error, len(reqs))
	topics := map[string]coord.Topic{}
	var states []coord.Op
	var stops []coord.TopicPartition
	var started []coord.TopicPartition
	stopAt := map[coord.BrokerID][]coord.TopicPartition{}
	seen := map[coord.TopicPartition]bool{}
	for i, req := range reqs {
		tp := req.Partition
		if seen[tp] {
			errs[i] = fmt.Errorf("%w: partition %s named twice in one request", ErrInvalidReplicaAssignment, tp)
			continue
		}
		seen[tp] = true
		t, ok := topics[tp.Topic]
		if !ok {
			t, ok = s.md.Topics[tp.Topic]
		}
		st, hasState := s.md.Partitions[tp]
		if !ok || !hasState || len(s.missingStates(t)) > 0 {
			errs[i] = fmt.Errorf("%w: partition %s", coord.ErrNotFound, tp)
			continue
		}
		if rf := len(t.OriginalReplicas(tp.Partition)); req.KeepReplicationFactor && req.Target != nil && len(req.Target) != rf {
			errs[i] = fmt.Errorf("%w: partition %s: %d target replicas, the replication factor is %d and may not change",
				ErrInvalidReplicationFactor, tp, len(req.Target), rf)
			continue
		}
		next, dropped, err := s.reassign(t, st, req.Target)
		if err != nil {
			errs[i] = err
			continue
		}
		// A replica that was being added and is not wanted any more
		// leaves the ISR and is stopped; if it led, the leadership moves
		// to a replica that stays.
		if len(dropped) > 0 {
			moved, changed, err := s.dropReplicas(st, next.Assignment[tp.Partition], dropped)
			if err != nil {
				errs[i] = err
				continue
			}
			if changed {
				states = append(states, s.setPartition(moved, st.PartitionEpoch))
			}
			for _, id := range dropped {
				stopAt[id] = append(stopAt[id], tp)
			}
			stops = append(stops, tp)
		}
		topics[tp.Topic] = next
		started = append(started, tp)
	}
	if len(started) == 0 {
		return Plan{}, errs
	}
	ops := make([]coord.Op, 0, len(topics)+len(states))
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		ops = append(ops, coord.SetTopic{Topic: topics[name]})
	}
	ops = append(ops, states...)
	view := s.clone()
	view.Committed(Step{Ops: ops})
	changed := make([]PartitionInfo, 0, len(started))
	for _, tp := range started {
		changed = append(changed, view.info(tp))
	}
	msgs := append(view.propagate(changed, nil), view.stopAt(stopAt)...)
	s.log.Info("partition reassignments started", "partitions", len(started), "stopped", len(stops))
	var plan Plan
	step := Step{Ops: ops, Messages: msgs}
	plan.add(step)
	plan.add(view.completeStep(started))
	return plan, errs
}

// reassign returns topic t with partition st's reassignment to target
// started, replaced or (target nil) cancelled, and the replicas that were
// being added and no longer are. Errors: see AlterReassignments.
func (s *State) reassign(t coord.Topic, st coord.PartitionState, target []coord.BrokerID) (coord.Topic, []coord.BrokerID, error) {
	p, tp := st.Partition, st.TopicPartition()
	current := t.Assignment[p]
	original := t.OriginalReplicas(p)
	if target == nil {
		if !t.Reassigning(p) {
			return coord.Topic{}, nil, fmt.Errorf("%w: partition %s", ErrNoReassignmentInProgress, tp)
		}
		target = original
	} else if err := s.checkTarget(tp, target); err != nil {
		return coord.Topic{}, nil, err
	}
	// The replica set while moving: the target, then the original
	// replicas that are leaving (Kafka's order).
	replicas := slices.Clone(target)
	for _, id := range original {
		if !slices.Contains(replicas, id) {
			replicas = append(replicas, id)
		}
	}
	var dropped []coord.BrokerID
	for _, id := range current {
		if !slices.Contains(replicas, id) {
			dropped = append(dropped, id)
		}
	}
	next := t
	next.Assignment = slices.Clone(t.Assignment)
	next.Assignment[p] = replicas
	next.Adding = maps.Clone(t.Adding)
	next.Removing = maps.Clone(t.Removing)
	adding := without(target, original)
	removing := without(original, target)
	setOrDelete(&next.Adding, p, adding)
	setOrDelete(&next.Removing, p, removing)
	return next, dropped, nil
}

// dropReplicas returns st without the replicas dropped in its ISR, led
// by a replica of replicas when its leader is dropped (at the next leader
// epoch), and whether that changes st. Errors: ErrInvalidReplicaAssignment
// when the leader is dropped and no replica that stays may lead.
func (s *State) dropReplicas(st coord.PartitionState, replicas, dropped []coord.BrokerID) (coord.PartitionState, bool, error) {
	next := st
	next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(id coord.BrokerID) bool { return slices.Contains(dropped, id) })
	if slices.Contains(dropped, st.Leader) {
		e := ElectLeader(replicas, next.ISR, s.online(st.TopicPartition()), false)
		if e.Leader == coord.NoBroker {
			return st, false, fmt.Errorf("%w: partition %s: its leader %d would leave and no replica that stays is live and in sync",
				ErrInvalidReplicaAssignment, st.TopicPartition(), st.Leader)
		}
		next.Leader, next.ISR, next.LeaderEpoch = e.Leader, e.ISR, st.LeaderEpoch+1
	}
	return next, !slices.Equal(next.ISR, st.ISR) || next.Leader != st.Leader, nil
}

// checkTarget checks a reassignment's target replicas: some, none twice,
// all live.
func (s *State) checkTarget(tp coord.TopicPartition, target []coord.BrokerID) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: partition %s: no target replicas", ErrInvalidReplicaAssignment, tp)
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return fmt.Errorf("%w: partition %s: broker %d twice", ErrInvalidReplicaAssignment, tp, id)
		}
		if !s.reachable(id) {
			return fmt.Errorf("%w: partition %s: broker %d is not live", ErrInvalidReplicaAssignment, tp, id)
		}
	}
	return nil
}

// completeStep completes the reassignment of every partition of tps (nil:
// every partition) that is being reassigned and whose target replicas
// are all in its ISR (phase 3), in one Commit. A partition none of whose
// target replicas may lead (none live) waits.
func (s *State) completeStep(tps []coord.TopicPartition) Step {
	if tps == nil {
		for _, name := range s.md.TopicNames() {
			t := s.md.Topics[name]
			for p := range t.Assignment {
				if t.Reassigning(int32(p)) {
					tps = append(tps, coord.TopicPartition{Topic: name, Partition: int32(p)})
				}
			}
		}
	}
	topics := map[string]coord.Topic{}
	var states []coord.Op
	var done []coord.TopicPartition
	stopAt := map[coord.BrokerID][]coord.TopicPartition{}
	for _, tp := range tps {
		t, ok := topics[tp.Topic]
		if !ok {
			t = s.md.Topics[tp.Topic]
		}
		st, ok := s.md.Partitions[tp]
		if !ok || int(tp.Partition) >= len(t.Assignment) || !t.Reassigning(tp.Partition) {
			continue
		}
		target := t.TargetReplicas(tp.Partition)
		if !containsAll(st.ISR, target) {
			continue
		}
		online := s.online(tp)
		next := st
		isr := make([]coord.BrokerID, 0, len(target))
		for _, id := range target {
			if slices.Contains(st.ISR, id) {
				isr = append(isr, id)
			}
		}
		next.ISR = isr
		if !slices.Contains(target, st.Leader) || !online(st.Leader) {
			e := ElectLeader(target, isr, online, false)
			if e.Leader == coord.NoBroker {
				continue
			}
			next.Leader, next.ISR = e.Leader, e.ISR
		}
		next.LeaderEpoch = st.LeaderEpoch + 1
		states = append(states, s.setPartition(next, st.PartitionEpoch))
		for _, id := range t.Removing[tp.Partition] {
			stopAt[id] = append(stopAt[id], tp)
		}
		completed := t
		completed.Assignment = slices.Clone(t.Assignment)
		completed.Assignment[tp.Partition] = target
		completed.Adding = maps.Clone(t.Adding)
		completed.Removing = maps.Clone(t.Removing)
		setOrDelete(&completed.Adding, tp.Partition, nil)
		setOrDelete(&completed.Removing, tp.Partition, nil)
		topics[tp.Topic] = completed
		done = append(done, tp)
	}
	if len(done) == 0 {
		return Step{}
	}
	ops := make([]coord.Op, 0, len(topics)+len(states))
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		ops = append(ops, coord.SetTopic{Topic: topics[name]})
	}
	ops = append(ops, states...)
	view := s.clone()
	view.Committed(Step{Ops: ops})
	changed := make([]PartitionInfo, 0, len(done))
	for _, tp := range done {
		changed = append(changed, view.info(tp))
	}
	s.log.Info("partition reassignments completed", "partitions", done)
	// The leaving replicas are stopped once their partitions' new states
	// are told: a removed replica that led has handed over by then.
	msgs := append(view.propagate(changed, nil), view.stopAt(stopAt)...)
	return Step{Ops: ops, Messages: msgs}
}

// Reassignments returns the reassignments in progress of the partitions
// tps (nil: all), by topic then partition; a partition not being
// reassigned is left out.
func (s *State) Reassignments(tps []coord.TopicPartition) []OngoingReassignment {
	var out []OngoingReassignment
	add := func(t coord.Topic, p int32) {
		if int(p) < len(t.Assignment) && p >= 0 && t.Reassigning(p) {
			out = append(out, OngoingReassignment{
				Partition: coord.TopicPartition{Topic: t.Name, Partition: p},
				Replicas:  slices.Clone(t.Assignment[p]),
				Adding:    slices.Clone(t.Adding[p]),
				Removing:  slices.Clone(t.Removing[p]),
			})
		}
	}
	if tps == nil {
		for _, name := range s.md.TopicNames() {
			t := s.md.Topics[name]
			for p := range t.Assignment {
				add(t, int32(p))
			}
		}
		return out
	}
	sorted := slices.Clone(tps)
	sortPartitions(sorted)
	for i, tp := range sorted {
		if i > 0 && sorted[i-1] == tp {
			continue
		}
		if t, ok := s.md.Topics[tp.Topic]; ok {
			add(t, tp.Partition)
		}
	}
	return out
}

// stopAt tells each live broker to stop its replicas of the partitions
// listed for it, deleting their logs.
func (s *State) stopAt(perBroker map[coord.BrokerID][]coord.TopicPartition) []Message {
	var msgs []Message
	for _, b := range s.liveBrokers() {
		if tps := perBroker[b.ID]; len(tps) > 0 {
			msgs = append(msgs, Message{To: b, Request: &StopReplicaRequest{
				ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
				Partitions: tps, Delete: true,
			}})
		}
	}
	return msgs
}

// setOrDelete sets (*m)[p] to ids, or deletes it when ids is empty,
// leaving *m nil once it is empty.
func setOrDelete(m *map[int32][]coord.BrokerID, p int32, ids []coord.BrokerID) {
	if len(ids) == 0 {
		delete(*m, p)
		if len(*m) == 0 {
			*m = nil
		}
		return
	}
	if *m == nil {
		*m = map[int32][]coord.BrokerID{}
	}
	(*m)[p] = ids
}

// without returns the ids of all that are not in drop, in order.
func without(all, drop []coord.BrokerID) []coord.BrokerID {
	out := make([]coord.BrokerID, 0, len(all))
	for _, id := range all {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// containsAll reports whether set holds every id of want.
func containsAll(set, want []coord.BrokerID) bool {
	for _, id := range want {
		if !slices.Contains(set, id) {
			return false
		}
	}
	return true
}

// anyReassigning reports whether some partition is being reassigned.
func (s *State) anyReassigning() bool {
	for _, t := range s.md.Topics {
		if len(t.Adding) > 0 || len(t.Removing) > 0 {
			return true
		}
	}
	return false
}
