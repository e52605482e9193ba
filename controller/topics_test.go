package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestCreateTopic checks topic creation: Kafka's assignment from the
// seed over the eligible brokers, first leaders, and every refusal.
func TestCreateTopic(t *testing.T) {
	tests := []struct {
		name     string
		live     []coord.BrokerID
		shutting []coord.BrokerID
		spec     TopicSpec
		seed     Seed
		want     []string
		wantErr  error
	}{
		{
			name: "three partitions of RF 2 over three brokers, start 0",
			live: ids(1, 2, 3), spec: TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 2},
			want: []string{
				"create topic t [[1 2] [2 3] [3 1]]",
				"  t-0 leader 1 epoch 0 isr [1 2]",
				"  t-1 leader 2 epoch 0 isr [2 3]",
				"  t-2 leader 3 epoch 0 isr [3 1]",
			},
		},
		{
			name: "the seed's start rotates the first replicas",
			live: ids(1, 2, 3), spec: TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 1}, seed: Seed{Start: 4},
			want: []string{"create topic t [[2] [3]]", "  t-0 leader 2 epoch 0 isr [2]", "  t-1 leader 3 epoch 0 isr [3]"},
		},
		{
			name: "brokers in controlled shutdown get no replica",
			live: ids(1, 2, 3), shutting: ids(2), spec: TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 2},
			want: []string{"create topic t [[1 3] [3 1]]", "  t-0 leader 1 epoch 0 isr [1 3]", "  t-1 leader 3 epoch 0 isr [3 1]"},
		},
		{
			name: "a manual assignment, led by its first live replica",
			live: ids(1, 2, 3), spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{3, 1}, {2}}},
			want: []string{"create topic t [[3 1] [2]]", "  t-0 leader 3 epoch 0 isr [3 1]", "  t-1 leader 2 epoch 0 isr [2]"},
		},
		{
			name: "a manual assignment may name a broker shutting down, which does not lead",
			live: ids(1, 2), shutting: ids(2), spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{2, 1}}},
			want: []string{"create topic t [[2 1]]", "  t-0 leader 1 epoch 0 isr [1]"},
		},
		{name: "RF above the live brokers", live: ids(1, 2), spec: TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 3}, wantErr: ErrInvalidReplicationFactor},
		{name: "RF above the brokers not shutting down", live: ids(1, 2), shutting: ids(1), spec: TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2}, wantErr: ErrInvalidReplicationFactor},
		{name: "RF 0", live: ids(1, 2), spec: TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 0}, wantErr: ErrInvalidReplicationFactor},
		{name: "no live broker", spec: TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}, wantErr: ErrInvalidReplicationFactor},
		{name: "no partitions", live: ids(1), spec: TopicSpec{Name: "t", Partitions: 0, ReplicationFactor: 1}, wantErr: ErrInvalidPartitions},
		{name: "an assignment naming a broker twice", live: ids(1, 2), spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1, 1}}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "an assignment naming a dead broker", live: ids(1, 2), spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1, 3}}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "an assignment with an empty partition", live: ids(1, 2), spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1}, {}}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "a topic that exists", live: ids(1), spec: TopicSpec{Name: "old", Partitions: 1, ReplicationFactor: 1}, wantErr: coord.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, tt.live, part{topic: "old", p: 0, replicas: ids(1), leader: 1, isr: ids(1)})
			for _, id := range tt.shutting {
				s.shuttingDown[id] = true
			}
			tt.seed.TopicID = [16]byte{9}
			plan, topic, err := s.CreateTopic(tt.spec, tt.seed)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !plan.Empty() {
					t.Errorf("got plan %v with the error, want none", render(t, s, plan))
				}
				return
			}
			if topic.ID != tt.seed.TopicID || topic.Name != tt.spec.Name {
				t.Errorf("got topic %q id %x, want %q with the seed's id", topic.Name, topic.ID, tt.spec.Name)
			}
			checkLines(t, opLines(render(t, s, plan)), tt.want)
			// Validate only: the same answer, nothing to do.
			spec := tt.spec
			spec.ValidateOnly = true
			vplan, vtopic, verr := s.CreateTopic(spec, tt.seed)
			if verr != nil || !vplan.Empty() || len(vtopic.Assignment) != len(topic.Assignment) {
				t.Errorf("validate only: got plan %v, %d partitions, %v; want no plan, the same topic, nil", render(t, s, vplan), len(vtopic.Assignment), verr)
			}
		})
	}
}

