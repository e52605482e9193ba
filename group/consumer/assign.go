package consumer

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
)

// TopicID is a topic's id, as KIP-848 names topics in assignments.
type TopicID = [16]byte

// Assignment is a set of partitions by topic id; each topic's partitions
// are sorted and distinct, and a topic with none is absent.
type Assignment map[TopicID][]int32

// clone returns a deep copy of a.
func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Equal reports whether a and b hold the same partitions.
func (a Assignment) Equal(b Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// Len returns the number of partitions in a.
func (a Assignment) Len() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Has reports whether a holds partition p of topic t.
func (a Assignment) Has(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// add puts partition p of topic t into a.
func (a Assignment) add(t TopicID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

// remove takes partition p of topic t out of a.
func (a Assignment) remove(t TopicID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

// topics returns a's topic ids in byte order.
func (a Assignment) topics() []TopicID {
	ids := make([]TopicID, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

// String shows a as topic-id-prefix:[partitions], for test failures.
func (a Assignment) String() string {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, t := range a.topics() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%x:%v", t[:2], a[t])
	}
	b.WriteByte('}')
	return b.String()
}

// The server-side assignors tripod has, under Kafka's names
// (group.consumer.assignors; a member picks one with ServerAssignor).
const (
	// UniformAssignor spreads the subscribed partitions evenly over the
	// members, keeping each partition with its current member where the
	// balance allows (Kafka's UniformAssignor).
	UniformAssignor = "uniform"
	// RangeAssignor gives each member a contiguous range of each
	// subscribed topic's partitions, so that members subscribed to
	// co-partitioned topics get the same partition numbers (Kafka's
	// server-side RangeAssignor).
	RangeAssignor = "range"
)

// Assignors are the assignors tripod implements, by name.
var Assignors = map[string]Assign{
	UniformAssignor: Uniform,
	RangeAssignor:   Range,
}

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	// ID is the member id.
	ID string
	// Topics are the topics the member subscribes to that exist.
	Topics []TopicID
	// Current is the member's current target assignment, which a
	// sticky assignor keeps where it can.
	Current Assignment
}

// Assign computes a target assignment: every partition of a topic some
// member subscribes to goes to exactly one member subscribed to it.
// partitions gives each subscribed topic's partition count. The result
// has an entry, possibly empty, for every member.
type Assign func(members []AssignMember, partitions map[TopicID]int32) map[string]Assignment

// topicPartition is one partition of a topic.
type topicPartition struct {
	topic     TopicID
	partition int32
}

// Uniform is the uniform assignor. Every partition first stays with the
// member whose current assignment holds it, if that member still
// subscribes to its topic; the rest go, in topic and partition order,
// each to the subscribed member holding the fewest; then partitions move
// from the fullest members to subscribed members holding at least two
// fewer until none can. With every member subscribed to the same topics
// that gives each member ⌊P/M⌋ or ⌈P/M⌉ partitions, as Kafka's
// OptimizedUniformAssignmentBuilder; with different subscriptions it is
// balanced where subscriptions allow, the aim of Kafka's
// GeneralUniformAssignmentBuilder, by a simpler algorithm than its.
func Uniform(members []AssignMember, partitions map[TopicID]int32) map[string]Assignment {
	members = sortedMembers(members)
	out := make(map[string]Assignment, len(members))
	subscribers := map[TopicID][]string{}
	count := map[string]int{}
	for _, m := range members {
		out[m.ID] = Assignment{}
		for _, t := range m.Topics {
			if _, ok := partitions[t]; ok && !slices.Contains(subscribers[t], m.ID) {
				subscribers[t] = append(subscribers[t], m.ID)
			}
		}
	}
	owner := map[topicPartition]string{}
	subscribed := func(id string, t TopicID) bool { return slices.Contains(subscribers[t], id) }
	// Sticky: keep what each member holds and may still hold.
	for _, m := range members {
		for t, ps := range m.Current {
			n, ok := partitions[t]
			if !ok || !subscribed(m.ID, t) {
				continue
			}
			for _, p := range ps {
				tp := topicPartition{t, p}
				if p < n && owner[tp] == "" {
					owner[tp] = m.ID
					out[m.ID].add(t, p)
					count[m.ID]++
				}
			}
		}
	}
	all := allPartitions(partitions, subscribers)
	// Shed: a member above the fair share of a homogeneous group gives
	// back its surplus first, so that the fill below balances.
	if len(members) > 0 && homogeneous(members, subscribers) {
		quota, extra := len(all)/len(members), len(all)%len(members)
		for _, m := range members {
			limit := quota
			if extra > 0 && count[m.ID] > quota {
				limit++
				extra--
			}
			for count[m.ID] > limit {
				a := out[m.ID]
				t := a.topics()[len(a)-1]
				p := a[t][len(a[t])-1]
				a.remove(t, p)
				delete(owner, topicPartition{t, p})
				count[m.ID]--
			}
		}
	}
	// Fill: the rest to the least loaded subscriber.
	for _, tp := range all {
		if owner[tp] != "" {
			continue
		}
		best := ""
		for _, id := range subscribers[tp.topic] {
			if best == "" || count[id] < count[best] {
				best = id
			}
		}
		owner[tp] = best
		out[best].add(tp.topic, tp.partition)
		count[best]++
	}
	// Balance: move from the fullest to a subscriber two or more below.
	for moved := true; moved; {
		moved = false
		for _, tp := range slices.Backward(all) {
			from := owner[tp]
			for _, to := range subscribers[tp.topic] {
				if count[to]+1 < count[from] {
					out[from].remove(tp.topic, tp.partition)
					out[to].add(tp.topic, tp.partition)
					count[from]--
					count[to]++
					owner[tp] = to
					moved = true
					break
				}
			}
		}
	}
	return out
}

// Range is the range assignor: for each topic, its subscribers in member
// id order get contiguous ranges of its partitions, the first P mod M of
// them one more than the others. Unlike Kafka's, it does not keep
// partitions with their current members when membership changes.
func Range(members []AssignMember, partitions map[TopicID]int32) map[string]Assignment {
	members = sortedMembers(members)
	out := make(map[string]Assignment, len(members))
	subscribers := map[TopicID][]string{}
	for _, m := range members {
		out[m.ID] = Assignment{}
		for _, t := range m.Topics {
			if _, ok := partitions[t]; ok && !slices.Contains(subscribers[t], m.ID) {
				subscribers[t] = append(subscribers[t], m.ID)
			}
		}
	}
	for t, subs := range subscribers {
		n := partitions[t]
		quota, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, id := range subs {
			size := quota
			if int32(i) < extra {
				size++
			}
			for p := next; p < next+size; p++ {
				out[id].add(t, p)
			}
			next += size
		}
	}
	return out
}

// sortedMembers returns members sorted by id.
func sortedMembers(members []AssignMember) []AssignMember {
	members = slices.Clone(members)
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	return members
}

// allPartitions lists every partition of the subscribed topics, in topic
// id and partition order.
func allPartitions(partitions map[TopicID]int32, subscribers map[TopicID][]string) []topicPartition {
	var topics []TopicID
	for t := range subscribers {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	var all []topicPartition
	for _, t := range topics {
		for p := int32(0); p < partitions[t]; p++ {
			all = append(all, topicPartition{t, p})
		}
	}
	return all
}

// homogeneous reports whether every member subscribes to every
// subscribed topic.
func homogeneous(members []AssignMember, subscribers map[TopicID][]string) bool {
	for _, subs := range subscribers {
		if len(subs) != len(members) {
			return false
		}
	}
	return true
}
