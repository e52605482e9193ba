// Package kafkaerr owns the one table from tripod's errors to Kafka's
// error codes: the sentinels of coord, controller, replication and
// replication/log, and the context errors, each with the Kafka error it
// answers, and the mapping of each API (or path) as the part of the
// table it reads plus small overrides.
//
// kafkaerr decides codes only: it must not log, count, or look at
// anything but the error it is given. A caller that logs an unexpected
// error, or checks a log dir, does so beside its call.
package kafkaerr

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// source is the part of tripod a sentinel comes from; a Mapping reads
// the rows of the sources it names.
type source uint8

const (
	// fromReplication rows are replication's decisions on an append, a
	// fetch or a DeleteRecords.
	fromReplication source = 1 << iota
	// fromLog rows are the log's refusals of a batch, or its closing.
	fromLog
	// fromController rows are the controller's and the coordination
	// backend's answers to what it was asked.
	fromController
	// fromStore rows are the coordination store's failures to answer at
	// all: unavailable, out of time, or closed.
	fromStore
	// fromQuorum rows are the embedded quorum's refusals of a change of
	// its voters (coord.Quorum).
	fromQuorum
)

// row is one line of the table: a sentinel, the Kafka error it
// answers, and where it comes from.
type row struct {
	sentinel error
	kafka    *kerr.Error
	from     source
}

// table is the one table from tripod's errors to Kafka's. Rows are
// read in order and the first whose sentinel errors.Is matches wins,
// so an error that wraps two sentinels answers the earlier row.
var table = []row{
	{replication.ErrNotEnoughReplicas, kerr.NotEnoughReplicas, fromReplication},
	{replication.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend, fromReplication},
	{replication.ErrRequestTimedOut, kerr.RequestTimedOut, fromReplication},
	{replication.ErrNotLeader, kerr.NotLeaderForPartition, fromReplication},
	{replication.ErrOffsetOutOfRange, kerr.OffsetOutOfRange, fromReplication},
	{replication.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber, fromReplication},
	{replication.ErrProducerFenced, kerr.InvalidProducerEpoch, fromReplication},
	{replication.ErrInvalidTxnState, kerr.InvalidTxnState, fromReplication},
	{replication.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced, fromReplication},

	{tlog.ErrCorruptMessage, kerr.CorruptMessage, fromLog},
	{tlog.ErrInvalidRecord, kerr.InvalidRecord, fromLog},
	{tlog.ErrUnsupportedCompression, kerr.UnsupportedCompressionType, fromLog},
	{tlog.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat, fromLog},
	{tlog.ErrRecordTooLarge, kerr.MessageTooLarge, fromLog},
	{tlog.ErrClosed, kerr.UnknownTopicOrPartition, fromLog},

	{coord.ErrExists, kerr.TopicAlreadyExists, fromController},
	{controller.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor, fromController},
	{coord.ErrNotFound, kerr.UnknownTopicOrPartition, fromController},
	{controller.ErrElectionNotNeeded, kerr.ElectionNotNeeded, fromController},
	{controller.ErrInvalidPartitions, kerr.InvalidPartitions, fromController},
	// A topic too large for the backend (ZooKeeper's znode limit) has
	// too many partitions for it.
	{coord.ErrTooLarge, kerr.InvalidPartitions, fromController},
	// max.partitions and max.broker.partitions are policies of the
	// cluster; Kafka refuses its own per-request bound so too.
	{controller.ErrPartitionLimit, kerr.PolicyViolation, fromController},
	{controller.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment, fromController},
	{controller.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress, fromController},
	{controller.ErrNotController, kerr.NotController, fromController},
	{coord.ErrFenced, kerr.NotController, fromController},
	{controller.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch, fromController},
	{controller.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable, fromController},
	{controller.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable, fromController},

	{coord.ErrDuplicateVoter, kerr.DuplicateVoter, fromQuorum},
	{coord.ErrVoterNotFound, kerr.VoterNotFound, fromQuorum},
	// Kafka's leader answers REQUEST_TIMED_OUT when the new voter lags
	// behind its log, and while another voter change is uncommitted
	// (KIP-853's AddVoterHandler and RemoveVoterHandler): both are worth
	// retrying.
	{coord.ErrNotCaughtUp, kerr.RequestTimedOut, fromQuorum},
	{coord.ErrQuorumChangeInProgress, kerr.RequestTimedOut, fromQuorum},
	// A change that would leave no live majority of the new voters (or
	// no voter) is refused for good, as Kafka refuses an invalid one.
	{coord.ErrNoLiveMajority, kerr.InvalidRequest, fromQuorum},

	// A write the coordination backend refuses while the cluster moves to
	// another (tripod migrate) belongs on the target once the brokers
	// switch: worth retrying.
	{coord.ErrMigrated, kerr.RequestTimedOut, fromStore},
	{coord.ErrUnavailable, kerr.RequestTimedOut, fromStore},
	{context.DeadlineExceeded, kerr.RequestTimedOut, fromStore},
	{context.Canceled, kerr.RequestTimedOut, fromStore},
	{coord.ErrClosed, kerr.UnknownServerError, fromStore},
}

