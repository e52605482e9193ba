package broker

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// replicaManager owns the partitions this broker holds: their logs and the
// log dirs they live in, their roles (applied from the controller's
// LeaderAndIsr, StopReplica and UpdateMetadata, whose acceptance it
// decides), the fetchers that copy the partitions it follows, the ISR
// changes it reports for those it leads, the acks=all produces and
// DeleteRecords waiting on them, the high watermark checkpoints, the
// producer snapshots, retention and the log cleaner. A partition's leader,
// epoch and ISR are held once, by its replication.Partition.
//
// Its dependencies on the rest of the broker are the fields below the
// line "dependencies", set by New and not changed after:
//
//   - cfg, the broker's configuration, and dyn, the dynamic configs
//     (replicaConfigs): the live config (current), the topics' configs
//     the config watch delivers (watchedTopicConfigs) and the
//     registration of a new replica for dynamic config changes
//     (addReplica);
//   - logger and metrics (replicaMetrics: throttled, isrChanged);
//   - backend, to load the topic configs a LeaderAndIsr does not carry;
//   - cache, the metadata cache (replicaMetadata) an UpdateMetadata
//     updates and whose brokers the fetchers reach;
//   - member, the cluster membership (replicaMembership): the broker
//     epoch (currentEpoch, checkBrokerEpoch), the controllers
//     (controller, backendController, askController) and the clients of
//     peers (peerAddr, peerClient);
//   - roleChanged and resign, the group coordinator's callbacks for an
//     __consumer_offsets partition whose role changed or that went away;
//   - followerQuota, the follower replication throttle;
//   - closing, closed when the broker closes: the loops return on it.
//
// Lock order: stateMu before replicasMu before a partition's appendMu
// before its repMu; waitMu before a partition's repMu. stateMu is held
// for the whole application of a controller request (LeaderAndIsr,
// StopReplica, UpdateMetadata) and while offline replicas are closed, so
// that two never interleave.
type replicaManager struct {
	// replicasMu guards replicas: the partitions this broker holds.
	replicasMu sync.RWMutex
	replicas   map[coord.TopicPartition]*partition

	// stateMu serialises the controller's requests; it guards
	// controllerEpoch, the highest controller epoch accepted, and
	// controllerID, the controller of that epoch (NoBroker before the
	// first).
	stateMu         sync.Mutex
	controllerEpoch int64
	controllerID    coord.BrokerID
	// updateEpoch is the controller epoch of the latest UpdateMetadata
	// accepted: the first one of a newer epoch is a new controller's full
	// state.
	updateEpoch int64

	// fetchers copy the partitions this broker follows from their
	// leaders; isr sends the ISR changes of those it leads to the
	// controller; hwCkpt holds the high watermarks read at start.
	fetchers *fetcherManager
	isr      *isrSender
	hwCkpt   *replica.HWCheckpoints
	// files is the pool through which every log of the broker opens its
	// segment files (log.open.files.max).
	files *tlog.FilePool
	// logDirs are the log dirs: their locks, the ones gone offline and
	// the replicas offline until restart (logdirs.go); its Failed wakes
	// logDirLoop.
	logDirs *replica.LogDirs
	// waitMu guards waiting, the partitions with acks=all produces or
	// DeleteRecords waiting (queueWait), which tickLoop ticks every
	// interval; it is taken before a partition's repMu.
	waitMu  sync.Mutex
	waiting map[*partition]struct{}

	// openReplicaHook, if not nil, is called at the start of each
	// openReplica: tests block it to hold a LeaderAndIsr in its log
	// opens. It is nil in production; a test sets it with stateMu held.
	openReplicaHook func(coord.TopicPartition)

	// dependencies
	cfg           *Config
	dyn           replicaConfigs
	logger        hclog.Logger
	metrics       replicaMetrics
	backend       coord.Backend
	cache         replicaMetadata
	member        replicaMembership
	roleChanged   func(p *partition)
	resign        func(index int32)
	followerQuota *replica.Quota
	closing       <-chan struct{}
}

// replicaMembership is what the replica manager asks of the cluster
// membership (membership): the broker epoch its controller requests
// and AlterPartition carry, the controllers it accepts and asks, and
// the clients its fetchers reach the leaders with.
type replicaMembership interface {
	currentEpoch() int64
	checkBrokerEpoch(ctx context.Context, epoch int64) bool
	controller() *controller.Controller
	backendController() coord.ControllerInfo
	askController(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	peerAddr(cb coord.Broker) string
	peerClient(addr string, extra ...kgo.Opt) (*kgo.Client, error)
}

// replicaMetadata is what the replica manager reads and writes of the
// metadata cache (metadataCache): an UpdateMetadata's application, and
// the brokers and partitions the controller last sent.
type replicaMetadata interface {
	update(req *controller.UpdateMetadataRequest, full bool)
	isSynced() bool
	hasPartition(topic string, index int32) bool
	broker(id coord.BrokerID) (coord.Broker, bool)
}

// replicaConfigs is what the replica manager reads of the dynamic
// configs (dynamicConfigs): the live config a replica opens with, the
// topic configs the config watch delivered, and the registration of a
// new replica for the changes that follow.
type replicaConfigs interface {
	current() *dynamicState
	watchedTopicConfigs(names []string) map[string]map[string]string
	addReplica(p *partition, register func())
}

// replicaMetrics is what the replica manager counts (metrics).
type replicaMetrics interface {
	throttled(side string, bytes, leftOut int)
	isrChanged(shrinks, expands int)
}
