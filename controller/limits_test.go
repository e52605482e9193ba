package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// commit applies every step of plan to s, as the Controller does once the
// backend has committed them.
func commit(s *State, plan Plan) {
	for _, step := range plan.Steps {
		s.Committed(step)
	}
}

// checkLimitErr fails t unless err is ErrPartitionLimit naming property.
func checkLimitErr(t *testing.T, what string, err error, property string) {
	t.Helper()
	if !errors.Is(err, ErrPartitionLimit) || !strings.Contains(err.Error(), property+"=") {
		t.Errorf("%s: got %v, want %v naming %s", what, err, ErrPartitionLimit, property)
	}
}

// TestDefaultPartitionLimitsAdmitTheMeasuredClusters: the defaults admit
// the clusters measured on tripod's development machine (the failover
// benchmark's 100 000 partitions of replication factor 3 over 3 brokers,
// as one topic on Raft and etcd and as ten of 10 000 on ZooKeeper) and
// refuse one partition more.
func TestDefaultPartitionLimitsAdmitTheMeasuredClusters(t *testing.T) {
	s := newTestState(DefaultConfig().policy(), ids(1, 2, 3))
	if _, _, err := s.CreateTopic(TopicSpec{Name: "wide", Partitions: 100000, ReplicationFactor: 3, ValidateOnly: true}, Seed{}); err != nil {
		t.Errorf("one topic of 100 000 partitions of RF 3: got %v, want it admitted", err)
	}
	for i := range 10 {
		plan, _, err := s.CreateTopic(TopicSpec{Name: fmt.Sprintf("wide-%d", i), Partitions: 10000, ReplicationFactor: 3}, Seed{})
		if err != nil {
			t.Fatalf("topic %d of 10 000 partitions of RF 3: got %v, want it created", i, err)
		}
		commit(s, plan)
	}
	_, _, err := s.CreateTopic(TopicSpec{Name: "one-more", Partitions: 1, ReplicationFactor: 1}, Seed{})
	checkLimitErr(t, "one partition past 100 000", err, "max.partitions")
	_, err = s.CreatePartitions("wide-0", 10001, [][]coord.BrokerID{{1}}, true, Seed{})
	checkLimitErr(t, "one partition more for wide-0", err, "max.partitions")
}

// TestPartitionLimits: max.partitions counts partitions and
// max.broker.partitions counts replicas (so the replication factor), for
// CreateTopics with or without a manual assignment and for
// CreatePartitions; a refusal plans nothing, and 0 turns a bound off.
func TestPartitionLimits(t *testing.T) {
	t.Run("max.partitions counts partitions, not replicas", func(t *testing.T) {
		s := newTestState(Policy{MaxPartitions: 12}, ids(1, 2, 3))
		plan, _, err := s.CreateTopic(TopicSpec{Name: "t", Partitions: 12, ReplicationFactor: 3}, Seed{})
		if err != nil {
			t.Fatalf("12 partitions of RF 3 under max.partitions 12: got %v, want them created", err)
		}
		commit(s, plan)
		plan, _, err = s.CreateTopic(TopicSpec{Name: "u", Assignment: [][]coord.BrokerID{{1}}}, Seed{})
		checkLimitErr(t, "a manual assignment of 1 more", err, "max.partitions")
		if len(plan.Steps) != 0 {
			t.Errorf("refused creation: got %d plan steps, want 0", len(plan.Steps))
		}
		plan, err = s.CreatePartitions("t", 13, nil, false, Seed{})
		checkLimitErr(t, "CreatePartitions to 13", err, "max.partitions")
		if len(plan.Steps) != 0 {
			t.Errorf("refused growth: got %d plan steps, want 0", len(plan.Steps))
		}
	})
	t.Run("max.broker.partitions counts every replica", func(t *testing.T) {
		s := newTestState(Policy{MaxBrokerPartitions: 10}, ids(1, 2, 3))
		// RF 1: 11 partitions are 4, 4 and 3 replicas.
		plan, _, err := s.CreateTopic(TopicSpec{Name: "one", Partitions: 11, ReplicationFactor: 1}, Seed{})
		if err != nil {
			t.Fatalf("11 partitions of RF 1 over 3 brokers: got %v, want them created", err)
		}
		commit(s, plan)
		// RF 3: 4 partitions are 4 more replicas on every broker, 8 at most.
		plan, _, err = s.CreateTopic(TopicSpec{Name: "three", Partitions: 4, ReplicationFactor: 3}, Seed{})
		if err != nil {
			t.Fatalf("4 partitions of RF 3: got %v, want them created", err)
		}
		commit(s, plan)
		// 3 more of RF 3 would put 11 on a broker that holds 8.
		_, _, err = s.CreateTopic(TopicSpec{Name: "more", Partitions: 3, ReplicationFactor: 3}, Seed{})
		checkLimitErr(t, "3 more partitions of RF 3", err, "max.broker.partitions")
		_, err = s.CreatePartitions("three", 7, nil, false, Seed{})
		checkLimitErr(t, "CreatePartitions of RF 3 to 7", err, "max.broker.partitions")
		// Broker 1 holds 8 (4 of RF 1, 4 of RF 3): 2 more fit, 3 do not.
		if _, err = s.CreatePartitions("three", 6, [][]coord.BrokerID{{1, 2, 3}, {1, 3, 2}}, true, Seed{}); err != nil {
			t.Errorf("CreatePartitions assigning broker 1 2 more: got %v, want them admitted", err)
		}
		_, err = s.CreatePartitions("three", 7, [][]coord.BrokerID{{1, 2, 3}, {1, 3, 2}, {1, 2, 3}}, false, Seed{})
		checkLimitErr(t, "CreatePartitions assigning broker 1 3 more", err, "max.broker.partitions")
	})
	t.Run("0 turns the bounds off", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1))
		if _, _, err := s.CreateTopic(TopicSpec{Name: "t", Partitions: 1000, ReplicationFactor: 1, ValidateOnly: true}, Seed{}); err != nil {
			t.Errorf("1000 partitions without bounds: got %v, want them admitted", err)
		}
	})
}
