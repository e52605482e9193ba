package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// TopicSpec asks for a new topic.
type TopicSpec struct {
	Name string
	// Partitions and ReplicationFactor are used when Assignment is empty.
	Partitions        int
	ReplicationFactor int
	// Assignment, when set, is a manual replica assignment.
	Assignment [][]coord.BrokerID
	Config     map[string]string
	// ValidateOnly checks the request and changes nothing.
	ValidateOnly bool
}

// Seed is the randomness a decision uses, drawn by the caller so that
// decisions stay deterministic: Kafka's random start index and replica
// shift of an assignment (any int; taken modulo the broker count), and a
// new topic's ID.
type Seed struct {
	Start, Shift int
	TopicID      [16]byte
}

// Topics cut off midway. The backend applies a large Commit in chunks and
// stops at the first that fails, leaving the earlier ones applied (and,
// on etcd, perhaps some of those that ran beside it), so a
// CreateTopics or CreatePartitions cut off after its first chunk leaves a
// topic whose assignment names partitions that have no state (and, on
// ZooKeeper, which deletes a topic in chunks too, so does a DeleteTopics
// cut off). The controller sees such a topic once it reloads the metadata
// after the failure, and tells the brokers of the partitions whose states
// the applied chunks created (State.Reload). Nobody elects a leader for a partition without a
// state, and Reconcile does not make one up (it cannot tell a creation
// cut off from a deletion cut off); the request's retry finishes the
// work:
//
//   - a CreateTopics of an incomplete topic with the same shape (the same
//     partition count and replication factor, or the same manual
//     assignment, and the same config) is the retry of the creation: it
//     creates the missing states, with leaders elected as at creation, and
//     succeeds with the stored topic (its ID and assignment); any other
//     CreateTopics of an existing topic fails with coord.ErrExists;
//   - a CreatePartitions to the partition count an incomplete topic
//     already has (with no manual assignment, or the one stored for the
//     last partitions) is the retry of the growth and creates the missing
//     states the same way;
//   - a DeleteTopics deletes what is left.

// CreateTopic decides a topic creation: Kafka's replica assignment over
// the eligible brokers (live, not in controlled shutdown) unless spec
// gives one, each partition led by its first live replica with its live
// replicas as the ISR, one Commit of the topic and its states, and every
// broker told. With spec.ValidateOnly it checks and plans nothing. It
// returns the topic as it will be stored; an incomplete topic of the same
// shape is completed (see "Topics cut off midway"). Errors:
// coord.ErrExists, ErrInvalidReplicationFactor, ErrInvalidPartitions,
// ErrInvalidReplicaAssignment, ErrPartitionLimit (max.partitions,
// max.broker.partitions).
func (s *State) CreateTopic(spec TopicSpec, seed Seed) (Plan, coord.Topic, error) {
	if stored, ok := s.md.Topics[spec.Name]; ok {
		missing := s.missingStates(stored)
		if len(missing) == 0 || !sameShape(stored, spec) {
			return Plan{}, coord.Topic{}, fmt.Errorf("%w: topic %q", coord.ErrExists, spec.Name)
		}
		if spec.ValidateOnly {
			return Plan{}, stored, nil
		}
		s.log.Info("completing a topic whose creation was cut off", "topic", spec.Name, "missing", len(missing))
		return s.completeTopic(stored, missing), stored, nil
	}
	assignment := spec.Assignment
	if len(assignment) == 0 {
		if spec.Partitions < 1 {
			return Plan{}, coord.Topic{}, fmt.Errorf("%w: topic %q: %d partitions, must be at least 1", ErrInvalidPartitions, spec.Name, spec.Partitions)
		}
		if err := s.checkClusterPartitions(spec.Name, spec.Partitions); err != nil {
			return Plan{}, coord.Topic{}, err
		}
		ids := s.eligible()
		if spec.ReplicationFactor < 1 || spec.ReplicationFactor > len(ids) {
			return Plan{}, coord.Topic{}, fmt.Errorf("%w: topic %q: replication factor %d, must be between 1 and the %d live brokers not shutting down",
				ErrInvalidReplicationFactor, spec.Name, spec.ReplicationFactor, len(ids))
		}
		var err error
		assignment, err = s.assignReplicas(ids, spec.Partitions, spec.ReplicationFactor, 0, seed)
		if err != nil {
			return Plan{}, coord.Topic{}, fmt.Errorf("%w: topic %q: %v", ErrInvalidReplicationFactor, spec.Name, err)
		}
	} else if err := s.checkClusterPartitions(spec.Name, len(assignment)); err != nil {
		return Plan{}, coord.Topic{}, err
	} else if err := s.checkAssignment(spec.Name, 0, assignment); err != nil {
		return Plan{}, coord.Topic{}, err
	}
	if err := s.checkBrokerPartitions(spec.Name, assignment); err != nil {
		return Plan{}, coord.Topic{}, err
	}
	topic := coord.Topic{Name: spec.Name, ID: seed.TopicID, Assignment: assignment, Config: spec.Config}
	if spec.ValidateOnly {
		return Plan{}, topic, nil
	}
	states := make([]coord.PartitionState, len(assignment))
	changed := make([]PartitionInfo, len(assignment))
	for p := range assignment {
		states[p] = s.initialState(topic, int32(p))
		changed[p] = partitionInfo(topic, states[p])
	}
	var plan Plan
	plan.add(Step{
		Ops:      []coord.Op{coord.CreateTopic{Topic: topic, States: states}},
		Messages: s.propagate(changed, nil),
	})
	return plan, topic, nil
}

