package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestAssignReplicasRackAwareAsKafka checks the rack-aware assignment
// against Kafka's own example (AdminRackAwareTest): brokers 0..5 in
// rack1: 0, 5, rack2: 3, 4 and rack3: 1, 2, 7 partitions of 3 replicas
// from start 0.
func TestAssignReplicasRackAwareAsKafka(t *testing.T) {
	racks := map[coord.BrokerID]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	if got, want := rackAlternated(racks), []coord.BrokerID{0, 3, 1, 5, 4, 2}; !slices.Equal(got, want) {
		t.Fatalf("rack-alternated list %v, want %v", got, want)
	}
	got, err := AssignReplicasRackAware(racks, 7, 3, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]coord.BrokerID{{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("assignment %v, want Kafka's %v", got, want)
	}
}

// TestAssignReplicasRackAware checks, for racks even and uneven, every
// start and shift, that each partition's replicas are distinct and span
// min(replication factor, racks) racks, that leaders are spread evenly
// over brokers (and so over racks of equal size), and that replicas are
// spread evenly over racks when the racks are even.
func TestAssignReplicasRackAware(t *testing.T) {
	for _, c := range []struct {
		name       string
		racks      map[coord.BrokerID]string
		partitions int
		rf         int
		// evenReplicas: every broker holds the same number of replicas.
		evenReplicas bool
	}{
		{"3 racks x 2 brokers, rf 3", map[coord.BrokerID]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}, 12, 3, true},
		{"3 racks x 2 brokers, rf 2", map[coord.BrokerID]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}, 12, 2, true},
		{"uneven racks 3+1+1, rf 3", map[coord.BrokerID]string{1: "a", 2: "a", 3: "a", 4: "b", 5: "c"}, 10, 3, false},
		{"uneven racks 2+1, rf 2", map[coord.BrokerID]string{1: "a", 2: "a", 3: "b"}, 6, 2, false},
		{"more replicas than racks, rf 3 over 2 racks", map[coord.BrokerID]string{1: "a", 2: "a", 3: "b", 4: "b"}, 8, 3, true},
		{"one rack", map[coord.BrokerID]string{1: "a", 2: "a", 3: "a"}, 6, 3, true},
	} {
		nRacks := len(distinctRacks(c.racks))
		n := len(c.racks)
		for start := 0; start < n; start++ {
			for shift := 0; shift < n; shift++ {
				t.Run(fmt.Sprintf("%s/start %d shift %d", c.name, start, shift), func(t *testing.T) {
					a, err := AssignReplicasRackAware(c.racks, c.partitions, c.rf, 0, start, shift)
					if err != nil {
						t.Fatal(err)
					}
					leaders, replicas := map[coord.BrokerID]int{}, map[coord.BrokerID]int{}
					for p, rs := range a {
						if len(rs) != c.rf || len(slices.Compact(slices.Sorted(slices.Values(rs)))) != c.rf {
							t.Fatalf("partition %d: replicas %v, want %d distinct", p, rs, c.rf)
						}
						spanned := map[string]bool{}
						for _, r := range rs {
							spanned[c.racks[r]] = true
							replicas[r]++
						}
						if len(spanned) != min(c.rf, nRacks) {
							t.Errorf("partition %d: replicas %v span racks %v, want %d racks", p, rs, spanned, min(c.rf, nRacks))
						}
						leaders[rs[0]]++
					}
					for id := range c.racks {
						if leaders[id] != c.partitions/n {
							t.Errorf("broker %d leads %d partitions, want %d: %v", id, leaders[id], c.partitions/n, a)
						}
						if c.evenReplicas && replicas[id] != c.partitions*c.rf/n {
							t.Errorf("broker %d holds %d replicas, want %d: %v", id, replicas[id], c.partitions*c.rf/n, a)
						}
					}
				})
			}
		}
	}
	if _, err := AssignReplicasRackAware(map[coord.BrokerID]string{1: "a", 2: "b"}, 1, 3, 0, 0, 0); err == nil {
		t.Fatal("rf 3 over 2 brokers: got no error")
	}
}

// TestCreateTopicPlacesReplicasByRack checks the controller's choice of
// assignment for CreateTopics and CreatePartitions: rack-aware when every
// live broker has a rack, over the live brokers only (a rack whose
// brokers are all down gets no replica), without racks when some broker
// has none, and an explicit assignment taken as given.
func TestCreateTopicPlacesReplicasByRack(t *testing.T) {
	racks := map[coord.BrokerID]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	for _, c := range []struct {
		name string
		live []coord.BrokerID
		// noRack: live brokers registered without a rack.
		noRack []coord.BrokerID
		// racksPer: the racks each partition must span; 0 when the
		// assignment must be the rack-unaware one.
		racksPer int
	}{
		{"every rack live", []coord.BrokerID{1, 2, 3, 4, 5, 6}, nil, 3},
		{"rack c has no live broker", []coord.BrokerID{1, 2, 3, 4}, nil, 2},
		{"broker 6 has no rack", []coord.BrokerID{1, 2, 3, 4, 5, 6}, []coord.BrokerID{6}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestState(Policy{}, c.live)
			for _, id := range c.live {
				b := s.live[id]
				if !slices.Contains(c.noRack, id) {
					b.Rack = racks[id]
				}
				s.live[id] = b
			}
			seed := Seed{Start: 1, Shift: 2}
			plan, topic, err := s.CreateTopic(TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3}, seed)
			if err != nil {
				t.Fatal(err)
			}
			commitAll(s, plan)
			if plan, err = s.CreatePartitions("t", 9, nil, false, seed); err != nil {
				t.Fatal(err)
			}
			commitAll(s, plan)
			all := s.md.Topics["t"].Assignment
			if !slices.EqualFunc(all[:6], topic.Assignment, slices.Equal) || len(all) != 9 {
				t.Fatalf("assignment after CreatePartitions %v, want 9 partitions starting with %v", all, topic.Assignment)
			}
			if c.racksPer == 0 {
				want, _ := AssignReplicas(c.live, 6, 3, 0, seed.Start, seed.Shift)
				if fmt.Sprint(topic.Assignment) != fmt.Sprint(want) {
					t.Fatalf("assignment %v, want the rack-unaware %v", topic.Assignment, want)
				}
				return
			}
			for p, rs := range all {
				spanned := map[string]bool{}
				for _, r := range rs {
					if !slices.Contains(c.live, r) {
						t.Errorf("partition %d: replicas %v name broker %d, which is not live", p, rs, r)
					}
					spanned[racks[r]] = true
				}
				if len(spanned) != c.racksPer {
					t.Errorf("partition %d: replicas %v span %d racks, want %d", p, rs, len(spanned), c.racksPer)
				}
			}
		})
	}

	// An explicit assignment is taken as given, all in one rack.
	s := newTestState(Policy{}, []coord.BrokerID{1, 2, 3, 4})
	for id, rack := range map[coord.BrokerID]string{1: "a", 2: "a", 3: "b", 4: "b"} {
		b := s.live[id]
		b.Rack = rack
		s.live[id] = b
	}
	manual := [][]coord.BrokerID{{1, 2}, {2, 1}}
	if _, topic, err := s.CreateTopic(TopicSpec{Name: "pinned", Assignment: manual}, Seed{}); err != nil || fmt.Sprint(topic.Assignment) != fmt.Sprint(manual) {
		t.Fatalf("explicit assignment: got %v, %v; want %v as given", topic.Assignment, err, manual)
	}
}
