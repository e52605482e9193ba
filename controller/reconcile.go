package controller

import (
	"slices"
	"sort"

	"github.com/tripodmq/tripod/coord"
)

// Members records a new set of live brokers and returns the plan that
// follows from it. A broker gone loses its leaderships and ISR places; a
// broker back with a new broker epoch (restarted) first counts as gone,
// so leadership moves off the incarnation that lost its state, then as
// new; a new broker gets its full state; and every broker learns the new
// live set, even when no partition changed (Kafka sends UpdateMetadata on
// every broker startup and failure), so Metadata lists the same brokers
// everywhere.
func (s *State) Members(brokers []coord.Broker) Plan {
	next := make(map[coord.BrokerID]coord.Broker, len(brokers))
	for _, b := range brokers {
		next[b.ID] = b
	}
	first := !s.membersSeen
	s.membersSeen = true
	var drops []coord.BrokerID
	for id, old := range s.live {
		b, ok := next[id]
		switch {
		case !ok:
			s.log.Info("broker left", "broker", id, "broker_epoch", old.Epoch)
			drops = append(drops, id)
			delete(s.shuttingDown, id)
			delete(s.offline, id)
			delete(s.restarted, id)
			delete(s.unsynced, id)
			delete(s.unreachable, id)
		case b.Epoch != old.Epoch:
			s.log.Info("broker restarted", "broker", id, "old_epoch", old.Epoch, "broker_epoch", b.Epoch)
			drops = append(drops, id)
			delete(s.shuttingDown, id)
			// A restart opens the broker's log dirs again: its offline
			// replicas are online again once it rejoins.
			delete(s.offline, id)
			delete(s.unreachable, id)
			s.restarted[id] = true
		}
	}
	slices.Sort(drops)
	changed := len(next) != len(s.live)
	for id, b := range next {
		if old, ok := s.live[id]; !ok || old.Epoch != b.Epoch {
			changed = true
			s.unsynced[id] = true
			if first {
				s.log.Debug("broker live", "broker", id, "broker_epoch", b.Epoch)
			} else {
				s.log.Info("broker joined", "broker", id, "broker_epoch", b.Epoch)
			}
		}
	}
	s.live = next
	if changed {
		s.liveChanged = true
	}
	for id, epoch := range s.crashedAtStart {
		if b, ok := next[id]; ok && b.Epoch == epoch && id != s.controller {
			s.markUnreachable(b)
		}
	}
	s.crashedAtStart = nil
	var plan Plan
	plan.add(Step{Drops: drops})
	plan.Steps = append(plan.Steps, s.Reconcile().Steps...)
	return plan
}

// Reconcile brings the backend and the brokers in line with what the
// state knows, doing the owed work first, in this order:
//
//  1. restarted brokers count as gone: partitions they lead get a new
//     leader (R11 without them, or the same broker at a new leader epoch
//     when it is the only choice, once step 3 sees it live) and they
//     leave ISRs;
//  2. brokers that have not had their full state get it;
//  3. every partition whose leader is not live (or whose replica there is
//     offline) gets one elected by R11, and brokers that are not live and
//     offline replicas leave ISRs;
//  4. when the live set changed, every live broker is told.
//
// Each of steps 1 and 3 is one Commit of all its partition states,
// however many (the backend chunks it), and the replicas and live brokers
// are told of the committed states. Later steps are decided on the state
// as the earlier ones will have committed it. Reconcile never creates a
// missing partition state (see CreateTopic).
func (s *State) Reconcile() Plan {
	var plan Plan
	view := s
	if len(s.restarted) > 0 {
		step := s.reconcileStep(s.restarted)
		step.settles.restarted = sortedIDs(s.restarted)
		plan.add(step)
		if len(step.Ops) > 0 {
			view = s.clone()
			view.Committed(step)
		}
	}
	if len(s.unsynced) > 0 {
		var step Step
		var joined []coord.Broker
		for _, b := range view.liveBrokers() {
			if s.unsynced[b.ID] {
				joined = append(joined, b)
				step.settles.synced = append(step.settles.synced, b.ID)
			}
		}
		step.Messages = view.fullStates(joined)
		plan.add(step)
	}
	step := view.reconcileStep(nil)
	plan.add(step)
	if view.anyReassigning() {
		// Reassignments a new controller loads, or that a leader
		// change let through, complete once their targets are in sync.
		if len(step.Ops) > 0 {
			if view == s {
				view = s.clone()
			}
			view.Committed(step)
		}
		plan.add(view.completeStep(nil))
	}
	if s.liveChanged {
		step := Step{settles: settlement{live: true}}
		step.Messages = view.propagate(nil, nil)
		plan.add(step)
	}
	return plan
}

