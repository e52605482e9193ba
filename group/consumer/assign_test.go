package consumer

import (
	"fmt"
	"testing"
)

// tid is a topic id for tests: its first byte is n.
func tid(n byte) TopicID { return TopicID{n} }

// checkComplete fails unless every partition of a topic some member
// subscribes to is assigned to exactly one member that subscribes to it.
func checkComplete(t *testing.T, members []AssignMember, partitions map[TopicID]int32, got map[string]Assignment) {
	t.Helper()
	subscribed := map[string]map[TopicID]bool{}
	wanted := map[TopicID]bool{}
	for _, m := range members {
		subscribed[m.ID] = map[TopicID]bool{}
		for _, tp := range m.Topics {
			subscribed[m.ID][tp] = true
			wanted[tp] = true
		}
	}
	seen := map[topicPartition]string{}
	for id, a := range got {
		for tp, ps := range a {
			if !subscribed[id][tp] {
				t.Errorf("member %s got topic %x it does not subscribe to", id, tp[:1])
			}
			for _, p := range ps {
				k := topicPartition{tp, p}
				if o, ok := seen[k]; ok {
					t.Errorf("partition %x/%d assigned to %s and %s", tp[:1], p, o, id)
				}
				seen[k] = id
			}
		}
	}
	for tp := range wanted {
		for p := int32(0); p < partitions[tp]; p++ {
			if _, ok := seen[topicPartition{tp, p}]; !ok {
				t.Errorf("partition %x/%d not assigned", tp[:1], p)
			}
		}
	}
}

func TestUniform(t *testing.T) {
	a, b := tid(1), tid(2)
	for _, tc := range []struct {
		name       string
		members    []AssignMember
		partitions map[TopicID]int32
		// counts are the partitions each member must get.
		counts map[string]int
		// kept are partitions that must stay with their member.
		kept map[string]Assignment
	}{
		{
			name:       "one member takes all",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a}}},
			partitions: map[TopicID]int32{a: 4},
			counts:     map[string]int{"m1": 4},
		},
		{
			name:       "even split of two topics",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a, b}}, {ID: "m2", Topics: []TopicID{a, b}}, {ID: "m3", Topics: []TopicID{a, b}}},
			partitions: map[TopicID]int32{a: 4, b: 3},
			counts:     map[string]int{"m1": 3, "m2": 2, "m3": 2},
		},
		{
			name: "a new member takes from the others, who keep the rest",
			members: []AssignMember{
				{ID: "m1", Topics: []TopicID{a}, Current: Assignment{a: {0, 1, 2}}},
				{ID: "m2", Topics: []TopicID{a}, Current: Assignment{a: {3, 4, 5}}},
				{ID: "m3", Topics: []TopicID{a}},
			},
			partitions: map[TopicID]int32{a: 6},
			counts:     map[string]int{"m1": 2, "m2": 2, "m3": 2},
			kept:       map[string]Assignment{"m1": {a: {0, 1}}, "m2": {a: {3, 4}}},
		},
		{
			name: "a member leaving leaves its partitions to the others",
			members: []AssignMember{
				{ID: "m1", Topics: []TopicID{a}, Current: Assignment{a: {0, 1}}},
				{ID: "m3", Topics: []TopicID{a}, Current: Assignment{a: {4, 5}}},
			},
			partitions: map[TopicID]int32{a: 6},
			counts:     map[string]int{"m1": 3, "m3": 3},
			kept:       map[string]Assignment{"m1": {a: {0, 1}}, "m3": {a: {4, 5}}},
		},
		{
			name: "different subscriptions balance where they can",
			members: []AssignMember{
				{ID: "m1", Topics: []TopicID{a}},
				{ID: "m2", Topics: []TopicID{a, b}},
			},
			partitions: map[TopicID]int32{a: 4, b: 2},
			counts:     map[string]int{"m1": 3, "m2": 3},
		},
		{
			name:       "more members than partitions",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a}}, {ID: "m2", Topics: []TopicID{a}}, {ID: "m3", Topics: []TopicID{a}}},
			partitions: map[TopicID]int32{a: 2},
			counts:     map[string]int{"m1": 1, "m2": 1, "m3": 0},
		},
		{
			name:       "a current partition of a shrunk or gone topic is dropped",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a}, Current: Assignment{a: {0, 7}, b: {0}}}},
			partitions: map[TopicID]int32{a: 2},
			counts:     map[string]int{"m1": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Uniform(tc.members, tc.partitions)
			checkComplete(t, tc.members, tc.partitions, got)
			for id, n := range tc.counts {
				if got[id].Len() != n {
					t.Errorf("member %s: got %d partitions %v, want %d", id, got[id].Len(), got[id], n)
				}
			}
			for id, keep := range tc.kept {
				for tp, ps := range keep {
					for _, p := range ps {
						if !got[id].Has(tp, p) {
							t.Errorf("member %s lost %x/%d: got %v", id, tp[:1], p, got[id])
						}
					}
				}
			}
		})
	}
}