// Mapping is how one API (or path) answers errors: its overrides first,
// then the table's rows of its sources in table order, then otherwise.
// A nil error is no error. Mappings are values: With and Then return new
// ones and leave the receiver as it is.
type Mapping struct {
	overrides []row
	from      source
	otherwise *kerr.Error
	// then, if set, remaps what the steps above answered: an answer it
	// does not list becomes thenOtherwise, or stays if that is nil.
	then          map[*kerr.Error]*kerr.Error
	thenOtherwise *kerr.Error
}

// Error returns the Kafka error m answers for err, nil for a nil err.
func (m Mapping) Error(err error) *kerr.Error {
	if err == nil {
		return nil
	}
	e := m.lookup(err)
	if m.then == nil {
		return e
	}
	if to, ok := m.then[e]; ok {
		return to
	}
	if m.thenOtherwise != nil {
		return m.thenOtherwise
	}
	return e
}

// lookup is Error before the remap of Then.
func (m Mapping) lookup(err error) *kerr.Error {
	for _, o := range m.overrides {
		if errors.Is(err, o.sentinel) {
			return o.kafka
		}
	}
	for _, r := range table {
		if r.from&m.from != 0 && errors.Is(err, r.sentinel) {
			return r.kafka
		}
	}
	return m.otherwise
}

// Code returns the Kafka error code m answers for err, 0 for a nil err.
func (m Mapping) Code(err error) int16 {
	if e := m.Error(err); e != nil {
		return e.Code
	}
	return 0
}

// With returns m with sentinel answering kafka ahead of every row of the
// table, after m's own overrides: a per-API remap of a sentinel, or the
// sentinel of a caller's own (such as the broker's offline log dir).
func (m Mapping) With(sentinel error, kafka *kerr.Error) Mapping {
	m.overrides = append(m.overrides[:len(m.overrides):len(m.overrides)], row{sentinel: sentinel, kafka: kafka})
	return m
}

// Then returns m with its answers remapped by remap; an answer remap
// does not list becomes otherwise, or stays as it is if otherwise is
// nil. It is for an API that answers in its own terms what another
// path answered (a failed write to __consumer_offsets answered to an
// OffsetCommit).
func (m Mapping) Then(remap map[*kerr.Error]*kerr.Error, otherwise *kerr.Error) Mapping {
	m.then, m.thenOtherwise = remap, otherwise
	return m
}