// reconcileStep is R11 over every partition with excluded brokers
// counted as not live.
func (s *State) reconcileStep(excluded map[coord.BrokerID]bool) Step {
	var ops []coord.Op
	for _, tp := range s.sortedPartitions() {
		online := s.online(tp)
		live := func(id coord.BrokerID) bool { return online(id) && !excluded[id] }
		st := s.md.Partitions[tp]
		assignment := s.replicas(tp)
		if assignment == nil {
			continue
		}
		next := st
		if st.Leader == coord.NoBroker || !live(st.Leader) {
			e := ElectLeader(assignment, st.ISR, live, s.unclean(s.md.Topics[tp.Topic]))
			if e.Leader == st.Leader && slices.Equal(e.ISR, st.ISR) {
				continue
			}
			if e.Unclean {
				s.log.Warn("unclean leader election: acknowledged records may be lost", "partition", tp, "leader", e.Leader)
			}
			next.Leader, next.ISR = e.Leader, e.ISR
			next.LeaderEpoch = st.LeaderEpoch + 1
		} else {
			isr := slices.DeleteFunc(slices.Clone(st.ISR), func(id coord.BrokerID) bool { return !live(id) })
			if slices.Equal(isr, st.ISR) {
				continue
			}
			next.ISR = isr
		}
		ops = append(ops, s.setPartition(next, st.PartitionEpoch))
	}
	return s.statesStep(ops)
}

// ReplicasOffline records that broker (at its broker epoch) reported the
// replicas of partitions offline (KAFKA_STORAGE_ERROR) and returns the
// Reconcile that follows: they leave their ISRs and lose their
// leaderships to other live ISR members (R11 without them), and are not
// elected again until the broker restarts. A report from another
// incarnation than the live one, or naming only replicas already known
// offline or partitions without a state, changes nothing.
func (s *State) ReplicasOffline(broker coord.Broker, partitions []coord.TopicPartition) Plan {
	if b, ok := s.live[broker.ID]; !ok || b.Epoch != broker.Epoch {
		s.log.Debug("offline replicas of a broker not live ignored", "broker", broker.ID, "broker_epoch", broker.Epoch)
		return Plan{}
	}
	var added []coord.TopicPartition
	for _, tp := range partitions {
		if _, ok := s.md.Partitions[tp]; !ok || s.offline[broker.ID][tp] {
			continue
		}
		if s.offline[broker.ID] == nil {
			s.offline[broker.ID] = map[coord.TopicPartition]bool{}
		}
		s.offline[broker.ID][tp] = true
		added = append(added, tp)
	}
	if len(added) == 0 {
		return Plan{}
	}
	s.log.Warn("replicas offline: moving their leaderships and leaving them out of ISRs", "broker", broker.ID, "partitions", added)
	return s.Reconcile()
}

// LogDirFailure handles a broker's report that one of its log dirs went
// offline (Kafka's log dir event notification): it plans a LeaderAndIsr to
// that broker for every replica it holds that is not known to be offline,
// whose answers (KAFKA_STORAGE_ERROR, reported through ReplicasOffline)
// tell which are. Errors: ErrStaleBrokerEpoch for a report from another
// incarnation than the live one.
func (s *State) LogDirFailure(id coord.BrokerID, brokerEpoch int64) (Plan, error) {
	if err := s.checkIncarnation(id, brokerEpoch); err != nil {
		return Plan{}, err
	}
	b := s.live[id]
	var mine []PartitionInfo
	for _, tp := range s.sortedPartitions() {
		info := s.info(tp)
		if slices.Contains(info.Replicas, id) && !s.offline[id][tp] {
			mine = append(mine, info)
		}
	}
	s.log.Warn("log dir failure reported: asking the broker for its replicas' state", "broker", id, "partitions", len(mine))
	var plan Plan
	if len(mine) > 0 {
		plan.add(Step{Messages: []Message{{To: b, Request: &LeaderAndIsrRequest{
			ControllerID: s.controller, ControllerEpoch: s.epoch, BrokerEpoch: b.Epoch,
			Partitions: mine, Leaders: s.liveBrokers(),
		}}}})
	}
	return plan, nil
}

// sortedIDs returns the keys of m, sorted.
func sortedIDs[V any](m map[coord.BrokerID]V) []coord.BrokerID {
	ids := make([]coord.BrokerID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
