package controller

import (
	"fmt"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// ControlledShutdown records that broker id (at brokerEpoch) is about to
// stop and decides moving every leadership off it, to the first other
// live ISR member in assignment order, and removing it from every ISR it
// is not the last member of. From then on until it leaves or restarts it
// leads nothing, joins no ISR and gets no new replica. A partition with
// no other live ISR member keeps its leader: after the plan, LedBy(id)
// names those, and the broker retries while it is not empty. Errors:
// ErrStaleBrokerEpoch.
func (s *State) ControlledShutdown(id coord.BrokerID, brokerEpoch int64) (Plan, error) {
	if err := s.checkIncarnation(id, brokerEpoch); err != nil {
		return Plan{}, err
	}
	s.shuttingDown[id] = true
	var ops []coord.Op
	for _, tp := range s.sortedPartitions() {
		st := s.md.Partitions[tp]
		assignment := s.replicas(tp)
		if !slices.Contains(assignment, id) {
			continue
		}
		next := st
		switch {
		case st.Leader == id:
			e, ok := ElectForShutdown(assignment, st.ISR, s.online(tp), id)
			if !ok {
				continue
			}
			next.Leader, next.ISR, next.LeaderEpoch = e.Leader, e.ISR, st.LeaderEpoch+1
		case slices.Contains(st.ISR, id) && len(st.ISR) > 1:
			next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(r coord.BrokerID) bool { return r == id })
		default:
			continue
		}
		ops = append(ops, s.setPartition(next, st.PartitionEpoch))
	}
	var plan Plan
	plan.add(s.statesStep(ops))
	return plan, nil
}

// ElectLeaders decides preferred (preferred true) or unclean elections
// for the given partitions (all partitions when nil), as Kafka's
// ElectLeaders API: one Commit of every election, every replica told. It
// returns one result per partition: nil (elected), ErrElectionNotNeeded
// (the preferred replica leads already; or, unclean, a live leader
// exists), ErrPreferredLeaderNotAvailable (the preferred replica is not
// live and in the ISR), ErrEligibleLeadersNotAvailable (no replica is
// live and online) or coord.ErrNotFound.
func (s *State) ElectLeaders(preferred bool, partitions []coord.TopicPartition) (Plan, map[coord.TopicPartition]error) {
	if partitions == nil {
		partitions = s.sortedPartitions()
	}
	results := make(map[coord.TopicPartition]error, len(partitions))
	var ops []coord.Op
	for _, tp := range partitions {
		st, ok := s.md.Partitions[tp]
		assignment := s.replicas(tp)
		if !ok || len(assignment) == 0 {
			results[tp] = fmt.Errorf("%w: partition %s", coord.ErrNotFound, tp)
			continue
		}
		online := s.online(tp)
		next := st
		if preferred {
			if st.Leader == assignment[0] {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			leader, ok := ElectPreferred(assignment, st.ISR, online)
			if !ok {
				results[tp] = ErrPreferredLeaderNotAvailable
				continue
			}
			next.Leader = leader
		} else {
			if st.Leader != coord.NoBroker && online(st.Leader) {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			e := ElectLeader(assignment, st.ISR, online, true)
			if e.Leader == coord.NoBroker {
				results[tp] = ErrEligibleLeadersNotAvailable
				continue
			}
			if e.Unclean {
				s.log.Warn("unclean leader election asked for: acknowledged records may be lost", "partition", tp, "leader", e.Leader)
			}
			next.Leader, next.ISR = e.Leader, e.ISR
		}
		next.LeaderEpoch = st.LeaderEpoch + 1
		ops = append(ops, s.setPartition(next, st.PartitionEpoch))
		results[tp] = nil
	}
	var plan Plan
	plan.add(s.statesStep(ops))
	return plan, results
}

// Rebalance decides the preferred-leader rebalance
// (auto.leader.rebalance.enable): for every live broker (not shutting
// down) that fails to lead more than LeaderImbalancePerBrokerPercentage
// percent of the partitions it is the preferred replica of, preferred
// elections of those partitions (which elect it where it is in the ISR).
// A broker exactly at the threshold is left alone.
func (s *State) Rebalance() Plan {
	preferredOf := map[coord.BrokerID][]coord.TopicPartition{}
	notLed := map[coord.BrokerID]int{}
	for _, tp := range s.sortedPartitions() {
		assignment := s.replicas(tp)
		if len(assignment) == 0 {
			continue
		}
		p := assignment[0]
		preferredOf[p] = append(preferredOf[p], tp)
		if s.md.Partitions[tp].Leader != p {
			notLed[p]++
		}
	}
	var candidates []coord.TopicPartition
	for _, id := range sortedIDs(preferredOf) {
		tps := preferredOf[id]
		if !s.isLive(id) || notLed[id] == 0 {
			continue
		}
		if notLed[id]*100 > s.policy.LeaderImbalancePerBrokerPercentage*len(tps) {
			for _, tp := range tps {
				if s.md.Partitions[tp].Leader != id {
					candidates = append(candidates, tp)
				}
			}
		}
	}
	if len(candidates) == 0 {
		return Plan{}
	}
	sortPartitions(candidates)
	s.log.Info("preferred leader rebalance", "partitions", len(candidates))
	plan, _ := s.ElectLeaders(true, candidates)
	return plan
}