func TestUniformBalancedForAnyShape(t *testing.T) {
	a := tid(1)
	for members := 1; members <= 7; members++ {
		for parts := int32(0); parts <= 13; parts++ {
			var ms []AssignMember
			for i := range members {
				ms = append(ms, AssignMember{ID: fmt.Sprintf("m%d", i), Topics: []TopicID{a}})
			}
			// A lopsided current assignment: everything on m0.
			ms[0].Current = Assignment{}
			for p := range parts {
				ms[0].Current.add(a, p)
			}
			got := Uniform(ms, map[TopicID]int32{a: parts})
			checkComplete(t, ms, map[TopicID]int32{a: parts}, got)
			lo, hi := int(parts)/members, (int(parts)+members-1)/members
			for _, m := range ms {
				if n := got[m.ID].Len(); n < lo || n > hi {
					t.Errorf("%d members, %d partitions: %s got %d, want %d..%d", members, parts, m.ID, n, lo, hi)
				}
			}
		}
	}
}

func TestRange(t *testing.T) {
	a, b := tid(1), tid(2)
	for _, tc := range []struct {
		name       string
		members    []AssignMember
		partitions map[TopicID]int32
		want       map[string]Assignment
	}{
		{
			name:       "contiguous ranges, the first members one more",
			members:    []AssignMember{{ID: "m2", Topics: []TopicID{a}}, {ID: "m1", Topics: []TopicID{a}}},
			partitions: map[TopicID]int32{a: 5},
			want:       map[string]Assignment{"m1": {a: {0, 1, 2}}, "m2": {a: {3, 4}}},
		},
		{
			name:       "co-partitioned topics get the same partition numbers",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a, b}}, {ID: "m2", Topics: []TopicID{a, b}}},
			partitions: map[TopicID]int32{a: 4, b: 4},
			want:       map[string]Assignment{"m1": {a: {0, 1}, b: {0, 1}}, "m2": {a: {2, 3}, b: {2, 3}}},
		},
		{
			name:       "each topic split among its own subscribers",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a}}, {ID: "m2", Topics: []TopicID{a, b}}},
			partitions: map[TopicID]int32{a: 2, b: 3},
			want:       map[string]Assignment{"m1": {a: {0}}, "m2": {a: {1}, b: {0, 1, 2}}},
		},
		{
			name:       "more members than partitions",
			members:    []AssignMember{{ID: "m1", Topics: []TopicID{a}}, {ID: "m2", Topics: []TopicID{a}}, {ID: "m3", Topics: []TopicID{a}}},
			partitions: map[TopicID]int32{a: 2},
			want:       map[string]Assignment{"m1": {a: {0}}, "m2": {a: {1}}, "m3": {}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Range(tc.members, tc.partitions)
			checkComplete(t, tc.members, tc.partitions, got)
			for id, want := range tc.want {
				if !got[id].Equal(want) {
					t.Errorf("member %s: got %v, want %v", id, got[id], want)
				}
			}
		})
	}
}
