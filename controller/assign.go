package controller

import (
	"fmt"
	"sort"

	"github.com/tripodmq/tripod/coord"
)

// AssignReplicas spreads nPartitions partitions of replicationFactor
// replicas over brokers as Kafka does without racks: partition p's first
// replica (its preferred leader) is brokers[(p+start) % n], and the
// followers are shifted by a second offset that grows every n partitions,
// so leaders and followers are both spread evenly. start and shift are
// Kafka's random start index and replica shift; passing them makes the
// assignment reproducible (tests, and a retried CreateTopics).
// firstPartition numbers the first new partition (CreatePartitions adds
// partitions after the existing ones).
//
// It fails when replicationFactor is below 1 or above the number of
// brokers, or nPartitions is below 1.
func AssignReplicas(brokers []coord.BrokerID, nPartitions, replicationFactor, firstPartition, start, shift int) ([][]coord.BrokerID, error) {
	n := len(brokers)
	if nPartitions < 1 {
		return nil, fmt.Errorf("number of partitions %d: must be at least 1", nPartitions)
	}
	if replicationFactor < 1 {
		return nil, fmt.Errorf("replication factor %d: must be at least 1", replicationFactor)
	}
	if replicationFactor > n {
		return nil, fmt.Errorf("replication factor %d: larger than the %d available brokers", replicationFactor, n)
	}
	sorted := append([]coord.BrokerID(nil), brokers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	start, shift = mod(start, n), mod(shift, n)

	assignment := make([][]coord.BrokerID, 0, nPartitions)
	for p := firstPartition; p < firstPartition+nPartitions; p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + start) % n
		replicas := make([]coord.BrokerID, 0, replicationFactor)
		replicas = append(replicas, sorted[first])
		for j := 0; j < replicationFactor-1; j++ {
			replicas = append(replicas, sorted[followerIndex(first, shift, j, n)])
		}
		assignment = append(assignment, replicas)
	}
	return assignment, nil
}

// followerIndex is Kafka's replicaIndex: the j-th follower sits a shift of
// 1 + (shift+j) mod (n-1) after the first replica, never on it.
func followerIndex(first, shift, j, n int) int {
	step := 1 + (shift+j)%(n-1)
	return (first + step) % n
}

func mod(a, n int) int {
	if n == 0 {
		return 0
	}
	return ((a % n) + n) % n
}
