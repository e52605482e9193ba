package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

func liveSet(ids ...coord.BrokerID) func(coord.BrokerID) bool {
	return func(id coord.BrokerID) bool { return slices.Contains(ids, id) }
}

func TestElectLeader(t *testing.T) {
	tests := []struct {
		name       string
		assignment []coord.BrokerID
		isr        []coord.BrokerID
		live       []coord.BrokerID
		unclean    bool
		want       Election
	}{
		{"first live ISR member in assignment order", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{3, 2, 1}, []coord.BrokerID{2, 3}, false,
			Election{Leader: 2, ISR: []coord.BrokerID{2, 3}}},
		{"dead replicas leave the ISR", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{1, 2, 3}, []coord.BrokerID{3}, false,
			Election{Leader: 3, ISR: []coord.BrokerID{3}}},
		{"out-of-sync replica may not lead when unclean is off", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{1}, []coord.BrokerID{2, 3}, false,
			Election{Leader: coord.NoBroker, ISR: []coord.BrokerID{1}}},
		{"out-of-sync replica leads when unclean is on", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{1}, []coord.BrokerID{3, 2}, true,
			Election{Leader: 2, ISR: []coord.BrokerID{2}, Unclean: true}},
		{"no replica live: leader -1, last ISR kept", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{2}, nil, true,
			Election{Leader: coord.NoBroker, ISR: []coord.BrokerID{2}}},
		{"the kept ISR member leads when it returns", []coord.BrokerID{1, 2, 3}, []coord.BrokerID{2}, []coord.BrokerID{1, 2}, false,
			Election{Leader: 2, ISR: []coord.BrokerID{2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ElectLeader(tt.assignment, tt.isr, liveSet(tt.live...), tt.unclean)
			if got.Leader != tt.want.Leader || !slices.Equal(got.ISR, tt.want.ISR) || got.Unclean != tt.want.Unclean {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestElectForShutdown(t *testing.T) {
	e, ok := ElectForShutdown([]coord.BrokerID{1, 2, 3}, []coord.BrokerID{1, 2, 3}, liveSet(1, 2, 3), 1)
	if !ok || e.Leader != 2 || !slices.Equal(e.ISR, []coord.BrokerID{2, 3}) {
		t.Errorf("got %+v %v, want leader 2 ISR [2 3]", e, ok)
	}
	if _, ok := ElectForShutdown([]coord.BrokerID{1, 2}, []coord.BrokerID{1}, liveSet(1, 2), 1); ok {
		t.Errorf("got a leader for a partition whose only ISR member is leaving, want none")
	}
}

func TestElectPreferred(t *testing.T) {
	if id, ok := ElectPreferred([]coord.BrokerID{2, 1}, []coord.BrokerID{1, 2}, liveSet(1, 2)); !ok || id != 2 {
		t.Errorf("got %d %v, want 2 true", id, ok)
	}
	if _, ok := ElectPreferred([]coord.BrokerID{2, 1}, []coord.BrokerID{1}, liveSet(1, 2)); ok {
		t.Errorf("got a preferred leader outside the ISR, want none")
	}
}

// TestAssignReplicasSpreadsLeaders checks the property the controller
// relies on: with P a multiple of the broker count, every broker leads P/n
// partitions and holds P*RF/n replicas, and no partition has a broker twice.
func TestAssignReplicasSpreadsLeaders(t *testing.T) {
	for _, c := range []struct{ brokers, partitions, rf int }{{3, 6, 3}, {3, 6, 2}, {5, 100, 3}, {4, 1000, 3}} {
		for start := 0; start < c.brokers; start++ {
			t.Run(fmt.Sprintf("%d brokers %d partitions rf %d start %d", c.brokers, c.partitions, c.rf, start), func(t *testing.T) {
				brokers := make([]coord.BrokerID, c.brokers)
				for i := range brokers {
					brokers[i] = coord.BrokerID(i + 1)
				}
				a, err := AssignReplicas(brokers, c.partitions, c.rf, 0, start, start+1)
				if err != nil {
					t.Fatal(err)
				}
				leaders := map[coord.BrokerID]int{}
				replicas := map[coord.BrokerID]int{}
				for p, rs := range a {
					if len(rs) != c.rf {
						t.Fatalf("partition %d: got %d replicas, want %d", p, len(rs), c.rf)
					}
					seen := map[coord.BrokerID]bool{}
					for _, r := range rs {
						if seen[r] {
							t.Fatalf("partition %d: broker %d twice in %v", p, r, rs)
						}
						seen[r] = true
						replicas[r]++
					}
					leaders[rs[0]]++
				}
				for _, b := range brokers {
					if got, want := leaders[b], c.partitions/c.brokers; got != want {
						t.Errorf("broker %d leads %d partitions, want %d", b, got, want)
					}
					if got, want := replicas[b], c.partitions*c.rf/c.brokers; got != want {
						t.Errorf("broker %d holds %d replicas, want %d", b, got, want)
					}
				}
			})
		}
	}
}

func TestAssignReplicasRefusesTooFewBrokers(t *testing.T) {
	if _, err := AssignReplicas([]coord.BrokerID{1, 2}, 3, 3, 0, 0, 0); err == nil {
		t.Fatal("got nil error for replication factor 3 on 2 brokers, want an error")
	}
}