// initialState is the first state of partition p of topic t: led by its
// first live replica, with its live replicas as the ISR (all of them,
// leaderless, when none is live), at the partition epoch the backend
// gives a created state.
func (s *State) initialState(t coord.Topic, p int32) coord.PartitionState {
	replicas := t.Assignment[p]
	e := ElectLeader(replicas, replicas, s.isLive, false)
	return coord.PartitionState{Topic: t.Name, Partition: p, Leader: e.Leader, ISR: e.ISR, PartitionEpoch: s.md.PartitionBase, ControllerEpoch: s.epoch}
}

// completeTopic creates the missing states of t as at creation.
func (s *State) completeTopic(t coord.Topic, missing []int32) Plan {
	ops := make([]coord.Op, 0, len(missing))
	for _, p := range missing {
		ops = append(ops, s.setPartition(s.initialState(t, p), coord.NewPartition))
	}
	var plan Plan
	plan.add(s.statesStep(ops))
	return plan
}

// sameShape reports whether spec asks for the topic t is: the same manual
// assignment, or the same partition count and replication factor; and
// the same config.
func sameShape(t coord.Topic, spec TopicSpec) bool {
	if !maps.Equal(t.Config, spec.Config) {
		return false
	}
	if len(spec.Assignment) > 0 {
		return slices.EqualFunc(t.Assignment, spec.Assignment, slices.Equal)
	}
	return len(t.Assignment) == spec.Partitions && len(t.Assignment) > 0 && len(t.Assignment[0]) == spec.ReplicationFactor
}

// checkClusterPartitions refuses adding n partitions to topic when the
// cluster would then hold more than max.partitions (Policy.MaxPartitions),
// before anything is assigned, so that the refusal costs nothing
// whatever n is.
func (s *State) checkClusterPartitions(topic string, n int) error {
	limit := s.policy.MaxPartitions
	if limit == 0 {
		return nil
	}
	have := 0
	for _, t := range s.md.Topics {
		have += len(t.Assignment)
	}
	if n <= limit-have {
		return nil
	}
	s.log.Warn("partitions refused: the cluster would pass max.partitions", "topic", topic, "asked", n, "cluster", have, "max.partitions", limit)
	return fmt.Errorf("%w: topic %q: %d new partitions would make the cluster's %d more than max.partitions=%d",
		ErrPartitionLimit, topic, n, have+n, limit)
}