// The mappings of the APIs. Each reads the rows of its sources; its
// overrides are the whole of where it differs from the table.
var (
	// Log answers the log's refusal of a produced batch: its rows, else
	// UNKNOWN_SERVER_ERROR.
	Log = Mapping{from: fromLog, otherwise: kerr.UnknownServerError}

	// Append answers an append, an acks wait or a DeleteRecords:
	// replication's rows, then the log's, else UNKNOWN_SERVER_ERROR.
	// The broker adds its offline log dir With KAFKA_STORAGE_ERROR.
	Append = Mapping{from: fromReplication | fromLog, otherwise: kerr.UnknownServerError}

	// Controller answers a request the controller or the coordination
	// backend refused or failed: their rows, then the store's, else
	// UNKNOWN_SERVER_ERROR.
	Controller = Mapping{from: fromController | fromStore, otherwise: kerr.UnknownServerError}

	// AlterPartition is Controller with the controller's refusals of an
	// ISR change answered as Kafka's AlterPartition does.
	AlterPartition = Controller.
			With(controller.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch).
			With(controller.ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion).
			With(controller.ErrIneligibleReplica, kerr.IneligibleReplica)

	// SecurityStore answers a failed read or write of credentials or
	// ACLs: a missing one RESOURCE_NOT_FOUND, then the store's rows,
	// else UNKNOWN_SERVER_ERROR.
	SecurityStore = Mapping{from: fromStore, otherwise: kerr.UnknownServerError}.
			With(coord.ErrNotFound, kerr.ResourceNotFound)

	// FollowerFetch answers a follower's fetch that replication refused:
	// OFFSET_OUT_OF_RANGE for a follower ahead of the log, else
	// NOT_LEADER_OR_FOLLOWER (this broker stopped leading, or the replica
	// is not assigned the partition).
	FollowerFetch = Mapping{otherwise: kerr.NotLeaderForPartition}.
			With(replication.ErrOffsetOutOfRange, kerr.OffsetOutOfRange)

	// Quorum answers DescribeQuorum, AddRaftVoter and RemoveRaftVoter:
	// the quorum's rows, then the store's, else UNKNOWN_SERVER_ERROR. No
	// reachable leader, or a closing broker, is NOT_LEADER_OR_FOLLOWER,
	// Kafka's answer from a node that does not lead the quorum, which
	// clients retry elsewhere.
	Quorum = Mapping{from: fromQuorum | fromStore, otherwise: kerr.UnknownServerError}.
		With(coord.ErrUnavailable, kerr.NotLeaderForPartition).
		With(coord.ErrClosed, kerr.NotLeaderForPartition)

	// ACLStore answers a failed write of ACLs: the store's rows, else
	// INVALID_REQUEST, as an error of no sentinel is input the store
	// refused.
	ACLStore = Mapping{from: fromStore, otherwise: kerr.InvalidRequest}
)

// OffsetStore returns the mapping of a commit or a deletion of offsets
// whose write to __consumer_offsets failed, from the mapping of that
// append, as Kafka's coordinator answers it: a lost leadership or
// storage NOT_COORDINATOR, too few replicas or a timeout
// COORDINATOR_NOT_AVAILABLE, a too large write INVALID_COMMIT_OFFSET_SIZE,
// anything else UNKNOWN_SERVER_ERROR.
func OffsetStore(appended Mapping) Mapping {
	return appended.Then(offsetStoreRemap, kerr.UnknownServerError)
}

// offsetStoreRemap is OffsetStore's remap of an append's answers.
var offsetStoreRemap = map[*kerr.Error]*kerr.Error{
	kerr.NotLeaderForPartition:        kerr.NotCoordinator,
	kerr.KafkaStorageError:            kerr.NotCoordinator,
	kerr.NotEnoughReplicas:            kerr.CoordinatorNotAvailable,
	kerr.NotEnoughReplicasAfterAppend: kerr.CoordinatorNotAvailable,
	kerr.RequestTimedOut:              kerr.CoordinatorNotAvailable,
	kerr.MessageTooLarge:              kerr.InvalidCommitOffsetSize,
	kerr.RecordListTooLarge:           kerr.InvalidCommitOffsetSize,
}