// TestCreateTopicPropagation: every live broker learns the new
// partitions, and each replica its role.
func TestCreateTopicPropagation(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2))
	plan, _, err := s.CreateTopic(TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{2}}}, Seed{})
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, render(t, s, plan), []string{
		"create topic t [[2]]",
		"  t-0 leader 2 epoch 0 isr [2]",
		"to 1: UpdateMetadata live [1 2] t-0",
		"to 2: LeaderAndIsr t-0 leader 2 epoch 0 isr [2]",
		"to 2: UpdateMetadata live [1 2] t-0",
	})
}

// TestCreateTopicCutOff is the rule for topics cut off midway: a
// CreateTopics retried for a topic whose states are partly missing
// creates them, elected as at creation, if it asks for the same topic;
// otherwise, as for a complete topic, coord.ErrExists.
func TestCreateTopicCutOff(t *testing.T) {
	// Topic t was to have 4 partitions of RF 2 over [1 2 3]; the commit
	// stopped after the states of 0 and 1. Broker 3 has died since.
	cutOff := func() *State {
		s := newTestState(Policy{}, ids(1, 2),
			part{topic: "t", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2)},
			part{topic: "t", p: 1, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
		)
		topic := s.md.Topics["t"]
		topic.Assignment = append(topic.Assignment, []coord.BrokerID{3, 1}, []coord.BrokerID{1, 2})
		s.md.Topics["t"] = topic
		return s
	}
	tests := []struct {
		name    string
		spec    TopicSpec
		want    []string
		wantErr error
	}{
		{
			name: "the same partitions and RF: completed",
			spec: TopicSpec{Name: "t", Partitions: 4, ReplicationFactor: 2},
			want: []string{"set t-2 leader 1 epoch 0 isr [1] if new", "set t-3 leader 1 epoch 0 isr [1 2] if new"},
		},
		{
			name: "the same manual assignment: completed",
			spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1, 2}, {2, 3}, {3, 1}, {1, 2}}},
			want: []string{"set t-2 leader 1 epoch 0 isr [1] if new", "set t-3 leader 1 epoch 0 isr [1 2] if new"},
		},
		{name: "another partition count", spec: TopicSpec{Name: "t", Partitions: 5, ReplicationFactor: 2}, wantErr: coord.ErrExists},
		{name: "another RF", spec: TopicSpec{Name: "t", Partitions: 4, ReplicationFactor: 1}, wantErr: coord.ErrExists},
		{name: "another config", spec: TopicSpec{Name: "t", Partitions: 4, ReplicationFactor: 2, Config: map[string]string{"cleanup.policy": "compact"}}, wantErr: coord.ErrExists},
		{name: "another manual assignment", spec: TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1, 2}, {2, 3}, {3, 1}, {2, 1}}}, wantErr: coord.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := cutOff()
			plan, topic, err := s.CreateTopic(tt.spec, Seed{TopicID: [16]byte{9}})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if topic.ID != s.md.Topics["t"].ID || len(topic.Assignment) != 4 {
				t.Errorf("got topic id %x with %d partitions, want the stored topic", topic.ID, len(topic.Assignment))
			}
			lines := render(t, s, plan)
			checkLines(t, opLines(lines), tt.want)
			if !contains(lines, "to 1: LeaderAndIsr t-2 leader 1 epoch 0 isr [1], t-3 leader 1 epoch 0 isr [1 2]") {
				t.Errorf("plan:\n%v\nwant the new states sent to broker 1", lines)
			}
			commitAll(s, plan)
			if missing := s.missingStates(s.md.Topics["t"]); len(missing) != 0 {
				t.Errorf("after the plan: partitions %v have no state, want none", missing)
			}
			if _, _, err := s.CreateTopic(tt.spec, Seed{}); !errors.Is(err, coord.ErrExists) {
				t.Errorf("once complete: got %v, want %v", err, coord.ErrExists)
			}
		})
	}
	t.Run("reported for the log", func(t *testing.T) {
		got := cutOff().IncompleteTopics()
		if want := "topic t: 2 of 4 partitions have no state (2 3)"; len(got) != 1 || got[0] != want {
			t.Errorf("got %q, want [%q]", got, want)
		}
	})
	t.Run("Reconcile does not make states up", func(t *testing.T) {
		s := cutOff()
		// It shrinks t-1's ISR (broker 3 is gone) and nothing more.
		checkLines(t, opLines(render(t, s, s.Reconcile())), []string{"set t-1 leader 2 epoch 0 isr [2] if 0"})
	})
}

