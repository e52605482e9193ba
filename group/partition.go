package group

import "unicode/utf16"

// OffsetsTopic is Kafka's internal topic of committed offsets and group
// metadata.
const OffsetsTopic = "__consumer_offsets"

// JavaHashCode is Java's String.hashCode of s: h = 31*h + unit over the
// string's UTF-16 code units, with int32 overflow. A character outside the
// Basic Multilingual Plane counts as its two surrogate units, as in Java.
// Each byte of s that is not valid UTF-8 counts as U+FFFD, the replacement
// character (Java's decoder may group a malformed sequence differently, but
// Kafka clients send valid UTF-8).
func JavaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			high, low := utf16.EncodeRune(r)
			h = 31*h + high
			h = 31*h + low
			continue
		}
		h = 31*h + r
	}
	return h
}

// PartitionFor is Kafka's partitionFor: the __consumer_offsets partition of
// groupID among partitions (offsets.topic.num.partitions), which is
// Utils.abs(hashCode) % partitions where Utils.abs(n) = n & 0x7fffffff (so
// a hash of Integer.MIN_VALUE maps to 0). It panics if partitions is not
// positive.
func PartitionFor(groupID string, partitions int) int32 {
	if partitions <= 0 {
		panic("group: PartitionFor of a non-positive partition count")
	}
	return int32(int(JavaHashCode(groupID)&0x7fffffff) % partitions)
}
