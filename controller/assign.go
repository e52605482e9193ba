package controller

import (
	"fmt"
	"maps"
	"slices"
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
	if err := checkAssignment(n, nPartitions, replicationFactor); err != nil {
		return nil, err
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

// AssignReplicasRackAware is AssignReplicas over brokers in racks (racks
// maps every broker to its non-empty rack), as Kafka's rack-aware
// assignment (KIP-36) does: the brokers are ordered by alternating racks
// (rack by rack in rack name order, each rack's brokers by id), the
// preferred leaders go round that list, so they are spread evenly over
// racks and brokers, and each follower is the next broker on the shifted
// walk of the list in a rack without a replica of the partition yet, or,
// once every rack has one, on a broker without one. A partition's
// replicas thus span min(replicationFactor, racks) racks.
//
// It fails as AssignReplicas does.
func AssignReplicasRackAware(racks map[coord.BrokerID]string, nPartitions, replicationFactor, firstPartition, start, shift int) ([][]coord.BrokerID, error) {
	n := len(racks)
	if err := checkAssignment(n, nPartitions, replicationFactor); err != nil {
		return nil, err
	}
	arranged := rackAlternated(racks)
	nRacks := len(distinctRacks(racks))
	start, shift = mod(start, n), mod(shift, n)

	assignment := make([][]coord.BrokerID, 0, nPartitions)
	for p := firstPartition; p < firstPartition+nPartitions; p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + start) % n
		leader := arranged[first]
		replicas := make([]coord.BrokerID, 0, replicationFactor)
		replicas = append(replicas, leader)
		racksUsed := map[string]bool{racks[leader]: true}
		brokersUsed := map[coord.BrokerID]bool{leader: true}
		// k walks the list from the leader; every broker but the
		// leader is on the walk within n-1 steps, and one of them
		// fits while replicas are fewer than brokers.
		for j, k := 0, 0; j < replicationFactor-1; k++ {
			b := arranged[followerIndex(first, shift*nRacks, k, n)]
			rack := racks[b]
			// Skip a broker whose rack has a replica while a rack has
			// none, or that has one while a broker has none.
			if (racksUsed[rack] && len(racksUsed) < nRacks) || (brokersUsed[b] && len(brokersUsed) < n) {
				continue
			}
			replicas = append(replicas, b)
			racksUsed[rack], brokersUsed[b] = true, true
			j++
		}
		assignment = append(assignment, replicas)
	}
	return assignment, nil
}

// rackAlternated orders the brokers of racks rack by rack, in rack name
// order, each rack's brokers in id order: with racks a: 1, 2, b: 3 and c:
// 4, 5, it is 1, 3, 4, 2, 5 (Kafka's getRackAlternatedBrokerList).
func rackAlternated(racks map[coord.BrokerID]string) []coord.BrokerID {
	byRack := map[string][]coord.BrokerID{}
	for id, rack := range racks {
		byRack[rack] = append(byRack[rack], id)
	}
	names := distinctRacks(racks)
	for _, r := range names {
		slices.Sort(byRack[r])
	}
	out := make([]coord.BrokerID, 0, len(racks))
	for i := 0; len(out) < len(racks); i++ {
		for _, r := range names {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// distinctRacks returns the racks of racks' brokers, sorted, each once.
func distinctRacks(racks map[coord.BrokerID]string) []string {
	names := slices.Sorted(maps.Values(racks))
	return slices.Compact(names)
}

// checkAssignment refuses an assignment of nPartitions with
// replicationFactor over n brokers that cannot be made.
func checkAssignment(n, nPartitions, replicationFactor int) error {
	if nPartitions < 1 {
		return fmt.Errorf("number of partitions %d: must be at least 1", nPartitions)
	}
	if replicationFactor < 1 {
		return fmt.Errorf("replication factor %d: must be at least 1", replicationFactor)
	}
	if replicationFactor > n {
		return fmt.Errorf("replication factor %d: larger than the %d available brokers", replicationFactor, n)
	}
	return nil
}