// TestCreatePartitions checks growing a topic: the new partitions are
// assigned as at creation over the eligible brokers, and every refusal
// is an error, not a panic.
func TestCreatePartitions(t *testing.T) {
	parts := []part{
		{topic: "t", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2), leaderEpoch: 2, partitionEpoch: 3},
		{topic: "t", p: 1, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
	}
	tests := []struct {
		name     string
		live     []coord.BrokerID
		shutting []coord.BrokerID
		total    int
		manual   [][]coord.BrokerID
		want     []string
		wantErr  error
	}{
		{
			name: "two more over three brokers",
			live: ids(1, 2, 3), total: 4,
			want: []string{
				// Partition 3 starts the second round over the brokers:
				// Kafka shifts the followers by one more.
				"set topic t [[1 2] [2 3] [3 1] [1 3]]",
				"set t-2 leader 3 epoch 0 isr [3 1] if new",
				"set t-3 leader 1 epoch 0 isr [1 3] if new",
			},
		},
		{
			name: "brokers in controlled shutdown get no replica",
			live: ids(1, 2, 3), shutting: ids(3), total: 4,
			want: []string{
				"set topic t [[1 2] [2 3] [1 2] [2 1]]",
				"set t-2 leader 1 epoch 0 isr [1 2] if new",
				"set t-3 leader 2 epoch 0 isr [2 1] if new",
			},
		},
		{
			name: "a manual assignment",
			live: ids(1, 2, 3), total: 3, manual: [][]coord.BrokerID{{3, 2}},
			want: []string{"set topic t [[1 2] [2 3] [3 2]]", "set t-2 leader 3 epoch 0 isr [3 2] if new"},
		},
		{name: "no live broker at all", total: 3, wantErr: ErrInvalidReplicationFactor},
		{name: "every live broker shutting down", live: ids(1, 2), shutting: ids(1, 2), total: 3, wantErr: ErrInvalidReplicationFactor},
		{name: "fewer eligible brokers than the RF", live: ids(1, 2, 3), shutting: ids(2, 3), total: 3, wantErr: ErrInvalidReplicationFactor},
		{name: "no more partitions than now", live: ids(1, 2, 3), total: 2, wantErr: ErrInvalidPartitions},
		{name: "fewer partitions than now", live: ids(1, 2, 3), total: 1, wantErr: ErrInvalidPartitions},
		{name: "a manual assignment of the wrong length", live: ids(1, 2, 3), total: 4, manual: [][]coord.BrokerID{{3, 2}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "a manual assignment naming a dead broker", live: ids(1, 2), total: 3, manual: [][]coord.BrokerID{{3, 2}}, wantErr: ErrInvalidReplicaAssignment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, tt.live, parts...)
			for _, id := range tt.shutting {
				s.shuttingDown[id] = true
			}
			plan, err := s.CreatePartitions("t", tt.total, tt.manual, false, Seed{})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			checkLines(t, opLines(render(t, s, plan)), tt.want)
			if err != nil {
				return
			}
			if vplan, err := s.CreatePartitions("t", tt.total, tt.manual, true, Seed{}); err != nil || !vplan.Empty() {
				t.Errorf("validate only: got %v, %v; want nothing to do", render(t, s, vplan), err)
			}
		})
	}
	t.Run("a topic that does not exist", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1))
		if _, err := s.CreatePartitions("u", 2, nil, false, Seed{}); !errors.Is(err, coord.ErrNotFound) {
			t.Errorf("got %v, want %v", err, coord.ErrNotFound)
		}
	})
	t.Run("a growth cut off is completed by its retry", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), parts...)
		grown := s.md.Topics["t"]
		grown.Assignment = append(grown.Assignment, []coord.BrokerID{3, 1})
		s.md.Topics["t"] = grown
		plan, err := s.CreatePartitions("t", 3, nil, false, Seed{})
		if err != nil {
			t.Fatalf("got %v, want nil", err)
		}
		checkLines(t, opLines(render(t, s, plan)), []string{"set t-2 leader 3 epoch 0 isr [3 1] if new"})
		commitAll(s, plan)
		if _, err := s.CreatePartitions("t", 3, nil, false, Seed{}); !errors.Is(err, ErrInvalidPartitions) {
			t.Errorf("once complete: got %v, want %v", err, ErrInvalidPartitions)
		}
	})
}

