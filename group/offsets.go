package group

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Offsets holds the committed offsets of the groups of one
// __consumer_offsets partition: what its records say once applied in
// order. It is not safe for concurrent use.
type Offsets struct {
	// groups maps a group to its topics to their partitions' offsets. A
	// group or topic with no offset left is removed.
	groups map[string]map[string]map[int32]Offset
}

// NewOffsets returns an empty Offsets.
func NewOffsets() *Offsets {
	return &Offsets{groups: make(map[string]map[string]map[int32]Offset)}
}

// Apply sets (v non-nil) or deletes (v nil) one offset, as an offset
// record or its tombstone does.
func (o *Offsets) Apply(k OffsetKey, v *Offset) {
	topics := o.groups[k.Group]
	if v == nil {
		partitions := topics[k.Topic]
		delete(partitions, k.Partition)
		if len(partitions) == 0 {
			delete(topics, k.Topic)
		}
		if len(topics) == 0 {
			delete(o.groups, k.Group)
		}
		return
	}
	if topics == nil {
		topics = make(map[string]map[int32]Offset)
		o.groups[k.Group] = topics
	}
	partitions := topics[k.Topic]
	if partitions == nil {
		partitions = make(map[int32]Offset)
		topics[k.Topic] = partitions
	}
	partitions[k.Partition] = *v
}

// Get returns group's committed offset of a topic's partition, and false if
// it has none.
func (o *Offsets) Get(group, topic string, partition int32) (Offset, bool) {
	v, ok := o.groups[group][topic][partition]
	return v, ok
}

// Group returns a copy of group's offsets, by topic then partition; an
// empty map if it has none.
func (o *Offsets) Group(group string) map[string]map[int32]Offset {
	topics := o.groups[group]
	out := make(map[string]map[int32]Offset, len(topics))
	for topic, partitions := range topics {
		out[topic] = maps.Clone(partitions)
	}
	return out
}

// Groups returns the groups with at least one offset, sorted.
func (o *Offsets) Groups() []string {
	return slices.Sorted(maps.Keys(o.groups))
}

// Keys returns group's offset keys sorted by topic then partition: the
// tombstones DeleteGroups writes.
func (o *Offsets) Keys(group string) []OffsetKey {
	var keys []OffsetKey
	for topic, partitions := range o.groups[group] {
		for partition := range partitions {
			keys = append(keys, OffsetKey{Group: group, Topic: topic, Partition: partition})
		}
	}
	slices.SortFunc(keys, compareOffsetKeys)
	return keys
}

// compareOffsetKeys orders keys by group, topic, then partition.
func compareOffsetKeys(a, b OffsetKey) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Activity is what offset expiry needs to know about a group.
type Activity struct {
	// Known reports that the coordinator has the group (with members or
	// Empty).
	Known bool
	// HasMembers reports that the group has members; its offsets do not
	// expire.
	HasMembers bool
	// ProtocolType is the group's protocol type ("" for an offsets-only
	// group).
	ProtocolType string
	// EmptySince is when a group with a protocol type became Empty (its
	// metadata's CurrentStateTimestamp); the zero Time if unknown (metadata
	// of value version 0 or 1), when each offset expires retention after
	// its commit instead.
	EmptySince time.Time
}

// Expired returns the offsets to expire at now under
// offsets.retention.minutes = retention, sorted by group, topic and
// partition, as Kafka 2.1+ (KIP-211) picks them
// (GroupMetadata.removeExpiredOffsets):
//
//   - a group with members expires nothing, not even offsets with an
//     explicit ExpireTimestamp;
//   - otherwise an offset with an explicit ExpireTimestamp expires once now
//     reaches it;
//   - a known group with a protocol type (Empty, as it has no members)
//     expires every other offset once retention has passed since
//     EmptySince (or since the offset's commit if EmptySince is unknown);
//   - a group without a protocol type, or unknown to the coordinator,
//     expires each other offset once retention has passed since its
//     CommitTimestamp.
//
// "Passed" is inclusive: an offset expires when exactly retention has gone
// by. activity is called once per group holding offsets. Expired changes
// nothing; the caller writes the tombstones and applies them.
func (o *Offsets) Expired(now time.Time, retention time.Duration, activity func(group string) Activity) []OffsetKey {
	nowMs, retentionMs := now.UnixMilli(), retention.Milliseconds()
	var expired []OffsetKey
	for group, topics := range o.groups {
		a := activity(group)
		if a.HasMembers {
			continue
		}
		sinceEmpty := a.Known && a.ProtocolType != "" && !a.EmptySince.IsZero()
		emptySinceMs := a.EmptySince.UnixMilli()
		for topic, partitions := range topics {
			for partition, v := range partitions {
				var expire bool
				switch {
				case v.ExpireTimestamp >= 0:
					expire = nowMs >= v.ExpireTimestamp
				case sinceEmpty:
					expire = nowMs-emptySinceMs >= retentionMs
				default:
					expire = nowMs-v.CommitTimestamp >= retentionMs
				}
				if expire {
					expired = append(expired, OffsetKey{Group: group, Topic: topic, Partition: partition})
				}
			}
		}
	}
	slices.SortFunc(expired, compareOffsetKeys)
	return expired
}
