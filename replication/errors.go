package replication

import "errors"

// Errors the state machine decides. Each maps to one Kafka error code,
// which the broker puts on the wire.
var (
	// ErrNotEnoughReplicas refuses an acks=all produce before it is
	// appended, because the ISR is smaller than min.insync.replicas
	// (NOT_ENOUGH_REPLICAS).
	ErrNotEnoughReplicas = errors.New("replication: fewer in-sync replicas than min.insync.replicas")
	// ErrNotEnoughReplicasAfterAppend fails an acks=all produce that was
	// appended but whose batch the high watermark passed while the ISR was
	// smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	ErrNotEnoughReplicasAfterAppend = errors.New("replication: the ISR shrank below min.insync.replicas after the append")
	// ErrRequestTimedOut fails an acks=all produce whose deadline came
	// before the high watermark passed its batch (REQUEST_TIMED_OUT).
	ErrRequestTimedOut = errors.New("replication: the high watermark did not pass the batch before the request timeout")
	// ErrNotLeader is returned to a leader-only call on a replica that is
	// not the partition's leader, and fails the acks=all produces pending
	// when it stops leading (NOT_LEADER_OR_FOLLOWER).
	ErrNotLeader = errors.New("replication: this replica is not the partition's leader")
	// ErrUnknownReplica rejects a fetch from a broker that is not in the
	// partition's replica set (Kafka answers NOT_LEADER_OR_FOLLOWER; the
	// broker may log it as UNKNOWN_REPLICA).
	ErrUnknownReplica = errors.New("replication: the fetching broker is not a replica of the partition")
	// ErrOffsetOutOfRange rejects a follower fetch above the leader's log
	// end offset, and a DeleteRecords offset above the high watermark
	// (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("replication: offset out of range")
	// ErrStaleEpoch rejects a LeaderAndIsr older than the state the
	// replica holds (Kafka ignores it with STALE_CONTROLLER_EPOCH or
	// FENCED_LEADER_EPOCH).
	ErrStaleEpoch = errors.New("replication: leader or partition epoch older than the current one")
	// ErrNotTruncating is returned by EpochEndOffset when the replica is
	// not waiting for an OffsetForLeaderEpoch answer.
	ErrNotTruncating = errors.New("replication: no OffsetForLeaderEpoch answer expected")
)