// checkBrokerPartitions refuses the replicas of added (new partitions of
// topic) when they would assign some broker more than
// max.broker.partitions replicas (Policy.MaxBrokerPartitions); it names
// the first such broker.
func (s *State) checkBrokerPartitions(topic string, added [][]coord.BrokerID) error {
	limit := s.policy.MaxBrokerPartitions
	if limit == 0 {
		return nil
	}
	adding := map[coord.BrokerID]int{}
	for _, replicas := range added {
		for _, r := range replicas {
			adding[r]++
		}
	}
	held := map[coord.BrokerID]int{}
	for _, t := range s.md.Topics {
		for _, replicas := range t.Assignment {
			for _, r := range replicas {
				if _, ok := adding[r]; ok {
					held[r]++
				}
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(adding)) {
		if held[id]+adding[id] <= limit {
			continue
		}
		s.log.Warn("partitions refused: a broker would pass max.broker.partitions", "topic", topic, "broker", id,
			"adding", adding[id], "held", held[id], "max.broker.partitions", limit)
		return fmt.Errorf("%w: topic %q: %d new replicas on broker %d would make its %d more than max.broker.partitions=%d",
			ErrPartitionLimit, topic, adding[id], id, held[id]+adding[id], limit)
	}
	return nil
}

// checkAssignment checks a manual assignment of partitions first,
// first+1, ... of topic: every partition has replicas, none twice, all
// live.
func (s *State) checkAssignment(topic string, first int, assignment [][]coord.BrokerID) error {
	for i, replicas := range assignment {
		p := first + i
		if len(replicas) == 0 {
			return fmt.Errorf("%w: topic %q partition %d: no replicas", ErrInvalidReplicaAssignment, topic, p)
		}
		seen := map[coord.BrokerID]bool{}
		for _, r := range replicas {
			if seen[r] {
				return fmt.Errorf("%w: topic %q partition %d: broker %d twice", ErrInvalidReplicaAssignment, topic, p, r)
			}
			seen[r] = true
			if !s.reachable(r) {
				return fmt.Errorf("%w: topic %q partition %d: broker %d is not live", ErrInvalidReplicaAssignment, topic, p, r)
			}
		}
	}
	return nil
}

// CreatePartitions decides growing topic name to total partitions: the
// new ones assigned as at topic creation, over the eligible brokers (live
// and not in controlled shutdown), or as manual says; one Commit of the
// grown topic and the new states; every broker told. With validateOnly it
// checks and plans nothing. A topic whose growth to total was cut off is
// completed (see "Topics cut off midway"). Errors: coord.ErrNotFound,
// ErrInvalidPartitions, ErrInvalidReplicaAssignment, ErrPartitionLimit
// (max.partitions, max.broker.partitions), and
// ErrInvalidReplicationFactor when fewer eligible brokers than the
// topic's replication factor are live (none at all included).
func (s *State) CreatePartitions(name string, total int, manual [][]coord.BrokerID, validateOnly bool, seed Seed) (Plan, error) {
	topic, ok := s.md.Topics[name]
	if !ok {
		return Plan{}, fmt.Errorf("%w: topic %q", coord.ErrNotFound, name)
	}
	have := len(topic.Assignment)
	if total == have {
		missing := s.missingStates(topic)
		if len(missing) > 0 && (len(manual) == 0 || len(manual) <= have &&
			slices.EqualFunc(topic.Assignment[have-len(manual):], manual, slices.Equal)) {
			if validateOnly {
				return Plan{}, nil
			}
			s.log.Info("completing a topic whose growth was cut off", "topic", name, "missing", len(missing))
			return s.completeTopic(topic, missing), nil
		}
	}
	if total <= have {
		return Plan{}, fmt.Errorf("%w: topic %q has %d partitions, asked for %d: must be more", ErrInvalidPartitions, name, have, total)
	}
	if err := s.checkClusterPartitions(name, total-have); err != nil {
		return Plan{}, err
	}
	added := manual
	if len(added) == 0 {
		rf := 0
		if have > 0 {
			rf = len(topic.TargetReplicas(0))
		}
		ids := s.eligible()
		if rf < 1 || rf > len(ids) {
			return Plan{}, fmt.Errorf("%w: topic %q: replication factor %d, but %d live brokers are not shutting down",
				ErrInvalidReplicationFactor, name, rf, len(ids))
		}
		var err error
		added, err = s.assignReplicas(ids, total-have, rf, have, seed)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: topic %q: %v", ErrInvalidReplicationFactor, name, err)
		}
	} else if len(added) != total-have {
		return Plan{}, fmt.Errorf("%w: topic %q: %d assignments for %d new partitions", ErrInvalidReplicaAssignment, name, len(added), total-have)
	} else if err := s.checkAssignment(name, have, added); err != nil {
		return Plan{}, err
	}
	if err := s.checkBrokerPartitions(name, added); err != nil {
		return Plan{}, err
	}
	if validateOnly {
		return Plan{}, nil
	}
	grown := topic
	grown.Assignment = append(slices.Clone(topic.Assignment), added...)
	ops := []coord.Op{coord.SetTopic{Topic: grown}}
	changed := make([]PartitionInfo, 0, len(added))
	for p := have; p < total; p++ {
		st := s.initialState(grown, int32(p))
		op := s.setPartition(st, coord.NewPartition)
		ops = append(ops, op)
		changed = append(changed, partitionInfo(grown, committedState(op, s.md.PartitionBase)))
	}
	var plan Plan
	plan.add(Step{Ops: ops, Messages: s.propagate(changed, nil)})
	return plan, nil
}

// DeleteTopic decides deleting topic name: one Commit, then StopReplica
// with delete to every live broker holding one of its replicas, and every
// broker told. Errors: coord.ErrNotFound.
func (s *State) DeleteTopic(name string) (Plan, error) {
	topic, ok := s.md.Topics[name]
	if !ok {
		return Plan{}, fmt.Errorf("%w: topic %q", coord.ErrNotFound, name)
	}
	msgs := s.stopReplicas(topic)
	msgs = append(msgs, s.propagate(nil, []string{name})...)
	var plan Plan
	plan.add(Step{Ops: []coord.Op{coord.DeleteTopic{Name: name}}, Messages: msgs})
	return plan, nil
}

// stopReplicas tells every live broker holding a replica of topic to stop
// it and delete its log.
func (s *State) stopReplicas(topic coord.Topic) []Message {
	perBroker := map[coord.BrokerID][]coord.TopicPartition{}
	for p, replicas := range topic.Assignment {
		tp := coord.TopicPartition{Topic: topic.Name, Partition: int32(p)}
		for _, r := range replicas {
			perBroker[r] = append(perBroker[r], tp)
		}
	}
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

// assignReplicas assigns replicas of new partitions over the brokers ids:
// rack-aware (AssignReplicasRackAware) when every one of them has a rack
// (broker.rack), else as AssignReplicas. A cluster where only some
// brokers have racks, as while broker.rack is rolled out, is assigned
// without racks, as Kafka's RackAwareMode.Safe does, rather than refused
// as its Enforced mode would.
func (s *State) assignReplicas(ids []coord.BrokerID, nPartitions, replicationFactor, firstPartition int, seed Seed) ([][]coord.BrokerID, error) {
	racks := make(map[coord.BrokerID]string, len(ids))
	for _, id := range ids {
		rack := s.live[id].Rack
		if rack == "" {
			return AssignReplicas(ids, nPartitions, replicationFactor, firstPartition, seed.Start, seed.Shift)
		}
		racks[id] = rack
	}
	return AssignReplicasRackAware(racks, nPartitions, replicationFactor, firstPartition, seed.Start, seed.Shift)
}
