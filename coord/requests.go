package coord

// The controller's requests to brokers, free of any wire encoding: the
// broker's Sender turns them into Kafka's LeaderAndIsr, UpdateMetadata and
// StopReplica (kmsg) and delivers them. Every request carries the
// controller epoch, so a broker refuses a deposed controller, and the
// recipient's broker epoch, so a restarted broker refuses what was meant
// for its previous incarnation.

// PartitionInfo is a partition's state with what a broker needs beside
// it: the topic's ID and the partition's assigned replicas.
type PartitionInfo struct {
	PartitionState
	TopicID  [16]byte
	Replicas []BrokerID
	// IsNew marks a partition created by this request (Kafka's isNew).
	IsNew bool
}

// LeaderAndIsrRequest tells a broker, for each of its replicas listed,
// whether it leads or follows, at which leader epoch and with which ISR.
type LeaderAndIsrRequest struct {
	ControllerID    BrokerID
	ControllerEpoch int64
	// BrokerEpoch is the recipient's broker epoch.
	BrokerEpoch int64
	Partitions  []PartitionInfo
	// Leaders are the live brokers that lead a listed partition.
	Leaders []Broker
}

// UpdateMetadataRequest refreshes a broker's metadata cache: the live
// brokers and the changed partitions. Deleted names topics that no longer
// exist.
type UpdateMetadataRequest struct {
	ControllerID    BrokerID
	ControllerEpoch int64
	BrokerEpoch     int64
	Live            []Broker
	Partitions      []PartitionInfo
	Deleted         []string
}

// StopReplicaRequest tells a broker to stop replicating partitions, and
// with Delete to remove their logs (topic deletion).
type StopReplicaRequest struct {
	ControllerID    BrokerID
	ControllerEpoch int64
	BrokerEpoch     int64
	Partitions      []TopicPartition
	Delete          bool
}

// Sender delivers controller requests to brokers. Send queues the request
// and returns at once; requests to one broker are delivered in the order
// sent, each retried until that broker answers or is dropped. Implemented
// by the broker; closed by its owner when the Term ends.
type Sender interface {
	// Send queues req (a *LeaderAndIsrRequest, *UpdateMetadataRequest or
	// *StopReplicaRequest) for broker to.
	Send(to Broker, req any)
	// Drop discards what is queued for broker id and stops retrying to it
	// (it left the cluster).
	Drop(id BrokerID)
}
