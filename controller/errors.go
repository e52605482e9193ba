package controller

import "errors"

// Errors the controller returns to the brokers that ask it for something.
// The broker maps them to Kafka error codes. Errors of the coordination
// contract (coord.ErrExists, coord.ErrNotFound, coord.ErrFenced,
// coord.ErrUnavailable) are returned wrapped, as they are.
var (
	// ErrNotController: the controller has stopped (its term ended).
	ErrNotController = errors.New("controller: not the controller")
	// ErrInvalidReplicationFactor: more replicas than eligible live
	// brokers (live and not in controlled shutdown), or fewer than 1.
	ErrInvalidReplicationFactor = errors.New("controller: invalid replication factor")
	// ErrInvalidPartitions: a partition count below 1 or not above the
	// current count.
	ErrInvalidPartitions = errors.New("controller: invalid partition count")
	// ErrInvalidReplicaAssignment: a manual assignment naming unknown or
	// repeated brokers.
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
	// ErrPartitionLimit: the partitions a CreateTopics or
	// CreatePartitions asks for would take the cluster past
	// max.partitions or a broker past max.broker.partitions.
	ErrPartitionLimit = errors.New("controller: partition limit reached")
	// ErrStaleBrokerEpoch: the request came from an earlier incarnation of
	// the broker.
	ErrStaleBrokerEpoch = errors.New("controller: stale broker epoch")
	// ErrFencedLeaderEpoch: an AlterPartition from a deposed leader.
	ErrFencedLeaderEpoch = errors.New("controller: fenced leader epoch")
	// ErrInvalidUpdateVersion: an AlterPartition based on an old partition
	// epoch.
	ErrInvalidUpdateVersion = errors.New("controller: invalid partition update version")
	// ErrIneligibleReplica: an ISR naming a replica that is not assigned or
	// not live.
	ErrIneligibleReplica = errors.New("controller: ineligible replica")
	// ErrPreferredLeaderNotAvailable: the preferred replica is down or out
	// of sync.
	ErrPreferredLeaderNotAvailable = errors.New("controller: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica may lead.
	ErrEligibleLeadersNotAvailable = errors.New("controller: eligible leaders not available")
	// ErrNoReassignmentInProgress: a cancel of a partition that is not
	// being reassigned.
	ErrNoReassignmentInProgress = errors.New("controller: no reassignment in progress")
	// ErrElectionNotNeeded: the partition already has the leader asked for.
	ErrElectionNotNeeded = errors.New("controller: election not needed")
)