// TestDeleteTopic: one commit, then StopReplica with delete to the live
// replicas and the deletion to every live broker.
func TestDeleteTopic(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2, 3),
		part{topic: "t", p: 0, replicas: ids(2, 3), leader: 2, isr: ids(2, 3)},
		part{topic: "t", p: 1, replicas: ids(3, 4), leader: 3, isr: ids(3)},
		part{topic: "u", p: 0, replicas: ids(1), leader: 1, isr: ids(1)},
	)
	plan, err := s.DeleteTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, render(t, s, plan), []string{
		"delete topic t",
		"to 2: StopReplica delete t-0",
		"to 3: StopReplica delete t-0 t-1",
		"to 1: UpdateMetadata live [1 2 3] deleted t",
		"to 2: UpdateMetadata live [1 2 3] deleted t",
		"to 3: UpdateMetadata live [1 2 3] deleted t",
	})
	commitAll(s, plan)
	if _, ok := s.md.Topics["t"]; ok || len(s.md.Partitions) != 1 {
		t.Errorf("after the commit: topics %v, %d partition states; want only u's", s.md.TopicNames(), len(s.md.Partitions))
	}
	if _, err := s.DeleteTopic("t"); !errors.Is(err, coord.ErrNotFound) {
		t.Errorf("deleted again: got %v, want %v", err, coord.ErrNotFound)
	}
}

// TestCreatedStatesAtPartitionBase: on the target of a migration a
// created partition state gets the backend's partition base as its
// epoch (coord.Metadata.PartitionBase), not 0. The states the controller
// keeps and sends for a created topic or partition carry it, and its
// next write of them expects it, as the backend will compare.
func TestCreatedStatesAtPartitionBase(t *testing.T) {
	const base = 7
	s := newTestState(Policy{}, ids(1, 2), part{topic: "imported", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2), partitionEpoch: base + 2})
	s.md.PartitionBase = base
	plan, _, err := s.CreateTopic(TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{2, 1}}}, Seed{})
	if err != nil {
		t.Fatal(err)
	}
	sent := func(plan Plan, tp coord.TopicPartition) []int32 {
		var epochs []int32
		for _, step := range plan.Steps {
			for _, m := range step.Messages {
				if r, ok := m.Request.(*LeaderAndIsrRequest); ok {
					for _, p := range r.Partitions {
						if p.TopicPartition() == tp {
							epochs = append(epochs, p.PartitionEpoch)
						}
					}
				}
			}
		}
		return epochs
	}
	if got := sent(plan, coord.TopicPartition{Topic: "t", Partition: 0}); len(got) == 0 || slices.ContainsFunc(got, func(e int32) bool { return e != base }) {
		t.Errorf("created t-0: LeaderAndIsr partition epochs %v, want %d", got, base)
	}
	commitAll(s, plan)
	if got := state(s, "t", 0).PartitionEpoch; got != base {
		t.Errorf("created t-0: kept at partition epoch %d, want the base %d", got, base)
	}
	plan, err = s.CreatePartitions("t", 2, [][]coord.BrokerID{{1, 2}}, false, Seed{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(plan, coord.TopicPartition{Topic: "t", Partition: 1}); len(got) == 0 || slices.ContainsFunc(got, func(e int32) bool { return e != base }) {
		t.Errorf("created t-1: LeaderAndIsr partition epochs %v, want %d", got, base)
	}
	commitAll(s, plan)
	if got := state(s, "t", 1).PartitionEpoch; got != base {
		t.Errorf("created t-1: kept at partition epoch %d, want the base %d", got, base)
	}
	plan, err = s.ControlledShutdown(2, brokerEpoch(2))
	if err != nil {
		t.Fatal(err)
	}
	want := map[coord.TopicPartition]int32{{Topic: "imported", Partition: 0}: base + 2, {Topic: "t", Partition: 0}: base, {Topic: "t", Partition: 1}: base}
	for _, step := range plan.Steps {
		for _, op := range step.Ops {
			set, ok := op.(coord.SetPartition)
			if !ok {
				continue
			}
			tp := set.State.TopicPartition()
			if set.ExpectedEpoch != want[tp] {
				t.Errorf("controlled shutdown of broker 2: %s expected at epoch %d, want %d", tp, set.ExpectedEpoch, want[tp])
			}
			delete(want, tp)
		}
	}
	if len(want) > 0 {
		t.Errorf("controlled shutdown of broker 2: no write of %v", want)
	}
}
