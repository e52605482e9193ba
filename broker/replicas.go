package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// replicaManager is what the broker asks of its replica manager, the one
// owner of the partitions on this broker; replica.Manager is its
// implementation. The handlers read and write partitions through it, the
// controller's requests (04, 05, 06 and the controller's own deliveries,
// sender.go) are applied by it, and New and Close start and stop it.
type replicaManager interface {
	// Partitions: lookups for the handlers. LeaderFor answers
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or
	// KAFKA_STORAGE_ERROR for a partition this broker does not lead;
	// ReplicaFor the same for one it holds no replica of.
	Partitions() []*replica.Partition
	PartitionFor(topic string, index int32) *replica.Partition
	LeaderFor(topic string, index int32) (*replica.Partition, int16)
	ReplicaFor(topic string, index int32) (*replica.Partition, int16)
	TopicConfigs(ctx context.Context, names []string) map[string]map[string]string
	LogDirs() *replica.LogDirs

	// Writes and the follower side of Fetch, on partitions this broker
	// leads; CheckStorage takes a failed log's dir offline.
	AppendAsLeader(p *replica.Partition, records []byte, acksAll bool, deadline time.Time) (tlog.AppendResult, <-chan error, error)
	DeleteRecordsAsLeader(p *replica.Partition, offset int64, deadline time.Time) (int16, <-chan replication.DeleteResult)
	CheckStorage(p *replica.Partition, err error) bool
	RecordFollowerFetch(r *kmsg.FetchRequest) map[coord.TopicPartition]replica.FetchRefusal
	RecordIdlePositions(idle []replica.IdlePosition, replica int32)
	LeaderThrottles(p *replica.Partition, follower int32) bool
	// PreferredReadReplica is the follower of a partition this broker
	// leads that a consumer of a rack reads from (KIP-392),
	// coord.NoBroker for this broker.
	PreferredReadReplica(p *replica.Partition, clientRack string, fetchOffset int64) coord.BrokerID

	// The controller's requests, and the controller they were accepted
	// from.
	ApplyLeaderAndIsr(ctx context.Context, r *controller.LeaderAndIsrRequest) (int16, []int16)
	ApplyStopReplica(ctx context.Context, r *controller.StopReplicaRequest) int16
	ApplyUpdateMetadata(ctx context.Context, r *controller.UpdateMetadataRequest) int16
	ApplyControllerRequest(ctx context.Context, req controller.Request) replica.ControllerAnswer
	AcceptedController() (coord.BrokerID, int64)
	TryControllerEpoch() (int64, bool)

	Start()
	Close() error
}

var _ replicaManager = (*replica.Manager)(nil)
