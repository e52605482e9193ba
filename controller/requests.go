package controller

import (
	"context"

	"github.com/tripodmq/tripod/coord"
)

// The controller's requests to brokers, free of any wire encoding: the
// broker's Sender turns them into Kafka's LeaderAndIsr, UpdateMetadata and
// StopReplica (kmsg) and delivers them. Every request carries the
// controller epoch, so a broker refuses a deposed controller, and the
// recipient's broker epoch, so a restarted broker refuses what was meant
// for its previous incarnation.

// Request is one controller request to a broker: a *LeaderAndIsrRequest,
// an *UpdateMetadataRequest or a *StopReplicaRequest, and nothing else
// (the interface is sealed by an unexported method), so a receiver's type
// switch over those three is complete.
type Request interface {
	isRequest()
}

func (*LeaderAndIsrRequest) isRequest()   {}
func (*UpdateMetadataRequest) isRequest() {}
func (*StopReplicaRequest) isRequest()    {}

// PartitionInfo is a partition's state with what a broker needs beside
// it: the topic's ID and the partition's assigned replicas.
type PartitionInfo struct {
	coord.PartitionState
	TopicID  [16]byte
	Replicas []coord.BrokerID
	// IsNew marks a partition created by this request (Kafka's isNew).
	IsNew bool
}

// LeaderAndIsrRequest tells a broker, for each of its replicas listed,
// whether it leads or follows, at which leader epoch and with which ISR.
type LeaderAndIsrRequest struct {
	ControllerID    coord.BrokerID
	ControllerEpoch int64
	// BrokerEpoch is the recipient's broker epoch.
	BrokerEpoch int64
	Partitions  []PartitionInfo
	// Leaders are the live brokers that lead a listed partition.
	Leaders []coord.Broker
}

// UpdateMetadataRequest refreshes a broker's metadata cache: the live
// brokers and the changed partitions. Deleted names topics that no longer
// exist.
type UpdateMetadataRequest struct {
	ControllerID    coord.BrokerID
	ControllerEpoch int64
	BrokerEpoch     int64
	Live            []coord.Broker
	Partitions      []PartitionInfo
	Deleted         []string
}

// StopReplicaRequest tells a broker to stop replicating partitions, and
// with Delete to remove their logs (topic deletion).
type StopReplicaRequest struct {
	ControllerID    coord.BrokerID
	ControllerEpoch int64
	BrokerEpoch     int64
	Partitions      []coord.TopicPartition
	Delete          bool
}

// Sender delivers controller requests to brokers. Send queues the request
// and returns at once; requests to one broker are delivered in the order
// sent, each retried until that broker answers or is dropped. Implemented
// by the broker; closed by its owner when the Term ends.
type Sender interface {
	// Send queues req for broker to.
	Send(to coord.Broker, req Request)
	// Drop discards what is queued for broker id and stops retrying to it
	// (it left the cluster, or restarted).
	Drop(id coord.BrokerID)
}

// Results is how a Sender reports what brokers answered that the
// controller must act on; the Controller implements it. Each method hands
// its event to the controller's goroutine, in order with every other
// event, and returns once it is taken in; it returns ErrNotController if
// the controller has stopped and ctx.Err() if ctx ends first.
type Results interface {
	// ReplicasOffline reports that broker (at its broker epoch) answered
	// KAFKA_STORAGE_ERROR for these partitions: their replicas there are
	// offline (a failed log dir, or a log that cannot be opened) until
	// the broker restarts.
	ReplicasOffline(ctx context.Context, broker coord.Broker, partitions []coord.TopicPartition) error
	// Deposed reports that broker refused a request of controller epoch
	// epoch as STALE_CONTROLLER_EPOCH: a newer controller exists.
	Deposed(ctx context.Context, broker coord.BrokerID, epoch int64) error
}
