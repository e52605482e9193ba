package config

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// Config is a broker's configuration under Kafka's property names. Every
// field names its property, unit and default; DefaultConfig gives the
// defaults in one place and Validate checks ranges.
type Config struct {
	// BrokerID identifies this broker in metadata (broker.id). Default 1;
	// 0 .. 2147483647.
	BrokerID int32
	// Rack is the rack (or availability zone) this broker is in
	// (broker.rack), registered with the broker and returned in Metadata
	// and DescribeCluster. Any printable string, as in Kafka, without
	// control characters; default empty: no rack.
	Rack string
	// ReplicaSelectorClass chooses the replica a consumer that names its
	// rack (Fetch v11+, client.rack) is told to read from
	// (replica.selector.class, KIP-392): empty, the default, reads every
	// partition from its leader; RackAwareReplicaSelector (Kafka's class
	// name) points such a consumer at an in-sync replica in its rack when
	// the leader is not in it.
	ReplicaSelectorClass string
	// Listeners are the addresses the broker listens on (listeners),
	// comma-separated NAME://HOST:PORT entries with unique names, such
	// as "CLIENT://0.0.0.0:9093,BROKER://10.0.0.7:9094"; an entry
	// without a name (HOST:PORT) is PLAINTEXT's. An empty host binds
	// every interface; port 0 picks a free port. Default
	// "PLAINTEXT://127.0.0.1:9092".
	Listeners string
	// AdvertisedListeners are the addresses registered for the
	// listeners, which Metadata tells clients and brokers use to reach
	// each other (advertised.listeners), NAME://HOST:PORT for listeners
	// of Listeners; with one listener a HOST:PORT is that listener's. An
	// empty host is the bound address, port 0 the bound port. A listener
	// it leaves out is not registered (as in Kafka), except that the
	// inter-broker listener must be in it. Default empty: every listener
	// at its bound address.
	AdvertisedListeners string
	// ListenerSecurityProtocolMap maps each listener name to its
	// security protocol (listener.security.protocol.map,
	// "NAME:PROTOCOL,..."): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (a SASL listener needs its mechanisms, SASLConfig). Default Kafka's
	// "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL".
	ListenerSecurityProtocolMap map[string]string
	// InterBrokerListenerName is the listener the brokers reach each
	// other on: the controller's requests, followers' fetches and
	// requests forwarded to the controller go to each broker's endpoint
	// of that name, over TLS with that listener's ssl.* settings when it
	// is SSL (inter.broker.listener.name). Every broker of a cluster must
	// have it. Default empty: the listener named PLAINTEXT, or else the
	// first listener.
	InterBrokerListenerName string
	// SecurityInterBrokerProtocol names the inter-broker listener the
	// older way, by security protocol: the listener of that name
	// (security.inter.broker.protocol: PLAINTEXT or SSL). Not with
	// InterBrokerListenerName. Default empty.
	SecurityInterBrokerProtocol string
	// SSL is the TLS configuration of the SSL listeners (the ssl.*
	// properties; see security.SSLConfig). Default
	// security.DefaultSSLConfig's.
	SSL security.SSLConfig
	// ListenerOverrides are per-listener ssl.* and SASL properties,
	// listener.name.<lower-cased listener name>.<key>=value, which win
	// over SSL and SASL for that listener: by lower-cased listener name,
	// then by key (an ssl.* key, or one of security.SASLListenerKeys). Default
	// none.
	ListenerOverrides map[string]map[string]string
	// LogDirs are the directories holding the partition logs and the topic
	// catalogue (log.dirs, comma separated). Default "./data".
	LogDirs []string
	// NumPartitions is the partition count of an auto-created topic and of
	// a CreateTopics request asking for the default (num.partitions).
	// Default 1; 1 .. 1000000.
	NumPartitions int32
	// MaxRequestPartitions bounds the partitions one CreateTopics or
	// CreatePartitions request may create, over all its topics
	// (max.request.partitions, tripod's own: Kafka's KRaft controller has
	// a fixed bound of 10 000 and no property; the name follows KIP-578's
	// max.partitions and max.broker.partitions). A request past it is
	// refused whole before it reaches the controller, every topic
	// answered POLICY_VIOLATION, as Kafka does. Default 100000, the
	// largest creation measured on tripod's 2-core development machine
	// (the failover benchmark creates its 100 000 partitions in one
	// CreateTopics: one topic on Raft and etcd, ten of 10 000 on
	// ZooKeeper, whose znode holds one topic of at most about 55 000
	// partitions of 3 replicas, a bound the backend enforces on its own
	// as INVALID_PARTITIONS); 1 .. 2147483647.
	MaxRequestPartitions int32
	// MaxPartitions bounds the cluster's partitions and
	// MaxBrokerPartitions the replicas of one broker (max.partitions,
	// max.broker.partitions, KIP-578); see controller.Config, which
	// declares their defaults (100000 each). Enforced by the controller,
	// so the controller's broker's values are the ones in force.
	MaxPartitions       int32
	MaxBrokerPartitions int32
	// AutoCreateTopics creates a topic that a Metadata request names and
	// that does not exist (auto.create.topics.enable). Default true.
	AutoCreateTopics bool
	// SocketRequestMaxBytes is the largest request frame accepted; a larger
	// one closes the connection (socket.request.max.bytes, bytes). Default
	// 104857600; 1 .. 2147483647.
	SocketRequestMaxBytes int32
	// QueuedMaxRequestBytes bounds the bytes of requests being read or
	// waiting to be handled, across all connections
	// (queued.max.request.bytes, bytes): a reader reserves a frame's
	// size before reading its body and gives it back once the request's
	// handler has run; when the pool is full the broker stops reading
	// sockets until memory frees. A frame larger than the pool waits for
	// the whole pool. Kafka's default is -1 (no bound); tripod's is
	// 268435456 (256 MiB): more than socket.request.max.bytes, so the
	// largest request fits with room for others, and small enough that
	// queued requests cannot take a broker's memory. 1 ..
	// 9223372036854775807.
	QueuedMaxRequestBytes int64
	// FetchMaxBytes bounds the record bytes of one Fetch response, as
	// well as the request's own MaxBytes (fetch.max.bytes, bytes); the
	// first batch is returned even when larger, so a consumer is never
	// stuck. Default 57671680; 1024 .. 2147483647.
	FetchMaxBytes int32
	// MaxConnections bounds the connections open at once on the Kafka
	// listener; at the limit the broker stops accepting until one closes
	// (max.connections). Default 2147483647; 1 .. 2147483647.
	MaxConnections int32
	// MaxConnectionsPerIP bounds the connections open at once from one
	// client address; one more is closed at once (max.connections.per.ip).
	// Default 2147483647; 1 .. 2147483647.
	MaxConnectionsPerIP int32
	// MaxConnectionCreationRate is max.connection.creation.rate: the
	// connections per second the broker accepts over all listeners but
	// the inter-broker one when there are others (KIP-612); over it, the
	// accept waits. Default 2147483647, no limit; at least 0.
	MaxConnectionCreationRate int32
	// MaxConnectionsPerIPOverrides are per-address limits that replace
	// MaxConnectionsPerIP, "host:N,host:N" (max.connections.per.ip.overrides,
	// hosts as IP addresses). Default none; each N 0 .. 2147483647.
	MaxConnectionsPerIPOverrides map[string]int32
	// LogSegmentBytes rolls a segment when it would exceed this size
	// (log.segment.bytes, bytes). Default 1073741824; 14 .. 2147483647.
	LogSegmentBytes int64
	// LogRoll rolls a segment once its first batch is this old (log.roll.ms).
	// Default 7 days; at least 1 ms.
	LogRoll time.Duration
	// LogRetentionBytes deletes the oldest segments while a partition is
	// larger (log.retention.bytes, bytes). Default -1: no size limit.
	LogRetentionBytes int64
	// LogRetention deletes segments whose newest record is older
	// (log.retention.ms). Default 7 days; -1 keeps forever.
	LogRetention time.Duration
	// LogFlushIntervalMessages fsyncs a partition after this many records
	// (log.flush.interval.messages). Default 9223372036854775807: never,
	// durability comes from replication as in Kafka; at least 1.
	LogFlushIntervalMessages int64
	// LogFlushInterval fsyncs a partition whose oldest unflushed record is
	// this old (log.flush.interval.ms). Default 0: never on time.
	LogFlushInterval time.Duration
	// LogWritebackBytes is how many bytes appended to a segment a
	// partition lets the page cache hold before the broker asks the
	// kernel to start writing them to disk, without waiting (tripod's
	// log.writeback.bytes; tlog.Config.WritebackBytes). Default 1 MiB; 0:
	// off; else 4096 .. 1073741824.
	LogWritebackBytes int64
	// LogRetentionCheckInterval is how often the broker enforces retention
	// and age-based rolls (log.retention.check.interval.ms). Default 5
	// minutes; at least 1 ms.
	LogRetentionCheckInterval time.Duration
	// LogOpenFilesMax bounds the segment files the broker's logs hold
	// open at once, beside those in use (tripod's log.open.files.max): a
	// segment's file is opened on use and the least recently used idle
	// one closed beyond this, so an idle partition holds none. Default
	// 10000; 1 .. 2147483647. Keep it below the process's file limit,
	// less the connections.
	LogOpenFilesMax int32
	// LogCleanerEnable runs the log cleaner, which compacts the
	// partitions of topics with cleanup.policy compact
	// (log.cleaner.enable). Default true.
	LogCleanerEnable bool
	// LogCleanerDedupeBufferSize bounds the memory of a compaction pass's
	// offset map (log.cleaner.dedupe.buffer.size, bytes). Default
	// 134217728; at least 24.
	LogCleanerDedupeBufferSize int64
	// LogCleanerBackoff is how long the cleaner waits between passes over
	// the compacted partitions (log.cleaner.backoff.ms). Default 15 s; at
	// least 1 ms.
	LogCleanerBackoff time.Duration
	// ConnectionsMaxIdle closes a connection on which no complete request
	// has arrived for this long (connections.max.idle.ms), bounding what a
	// silent or trickling peer holds. Default 10 minutes; at least 1 ms.
	ConnectionsMaxIdle time.Duration
	// MessageMaxBytes is the largest record batch set a produce may carry
	// per partition (message.max.bytes, bytes). Default 1048588;
	// 0 .. 2147483647.
	MessageMaxBytes int32

	// Coord opens the coordination backend: coordination.backend,
	// zookeeper.connect, etcd.endpoints, etcd.prefix, raft.listen,
	// raft.voters and the session timeout (zookeeper.session.timeout.ms or
	// etcd.lease.ttl.ms, both set Coord.SessionTimeout). Coord.BrokerID is
	// broker.id; an empty Coord.RaftDir is <first log dir>/raft and an
	// empty Coord.RaftListen is, for a broker alone (no raft.voters), the
	// inter-broker listener's host with its port + 100 (port 0 stays 0); a
	// voter's is its raft.voters address, and a broker not among
	// raft.voters (an observer) must set raft.listen, the address it
	// gives the leader. Default: a one-broker cluster on embedded Raft. Its security settings are zookeeper.set.acl,
	// zookeeper.digest.*, etcd.username and etcd.password; its TLS
	// configurations are built by broker.New from CoordSSL.
	Coord coord.Config
	// CoordSSL names the PEM files of the coordination backend's TLS,
	// which broker.New reads into Coord (coord reads no files).
	CoordSSL CoordSSLConfig
	// UncleanLeaderElection lets a replica outside the ISR lead when no ISR
	// member is live (unclean.leader.election.enable). Default false.
	UncleanLeaderElection bool
	// AutoLeaderRebalance gives leadership back to preferred replicas
	// (auto.leader.rebalance.enable). Default true.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is how often the controller checks for
	// the rebalance (leader.imbalance.check.interval.seconds). Default 300
	// s; at least 1 s.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is the share of its preferred
	// partitions a broker may fail to lead before the rebalance
	// (leader.imbalance.per.broker.percentage). Default 10; 0 .. 100.
	LeaderImbalancePerBrokerPercentage int32
	// DefaultReplicationFactor is the replication factor of auto-created
	// topics (capped at the live brokers) and of CreateTopics asking for
	// the default (default.replication.factor). Default 1; 1 .. 32767.
	DefaultReplicationFactor int32
	// ControlledShutdown makes Close ask the controller to move this
	// broker's leaderships away first (controlled.shutdown.enable).
	// Default true.
	ControlledShutdown bool

	// BrokerProbeInterval is how often the controller's broker connects to
	// every live broker's listener, and every broker to the controller's,
	// to tell a crashed process (its host refuses the connection) from a
	// slow one long before its session expires
	// (broker.crash.probe.interval.ms, tripod's own). Default 200 ms; 0
	// turns the probes off (failures are then detected by session expiry
	// alone); at most 60 s.
	BrokerProbeInterval time.Duration
	// ControllerSocketTimeout is how long the controller waits for a
	// broker to answer one of its requests before it sends it again
	// (controller.socket.timeout.ms). A LeaderAndIsr that creates many
	// logs may take longer than a short bound: it was sent again every
	// 10 s while the first was still applied, each copy queued behind
	// it. Default 30 s; 100 ms..15 min.
	ControllerSocketTimeout time.Duration
	// ReplicaLagTimeMax is how long a follower may go without catching up
	// to the leader's log end before the leader removes it from the ISR
	// (replica.lag.time.max.ms). Default 30 s; at least 1 ms.
	ReplicaLagTimeMax time.Duration
	// MinInsyncReplicas is the smallest ISR with which an acks=all produce
	// is accepted (min.insync.replicas; a topic may override it). Default
	// 1; 1 .. 2147483647.
	MinInsyncReplicas int32
	// ReplicationTruncation is how a replica that becomes a follower cuts
	// its log (replication.truncation): "fetch" fetches at once, naming
	// its last batch's epoch, and cuts where the leader answers that the
	// logs part (Kafka's follower since 2.7); "epoch" first asks the
	// leader where its latest leader epoch ended (OffsetForLeaderEpoch,
	// KIP-101/KIP-279); "hw" cuts to its own high watermark (the rule of
	// tripod's source documents, which loses acknowledged records in
	// KIP-101's scenarios). Default "fetch".
	ReplicationTruncation string
	// ReplicaFetchWaitMax is how long a follower's fetch waits at the
	// leader for new records (replica.fetch.wait.max.ms). Default 500 ms;
	// at least 1 ms and below replica.lag.time.max.ms.
	ReplicaFetchWaitMax time.Duration
	// ReplicaFetchMinBytes is how many record bytes a follower's fetch
	// waits for (replica.fetch.min.bytes). Default 1; at least 1.
	ReplicaFetchMinBytes int32
	// ReplicaFetchMaxBytes is how many record bytes a follower fetches per
	// partition (replica.fetch.max.bytes; the first batch is returned
	// whole even if larger). Default 1048576; at least 1.
	ReplicaFetchMaxBytes int32
	// NumReplicaFetchers is how many fetchers this broker runs per
	// leader it follows (num.replica.fetchers): each fetches its share of
	// the partitions, hashed as Kafka hashes them, over a connection and
	// fetch session of its own, so one fetcher's answer is appended while
	// another's request is at the leader. Default 1; 1..64.
	NumReplicaFetchers int32
	// ReplicaFetchBackoff is how long a follower waits after a failed
	// fetch before trying again (replica.fetch.backoff.ms). Default 200
	// ms (Kafka: 1000), so followers find a new leader quickly; at least
	// 1 ms.
	ReplicaFetchBackoff time.Duration
	// ReplicationQuotaWindowNum is how many samples the replication
	// throttles measure their rate over (replication.quota.window.num).
	// Default 11; at least 1.
	ReplicationQuotaWindowNum int32
	// ReplicationQuotaWindowSize is the length of each sample
	// (replication.quota.window.size.seconds). Default 1 s; at least 1 s.
	ReplicationQuotaWindowSize time.Duration
	// QuotaWindowNum is how many samples the client quotas measure a
	// rate over (quota.window.num, broker/quota). Default 11; at least 1.
	QuotaWindowNum int32
	// QuotaWindowSize is the length of each client quota sample
	// (quota.window.size.seconds). Default 1 s; whole seconds, at least
	// 1 s.
	QuotaWindowSize time.Duration
	// ControllerQuotaWindowNum and ControllerQuotaWindowSize are
	// controller.quota.window.num and
	// controller.quota.window.size.seconds: a controller_mutation_rate
	// quota lets a client create or delete up to the quota × num × size
	// partitions at once (KIP-599's burst). Defaults 11 and 1 s; at least
	// 1, whole seconds.
	ControllerQuotaWindowNum  int32
	ControllerQuotaWindowSize time.Duration
	// ReplicaHighWatermarkCheckpointInterval is how often the broker
	// writes every partition's high watermark to
	// replication-offset-checkpoint in each log dir
	// (replica.high.watermark.checkpoint.interval.ms). Default 5 s; at
	// least 1 ms.
	ReplicaHighWatermarkCheckpointInterval time.Duration

	// ProducerIDExpiration is how long a partition remembers an
	// idempotent producer after the max timestamp of its last batch
	// (producer.id.expiration.ms): an expired producer's next batch is
	// accepted at any sequence, as that of a producer the partition never
	// saw (KIP-360). Default 1 day; at least 1 ms.
	ProducerIDExpiration time.Duration
	// ProducerIDExpirationCheckInterval is how often the broker expires
	// producers in every partition, and writes the producer snapshot of
	// each partition whose log rolled a segment since its latest one
	// (producer.id.expiration.check.interval.ms). Default 10 minutes; at
	// least 1 ms.
	ProducerIDExpirationCheckInterval time.Duration

	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeout a group member may ask for (group.min.session.timeout.ms,
	// default 6 s; group.max.session.timeout.ms, default 30 minutes); at
	// least 1 ms, min <= max.
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	// GroupInitialRebalanceDelay is how long an empty group's first
	// rebalance waits for more members to join
	// (group.initial.rebalance.delay.ms). Default 3 s; at least 0.
	GroupInitialRebalanceDelay time.Duration
	// GroupMaxSize bounds a group's members (group.max.size). Default
	// 2147483647; at least 1.
	GroupMaxSize int32
	// GroupConsumerSessionTimeout is how long a member of a consumer
	// group of the consumer protocol (KIP-848) may go without a
	// heartbeat before it is removed (group.consumer.session.timeout.ms,
	// default 45 s), within GroupConsumerMinSessionTimeout and
	// GroupConsumerMaxSessionTimeout (group.consumer.min.session.timeout.ms,
	// default 45 s, at least 1 ms; group.consumer.max.session.timeout.ms,
	// default 60 s).
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerMinSessionTimeout time.Duration
	GroupConsumerMaxSessionTimeout time.Duration
	// GroupConsumerHeartbeatInterval is how often such members are told
	// to heartbeat (group.consumer.heartbeat.interval.ms, default 5 s),
	// below the session timeout and within
	// GroupConsumerMinHeartbeatInterval and
	// GroupConsumerMaxHeartbeatInterval
	// (group.consumer.min.heartbeat.interval.ms, default 5 s, at least
	// 1 ms; group.consumer.max.heartbeat.interval.ms, default 15 s).
	GroupConsumerHeartbeatInterval    time.Duration
	GroupConsumerMinHeartbeatInterval time.Duration
	GroupConsumerMaxHeartbeatInterval time.Duration
	// GroupConsumerAssignors are the server-side assignors of consumer
	// groups, the first the default (group.consumer.assignors, default
	// uniform,range; each uniform or range).
	GroupConsumerAssignors []string
	// GroupConsumerMaxSize bounds a consumer group's members
	// (group.consumer.max.size). Default 2147483647; at least 1.
	GroupConsumerMaxSize int32
	// GroupConsumerMigrationPolicy says which of KIP-848's online
	// conversions the coordinator makes: a classic group whose members
	// use the consumer protocol type becomes a consumer group when a
	// consumer-protocol member joins (upgrade), a consumer group left
	// with classic members only becomes classic again (downgrade)
	// (group.consumer.migration.policy: disabled, upgrade, downgrade or
	// bidirectional, any case; default bidirectional).
	GroupConsumerMigrationPolicy string
	// OffsetsTopicNumPartitions is the partition count of
	// __consumer_offsets when the broker creates it
	// (offsets.topic.num.partitions). Default 50; 1 .. 1000000.
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is the replication factor of
	// __consumer_offsets (offsets.topic.replication.factor): with fewer
	// live brokers the topic is not created and FindCoordinator answers
	// COORDINATOR_NOT_AVAILABLE, except on a broker that is its cluster's
	// only Raft voter, where it is 1. Default 3; 1 .. 32767.
	OffsetsTopicReplicationFactor int32
	// OffsetsTopicSegmentBytes is __consumer_offsets' segment.bytes
	// (offsets.topic.segment.bytes). Default 104857600; at least 14.
	OffsetsTopicSegmentBytes int32
	// OffsetsRetention is how long committed offsets are kept: after a
	// group with members left it became empty, or after the commit for a
	// group not managed by the coordinator (offsets.retention.minutes).
	// Default 7 days; at least 1 minute.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is how often expired offsets are
	// removed (offsets.retention.check.interval.ms). Default 10 minutes;
	// at least 1 ms.
	OffsetsRetentionCheckInterval time.Duration
	// OffsetsCommitTimeout is how long an offset commit (and a group's
	// metadata write) waits for every in-sync replica of its
	// __consumer_offsets partition (offsets.commit.timeout.ms). Default 5
	// s; at least 1 ms.
	OffsetsCommitTimeout time.Duration
	// OffsetMetadataMaxBytes bounds a committed offset's metadata string
	// (offset.metadata.max.bytes); longer is OFFSET_METADATA_TOO_LARGE.
	// Default 4096; at least 0.
	OffsetMetadataMaxBytes int32
	// OffsetsLoadBufferSize is how many bytes a coordinator reads at a
	// time while loading a __consumer_offsets partition
	// (offsets.load.buffer.size). Default 5242880; at least 1.
	OffsetsLoadBufferSize int32

	// TransactionStateLogNumPartitions is the partition count of
	// __transaction_state when the broker creates it
	// (transaction.state.log.num.partitions). Default 50; 1 .. 1000000.
	TransactionStateLogNumPartitions int32
	// TransactionStateLogReplicationFactor is the replication factor of
	// __transaction_state (transaction.state.log.replication.factor):
	// with fewer live brokers the topic is not created and
	// FindCoordinator answers COORDINATOR_NOT_AVAILABLE, except on a
	// broker that is its cluster's only Raft voter, where it is 1.
	// Default 3; 1 .. 32767.
	TransactionStateLogReplicationFactor int32
	// TransactionStateLogSegmentBytes is __transaction_state's
	// segment.bytes (transaction.state.log.segment.bytes). Default
	// 104857600; at least 14.
	TransactionStateLogSegmentBytes int32
	// TransactionStateLogMinISR is __transaction_state's
	// min.insync.replicas, capped by its replication factor
	// (transaction.state.log.min.isr). Default 2; at least 1.
	TransactionStateLogMinISR int32
	// TransactionMaxTimeout bounds the transaction.timeout.ms a
	// transactional producer may ask for (transaction.max.timeout.ms);
	// more is INVALID_TRANSACTION_TIMEOUT. Default 15 minutes; at least
	// 1 ms.
	TransactionMaxTimeout time.Duration
	// TransactionPartitionVerification makes a partition leader ask the
	// transaction coordinator, before it appends the first batch of a
	// producer's transaction, whether the partition was added to that
	// transaction (KIP-890 part 1;
	// transaction.partition.verification.enable). Default true.
	TransactionPartitionVerification bool
	// TransactionalIDExpiration is how long the coordinator keeps a
	// transactional id with no open transaction after its last change
	// (transactional.id.expiration.ms). Default 7 days; 1 ms .. 2^31-1
	// ms.
	TransactionalIDExpiration time.Duration
	// TransactionAbortTimedOutCleanupInterval is how often open
	// transactions past their timeout are aborted
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	// Default 10 s; at least 1 ms.
	TransactionAbortTimedOutCleanupInterval time.Duration
	// TransactionRemoveExpiredCleanupInterval is how often expired
	// transactional ids are removed
	// (transaction.remove.expired.transaction.cleanup.interval.ms).
	// Default 1 hour; at least 1 ms.
	TransactionRemoveExpiredCleanupInterval time.Duration

	// SASL holds the SASL properties (security.SASLConfig).
	SASL security.SASLConfig
	// Authorizer holds the ACL authorizer's properties
	// (security.AuthorizerConfig).
	Authorizer security.AuthorizerConfig
}

// DefaultConfig returns a working single-broker configuration: broker 1 on
// 127.0.0.1:9092 with its data in ./data, and Kafka's defaults for the rest.
func DefaultConfig() Config {
	defaultController := controller.DefaultConfig()
	defaultReplication := replication.DefaultConfig()
	defaultLog := tlog.DefaultConfig()
	defaultGroup := group.DefaultConfig()
	defaultConsumerGroup := consumer.DefaultConfig()
	return Config{
		BrokerID:                   1,
		Listeners:                  "PLAINTEXT://127.0.0.1:9092",
		LogDirs:                    []string{"./data"},
		NumPartitions:              1,
		AutoCreateTopics:           true,
		MaxRequestPartitions:       100000,
		MaxPartitions:              int32(defaultController.MaxPartitions),
		MaxBrokerPartitions:        int32(defaultController.MaxBrokerPartitions),
		SocketRequestMaxBytes:      104857600,
		QueuedMaxRequestBytes:      256 << 20,
		FetchMaxBytes:              57671680,
		MaxConnections:             math.MaxInt32,
		MaxConnectionsPerIP:        math.MaxInt32,
		MaxConnectionCreationRate:  math.MaxInt32,
		LogSegmentBytes:            defaultLog.SegmentBytes,
		LogRoll:                    defaultLog.RollTime,
		LogRetentionBytes:          defaultLog.RetentionBytes,
		LogRetention:               defaultLog.RetentionTime,
		LogFlushIntervalMessages:   defaultLog.FlushMessages,
		LogFlushInterval:           defaultLog.FlushInterval,
		LogWritebackBytes:          defaultLog.WritebackBytes,
		LogRetentionCheckInterval:  5 * time.Minute,
		LogOpenFilesMax:            tlog.DefaultOpenFilesMax,
		LogCleanerEnable:           true,
		LogCleanerDedupeBufferSize: tlog.DefaultCleanConfig().DedupeBufferSize,
		LogCleanerBackoff:          15 * time.Second,
		ConnectionsMaxIdle:         10 * time.Minute,
		MessageMaxBytes:            1048588,

		ListenerSecurityProtocolMap: defaultSecurityProtocolMap(),
		SSL:                         security.DefaultSSLConfig(),
		SASL:                        security.DefaultSASLConfig(),

		Coord:                              defaultCoordConfig(),
		UncleanLeaderElection:              defaultController.UncleanLeaderElection,
		AutoLeaderRebalance:                defaultController.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval:       defaultController.LeaderImbalanceCheckInterval,
		LeaderImbalancePerBrokerPercentage: int32(defaultController.LeaderImbalancePerBrokerPercentage),
		DefaultReplicationFactor:           1,
		ControlledShutdown:                 true,

		BrokerProbeInterval:                    200 * time.Millisecond,
		ControllerSocketTimeout:                30 * time.Second,
		ReplicaLagTimeMax:                      defaultReplication.ReplicaLagTimeMax,
		MinInsyncReplicas:                      int32(defaultReplication.MinInsyncReplicas),
		ReplicationTruncation:                  string(defaultReplication.Truncation),
		ReplicaFetchWaitMax:                    500 * time.Millisecond,
		ReplicaFetchMinBytes:                   1,
		NumReplicaFetchers:                     1,
		ReplicaFetchMaxBytes:                   1 << 20,
		ReplicaFetchBackoff:                    200 * time.Millisecond,
		ReplicationQuotaWindowNum:              QuotaSamples,
		ReplicationQuotaWindowSize:             QuotaWindow,
		QuotaWindowNum:                         QuotaSamples,
		QuotaWindowSize:                        QuotaWindow,
		ControllerQuotaWindowNum:               QuotaSamples,
		ControllerQuotaWindowSize:              QuotaWindow,
		ReplicaHighWatermarkCheckpointInterval: 5 * time.Second,

		ProducerIDExpiration:              24 * time.Hour,
		ProducerIDExpirationCheckInterval: 10 * time.Minute,

		GroupMinSessionTimeout:     defaultGroup.MinSessionTimeout,
		GroupMaxSessionTimeout:     defaultGroup.MaxSessionTimeout,
		GroupInitialRebalanceDelay: defaultGroup.InitialRebalanceDelay,
		GroupMaxSize:               int32(defaultGroup.MaxSize),

		GroupConsumerSessionTimeout:       defaultConsumerGroup.SessionTimeout,
		GroupConsumerMinSessionTimeout:    45 * time.Second,
		GroupConsumerMaxSessionTimeout:    60 * time.Second,
		GroupConsumerHeartbeatInterval:    defaultConsumerGroup.HeartbeatInterval,
		GroupConsumerMinHeartbeatInterval: 5 * time.Second,
		GroupConsumerMaxHeartbeatInterval: 15 * time.Second,
		GroupConsumerAssignors:            defaultConsumerGroup.Assignors,
		GroupConsumerMaxSize:              int32(defaultConsumerGroup.MaxSize),
		GroupConsumerMigrationPolicy:      string(defaultConsumerGroup.MigrationPolicy),

		OffsetsTopicNumPartitions:     50,
		OffsetsTopicReplicationFactor: 3,
		OffsetsTopicSegmentBytes:      104857600,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetsCommitTimeout:          5 * time.Second,
		OffsetMetadataMaxBytes:        4096,
		OffsetsLoadBufferSize:         5242880,

		TransactionStateLogNumPartitions:        50,
		TransactionStateLogReplicationFactor:    3,
		TransactionStateLogSegmentBytes:         104857600,
		TransactionStateLogMinISR:               2,
		TransactionMaxTimeout:                   15 * time.Minute,
		TransactionPartitionVerification:        true,
		TransactionalIDExpiration:               7 * 24 * time.Hour,
		TransactionAbortTimedOutCleanupInterval: 10 * time.Second,
		TransactionRemoveExpiredCleanupInterval: time.Hour,
	}
}

// CoordSSLConfig is the TLS key material of the connections to etcd and
// between Raft nodes, as PEM files in the format of ssl.keystore.location
// and ssl.truststore.location (KIP-651), read again when they change.
type CoordSSLConfig struct {
	// EtcdTruststoreLocation is a PEM file of the CAs that etcd's server
	// certificate must chain to (etcd.ssl.truststore.location); its host
	// name is checked against the endpoint's. Default empty: the system's
	// roots, when the endpoints are https://.
	EtcdTruststoreLocation string
	// EtcdKeystoreLocation is a PEM file with the private key and
	// certificate chain presented to etcd as a client certificate
	// (etcd.ssl.keystore.location), for etcd's --client-cert-auth.
	// Default empty: none.
	EtcdKeystoreLocation string
	// RaftKeystoreLocation and RaftTruststoreLocation make the Raft
	// transport mutual TLS (raft.ssl.keystore.location,
	// raft.ssl.truststore.location; both or neither): each node presents
	// the keystore's certificate, which must name the host of its
	// raft.voters address, and accepts and dials only peers whose
	// certificates chain to the truststore's CAs. Default empty: plain TCP.
	RaftKeystoreLocation   string
	RaftTruststoreLocation string
}

// etcdTLS reports whether the connections to etcd are TLS: an etcd.ssl.*
// file is set or an endpoint is https://.
func (c Config) etcdTLS() bool {
	if c.CoordSSL.EtcdTruststoreLocation != "" || c.CoordSSL.EtcdKeystoreLocation != "" {
		return true
	}
	for _, e := range c.Coord.EtcdEndpoints {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}

// coordTLSStore loads the key material of a coordination backend's TLS
// (etcd or raft) with the ssl.* defaults; key names the properties.
func coordTLSStore(name, keystore, truststore, clientAuth string, logger hclog.Logger) (*security.TLSStore, error) {
	ssl := security.DefaultSSLConfig()
	ssl.KeystoreLocation, ssl.TruststoreLocation, ssl.ClientAuth = keystore, truststore, clientAuth
	return security.NewTLSStore(name, ssl, func(key string) string { return name + "." + key }, logger)
}

// OpenCoordTLS reads CoordSSL's files into cc's TLS configurations: the
// etcd client's, and the Raft transport's server (client certificates
// required and verified) and client sides. An error names the property
// whose file does not load.
func (c Config) OpenCoordTLS(cc *coord.Config, logger hclog.Logger) error {
	switch cc.Backend {
	case "etcd":
		if !c.etcdTLS() {
			return nil
		}
		store, err := coordTLSStore("etcd", c.CoordSSL.EtcdKeystoreLocation, c.CoordSSL.EtcdTruststoreLocation, "none", logger)
		if err != nil {
			return err
		}
		cc.EtcdTLS = store.ClientConfig()
	case "raft":
		if c.CoordSSL.RaftKeystoreLocation == "" {
			return nil
		}
		store, err := coordTLSStore("raft", c.CoordSSL.RaftKeystoreLocation, c.CoordSSL.RaftTruststoreLocation, "required", logger)
		if err != nil {
			return err
		}
		cc.RaftServerTLS, cc.RaftClientTLS = store.ServerConfig(), store.ClientConfig()
	}
	return nil
}

// validateCoordSecurity checks the coordination backend's security
// properties beyond what coord.Config.Validate sees (the files, which only
// broker.New reads).
func (c Config) validateCoordSecurity() error {
	ssl := c.CoordSSL
	if (ssl.RaftKeystoreLocation == "") != (ssl.RaftTruststoreLocation == "") {
		return fmt.Errorf("raft.ssl.keystore.location / raft.ssl.truststore.location: set both or neither (mutual TLS needs this node's certificate and the cluster's CA)")
	}
	if c.Coord.Backend == "etcd" && (ssl.EtcdTruststoreLocation != "" || ssl.EtcdKeystoreLocation != "") {
		for _, e := range c.Coord.EtcdEndpoints {
			if !strings.HasPrefix(e, "https://") {
				return fmt.Errorf("etcd.endpoints %q: with etcd.ssl.* set, endpoints must be https://", e)
			}
		}
	}
	return nil
}

// WarnUnsecuredCoord logs once, at startup, when the coordination backend
// lets anyone who reaches it change the cluster's metadata.
func (c Config) WarnUnsecuredCoord(logger hclog.Logger) {
	cc := c.Coord
	switch cc.Backend {
	case "zk":
		if !cc.ZKSetACL {
			logger.Warn("zookeeper.set.acl is false: tripod's znodes are world-writable, so anyone who reaches ZooKeeper can change the cluster's metadata; "+
				"set zookeeper.set.acl=true with zookeeper.digest.username and zookeeper.digest.password",
				"zookeeper.connect", cc.ZKConnect)
		}
	case "etcd":
		if !c.etcdTLS() || (cc.EtcdUsername == "" && c.CoordSSL.EtcdKeystoreLocation == "") {
			logger.Warn("etcd is reached without TLS or without authentication: anyone who reaches etcd (or the network between) can change the cluster's metadata; "+
				"use https:// endpoints with etcd.ssl.truststore.location, and etcd.username/etcd.password or etcd.ssl.keystore.location with etcd's auth enabled",
				"etcd.endpoints", strings.Join(cc.EtcdEndpoints, ","), "tls", c.etcdTLS(), "authenticated", cc.EtcdUsername != "" || c.CoordSSL.EtcdKeystoreLocation != "")
		}
	case "raft":
		// A lone voter on a loopback address (tripod serve on a laptop)
		// is reached by local processes only: no warning for it. An
		// observer of a one-voter cluster is not lone: other brokers
		// join through it.
		listen := c.CoordConfig().RaftListen
		host, _, _ := net.SplitHostPort(listen)
		ip := net.ParseIP(host)
		lone := c.CoordConfig().LoneRaftVoter() && (host == "localhost" || (ip != nil && ip.IsLoopback()))
		if c.CoordSSL.RaftKeystoreLocation == "" && !lone {
			logger.Warn("the Raft transport is plain TCP: anyone who reaches the Raft port can vote, replicate into the log and change the cluster's metadata; "+
				"set raft.ssl.keystore.location and raft.ssl.truststore.location for mutual TLS",
				"raft.listen", listen)
		}
	}
}

// defaultCoordConfig is coord's default with the Raft address left to be
// derived from the listener.
func defaultCoordConfig() coord.Config {
	c := coord.DefaultConfig()
	c.RaftListen = ""
	return c
}

// CoordConfig returns the coordination config with its derived fields
// filled in: broker id, Raft directory and, for a broker alone, Raft
// listener (the inter-broker listener's host, its port + 100). An
// observer's Raft listener is never derived: it is the address the
// voters reach it at, which an operator states.
func (c Config) CoordConfig() coord.Config {
	cc := c.Coord
	cc.BrokerID = coord.BrokerID(c.BrokerID)
	cc.MetadataStandby = true
	if cc.RaftDir == "" && len(c.LogDirs) > 0 {
		cc.RaftDir = filepath.Join(c.LogDirs[0], "raft")
	}
	if cc.RaftListen == "" && len(cc.RaftVoters) == 0 {
		if specs, inter, err := c.ListenerSpecs(); err == nil {
			p := specs[inter].Port
			if p != 0 {
				p += 100
			}
			cc.RaftListen = net.JoinHostPort(specs[inter].Host, strconv.Itoa(p))
		}
	}
	return cc
}

// maxReplicaFetchers bounds num.replica.fetchers: each fetcher holds a
// connection and a fetch session on its leader.
const maxReplicaFetchers = 64

// Validate checks every field's range and names the bad key.
func (c Config) Validate() error {
	if c.BrokerID < 0 {
		return fmt.Errorf("broker.id %d: must be between 0 and 2147483647", c.BrokerID)
	}
	if _, _, err := c.ListenerSpecs(); err != nil {
		return err
	}
	if len(c.LogDirs) == 0 {
		return fmt.Errorf("log.dirs: must name at least one directory")
	}
	for _, d := range c.LogDirs {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("log.dirs %q: a directory name is empty", strings.Join(c.LogDirs, ","))
		}
	}
	if c.NumPartitions < 1 || c.NumPartitions > MaxPartitions {
		return fmt.Errorf("num.partitions %d: must be between 1 and %d", c.NumPartitions, MaxPartitions)
	}
	if c.MaxRequestPartitions < 1 {
		return fmt.Errorf("max.request.partitions %d: must be between 1 and 2147483647", c.MaxRequestPartitions)
	}
	if c.SocketRequestMaxBytes < 1 {
		return fmt.Errorf("socket.request.max.bytes %d: must be between 1 and 2147483647", c.SocketRequestMaxBytes)
	}
	if c.QueuedMaxRequestBytes < 1 {
		return fmt.Errorf("queued.max.request.bytes %d: must be between 1 and 9223372036854775807", c.QueuedMaxRequestBytes)
	}
	if c.FetchMaxBytes < 1024 {
		return fmt.Errorf("fetch.max.bytes %d: must be between 1024 and 2147483647", c.FetchMaxBytes)
	}
	if c.LogOpenFilesMax < 1 {
		return fmt.Errorf("log.open.files.max %d: must be between 1 and 2147483647", c.LogOpenFilesMax)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("max.connections %d: must be between 1 and 2147483647", c.MaxConnections)
	}
	if c.MaxConnectionCreationRate < 0 {
		return fmt.Errorf("max.connection.creation.rate %d: must be at least 0", c.MaxConnectionCreationRate)
	}
	if c.MaxConnectionsPerIP < 1 {
		return fmt.Errorf("max.connections.per.ip %d: must be between 1 and 2147483647", c.MaxConnectionsPerIP)
	}
	// The log's own ranges, checked by replication/log, which owns them.
	if err := c.LogConfig(nil).Validate(); err != nil {
		return err
	}
	if c.LogRetentionCheckInterval < time.Millisecond {
		return fmt.Errorf("log.retention.check.interval.ms %d: must be at least 1", c.LogRetentionCheckInterval.Milliseconds())
	}
	if err := c.CleanConfig(nil).Validate(); err != nil {
		return err
	}
	if c.LogCleanerBackoff < time.Millisecond {
		return fmt.Errorf("log.cleaner.backoff.ms %d: must be at least 1", c.LogCleanerBackoff.Milliseconds())
	}
	if c.ConnectionsMaxIdle < time.Millisecond {
		return fmt.Errorf("connections.max.idle.ms %d: must be at least 1", c.ConnectionsMaxIdle.Milliseconds())
	}
	if c.MessageMaxBytes < 0 {
		return fmt.Errorf("message.max.bytes %d: must be between 0 and 2147483647", c.MessageMaxBytes)
	}
	if c.LeaderImbalanceCheckInterval < time.Second {
		// The property counts whole seconds; the controller takes any
		// positive interval.
		return fmt.Errorf("leader.imbalance.check.interval.seconds %d: must be at least 1", int64(c.LeaderImbalanceCheckInterval/time.Second))
	}
	if err := c.ControllerConfig(nil).Validate(); err != nil {
		return err
	}
	if c.DefaultReplicationFactor < 1 || c.DefaultReplicationFactor > math.MaxInt16 {
		return fmt.Errorf("default.replication.factor %d: must be between 1 and 32767", c.DefaultReplicationFactor)
	}
	if err := c.ReplicationConfig(nil).Validate(); err != nil {
		return err
	}
	if c.BrokerProbeInterval < 0 || c.BrokerProbeInterval > time.Minute {
		return fmt.Errorf("broker.crash.probe.interval.ms %d: must be between 0 (off) and 60000", c.BrokerProbeInterval.Milliseconds())
	}
	if c.ControllerSocketTimeout < 100*time.Millisecond || c.ControllerSocketTimeout > 15*time.Minute {
		return fmt.Errorf("controller.socket.timeout.ms %d: must be between 100 and 900000", c.ControllerSocketTimeout.Milliseconds())
	}
	if c.ReplicaFetchWaitMax < time.Millisecond || c.ReplicaFetchWaitMax >= c.ReplicaLagTimeMax {
		return fmt.Errorf("replica.fetch.wait.max.ms %d: must be at least 1 and below replica.lag.time.max.ms (%d)",
			c.ReplicaFetchWaitMax.Milliseconds(), c.ReplicaLagTimeMax.Milliseconds())
	}
	if c.ReplicaFetchMinBytes < 1 {
		return fmt.Errorf("replica.fetch.min.bytes %d: must be between 1 and 2147483647", c.ReplicaFetchMinBytes)
	}
	if c.ReplicationQuotaWindowNum < 1 {
		return fmt.Errorf("replication.quota.window.num %d: must be at least 1", c.ReplicationQuotaWindowNum)
	}
	if c.ReplicationQuotaWindowSize < time.Second || c.ReplicationQuotaWindowSize%time.Second != 0 {
		return fmt.Errorf("replication.quota.window.size.seconds %v: must be a whole number of seconds, at least 1", c.ReplicationQuotaWindowSize)
	}
	if c.QuotaWindowNum < 1 {
		return fmt.Errorf("quota.window.num %d: must be at least 1", c.QuotaWindowNum)
	}
	if c.QuotaWindowSize < time.Second || c.QuotaWindowSize%time.Second != 0 {
		return fmt.Errorf("quota.window.size.seconds %v: must be a whole number of seconds, at least 1", c.QuotaWindowSize)
	}
	if c.ControllerQuotaWindowNum < 1 {
		return fmt.Errorf("controller.quota.window.num %d: must be at least 1", c.ControllerQuotaWindowNum)
	}
	if c.ControllerQuotaWindowSize < time.Second || c.ControllerQuotaWindowSize%time.Second != 0 {
		return fmt.Errorf("controller.quota.window.size.seconds %v: must be a whole number of seconds, at least 1", c.ControllerQuotaWindowSize)
	}
	if c.ReplicaFetchMaxBytes < 1 {
		return fmt.Errorf("replica.fetch.max.bytes %d: must be between 1 and 2147483647", c.ReplicaFetchMaxBytes)
	}
	if c.NumReplicaFetchers < 1 || c.NumReplicaFetchers > maxReplicaFetchers {
		return fmt.Errorf("num.replica.fetchers %d: must be between 1 and %d", c.NumReplicaFetchers, maxReplicaFetchers)
	}
	if c.ReplicaFetchBackoff < time.Millisecond {
		return fmt.Errorf("replica.fetch.backoff.ms %d: must be at least 1", c.ReplicaFetchBackoff.Milliseconds())
	}
	if c.ReplicaHighWatermarkCheckpointInterval < time.Millisecond {
		return fmt.Errorf("replica.high.watermark.checkpoint.interval.ms %d: must be at least 1", c.ReplicaHighWatermarkCheckpointInterval.Milliseconds())
	}
	if c.ProducerIDExpiration < time.Millisecond {
		return fmt.Errorf("producer.id.expiration.ms %d: must be at least 1", c.ProducerIDExpiration.Milliseconds())
	}
	if c.ProducerIDExpirationCheckInterval < time.Millisecond {
		return fmt.Errorf("producer.id.expiration.check.interval.ms %d: must be at least 1", c.ProducerIDExpirationCheckInterval.Milliseconds())
	}
	if err := c.SASL.Validate(); err != nil {
		return err
	}
	if err := c.Authorizer.Validate(); err != nil {
		return err
	}
	if err := c.validateGroups(); err != nil {
		return err
	}
	if err := c.validateTransactions(); err != nil {
		return err
	}
	if err := c.validateCoordSecurity(); err != nil {
		return err
	}
	cc := c.CoordConfig()
	// The TLS configurations are built from the files by broker.New;
	// stand-ins let coord check the relations of the other settings to
	// them.
	if cc.Backend == "etcd" && c.etcdTLS() {
		cc.EtcdTLS = &tls.Config{}
	}
	if c.CoordSSL.RaftKeystoreLocation != "" {
		cc.RaftServerTLS, cc.RaftClientTLS = &tls.Config{}, &tls.Config{}
	}
	return cc.Validate()
}

// validateGroups checks the group coordinator's properties.
func (c Config) validateGroups() error {
	// The group properties' ranges are the group package's.
	if err := c.GroupConfig().Validate(); err != nil {
		return err
	}
	if err := c.validateConsumerGroups(); err != nil {
		return err
	}
	switch {
	case c.OffsetsTopicNumPartitions < 1 || c.OffsetsTopicNumPartitions > MaxPartitions:
		return fmt.Errorf("offsets.topic.num.partitions %d: must be between 1 and %d", c.OffsetsTopicNumPartitions, MaxPartitions)
	case c.OffsetsTopicReplicationFactor < 1 || c.OffsetsTopicReplicationFactor > math.MaxInt16:
		return fmt.Errorf("offsets.topic.replication.factor %d: must be between 1 and 32767", c.OffsetsTopicReplicationFactor)
	case c.OffsetsTopicSegmentBytes < 14:
		return fmt.Errorf("offsets.topic.segment.bytes %d: must be between 14 and 2147483647", c.OffsetsTopicSegmentBytes)
	case c.OffsetsRetention < time.Minute:
		return fmt.Errorf("offsets.retention.minutes %d: must be at least 1", int64(c.OffsetsRetention/time.Minute))
	case c.OffsetsRetentionCheckInterval < time.Millisecond:
		return fmt.Errorf("offsets.retention.check.interval.ms %d: must be at least 1", c.OffsetsRetentionCheckInterval.Milliseconds())
	case c.OffsetsCommitTimeout < time.Millisecond:
		return fmt.Errorf("offsets.commit.timeout.ms %d: must be at least 1", c.OffsetsCommitTimeout.Milliseconds())
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset.metadata.max.bytes %d: must be between 0 and 2147483647", c.OffsetMetadataMaxBytes)
	case c.OffsetsLoadBufferSize < 1:
		return fmt.Errorf("offsets.load.buffer.size %d: must be between 1 and 2147483647", c.OffsetsLoadBufferSize)
	}
	return nil
}

// validateTransactions checks the transaction coordinator's properties.
func (c Config) validateTransactions() error {
	switch {
	case c.TransactionStateLogNumPartitions < 1 || c.TransactionStateLogNumPartitions > MaxPartitions:
		return fmt.Errorf("transaction.state.log.num.partitions %d: must be between 1 and %d", c.TransactionStateLogNumPartitions, MaxPartitions)
	case c.TransactionStateLogReplicationFactor < 1 || c.TransactionStateLogReplicationFactor > math.MaxInt16:
		return fmt.Errorf("transaction.state.log.replication.factor %d: must be between 1 and 32767", c.TransactionStateLogReplicationFactor)
	case c.TransactionStateLogSegmentBytes < 14:
		return fmt.Errorf("transaction.state.log.segment.bytes %d: must be between 14 and 2147483647", c.TransactionStateLogSegmentBytes)
	case c.TransactionStateLogMinISR < 1:
		return fmt.Errorf("transaction.state.log.min.isr %d: must be between 1 and 2147483647", c.TransactionStateLogMinISR)
	case c.TransactionMaxTimeout < time.Millisecond || c.TransactionMaxTimeout > math.MaxInt32*time.Millisecond:
		return fmt.Errorf("transaction.max.timeout.ms %d: must be between 1 and 2147483647", c.TransactionMaxTimeout.Milliseconds())
	case c.TransactionalIDExpiration < time.Millisecond || c.TransactionalIDExpiration > math.MaxInt32*time.Millisecond:
		return fmt.Errorf("transactional.id.expiration.ms %d: must be between 1 and 2147483647", c.TransactionalIDExpiration.Milliseconds())
	case c.TransactionAbortTimedOutCleanupInterval < time.Millisecond:
		return fmt.Errorf("transaction.abort.timed.out.transaction.cleanup.interval.ms %d: must be at least 1", c.TransactionAbortTimedOutCleanupInterval.Milliseconds())
	case c.TransactionRemoveExpiredCleanupInterval < time.Millisecond:
		return fmt.Errorf("transaction.remove.expired.transaction.cleanup.interval.ms %d: must be at least 1", c.TransactionRemoveExpiredCleanupInterval.Milliseconds())
	}
	return nil
}

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 1000000

// configKey describes one broker property: how to set it on a Config,
// how to print it back, and what it means for its user (the one source
// of docs/configuration.md's tables, `tripod serve --help-config` and
// DescribeConfigs' documentation; its default is get of DefaultConfig).
type configKey struct {
	set func(c *Config, key, value string) error
	get func(c Config) string
	doc keyDoc
}

// brokerKeys are the properties Set accepts, by Kafka name.
var brokerKeys = map[string]configKey{
	"broker.id": {
		doc: keyDoc{
			section: "Broker", allowed: "0 .. 2147483647",
			meaning: "this broker's id in the cluster's metadata (`--broker-id`)",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.BrokerID, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.BrokerID)) },
	},
	"broker.rack": {
		doc: keyDoc{
			section: "Broker", allowed: "any string without control characters; empty for none",
			meaning: "the rack or availability zone of this broker, returned to clients in Metadata and DescribeCluster",
		},
		set: func(c *Config, k, v string) error { return setRack(&c.Rack, k, v) },
		get: func(c Config) string { return c.Rack },
	},
	"replica.selector.class": {
		doc: keyDoc{
			section: "Broker", allowed: "empty, `" + RackAwareReplicaSelector + "`",
			meaning: "which replica a consumer that sets `client.rack` reads from: empty, the leader; the rack-aware selector, an in-sync replica in the consumer's rack when the leader is in another ([Follower fetching](operations.md#follower-fetching))",
		},
		set: func(c *Config, k, v string) error { return setReplicaSelector(&c.ReplicaSelectorClass, k, v) },
		get: func(c Config) string { return c.ReplicaSelectorClass },
	},
	"listeners": {
		doc: keyDoc{see: seeListenersTLS},
		set: func(c *Config, k, v string) error { c.Listeners = v; return nil },
		get: func(c Config) string { return c.Listeners },
	},
	"advertised.listeners": {
		doc: keyDoc{see: seeListenersTLS},
		set: func(c *Config, k, v string) error { c.AdvertisedListeners = v; return nil },
		get: func(c Config) string { return c.AdvertisedListeners },
	},
	"listener.security.protocol.map": {
		doc: keyDoc{see: seeListenersTLS},
		set: func(c *Config, k, v string) error {
			return setSecurityProtocolMap(&c.ListenerSecurityProtocolMap, k, v)
		},
		get: func(c Config) string { return formatSecurityProtocolMap(c.ListenerSecurityProtocolMap) },
	},
	"inter.broker.listener.name": {
		doc: keyDoc{see: seeListenersTLS},
		set: func(c *Config, k, v string) error { c.InterBrokerListenerName = strings.TrimSpace(v); return nil },
		get: func(c Config) string { return c.InterBrokerListenerName },
	},
	"security.inter.broker.protocol": {
		doc: keyDoc{see: seeListenersTLS},
		set: func(c *Config, k, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if _, ok := securityProtocolIDs[v]; !ok && v != "" {
				return fmt.Errorf("%s %q: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", k, v)
			}
			c.SecurityInterBrokerProtocol = v
			return nil
		},
		get: func(c Config) string { return c.SecurityInterBrokerProtocol },
	},
	"log.dirs": {
		doc: keyDoc{
			section: "Broker", allowed: "one or more directories, comma separated",
			meaning: "the directories holding the partition logs and the topic catalogue (`--data-dir`)",
		},
		set: func(c *Config, k, v string) error {
			c.LogDirs = nil
			for _, d := range strings.Split(v, ",") {
				c.LogDirs = append(c.LogDirs, strings.TrimSpace(d))
			}
			return nil
		},
		get: func(c Config) string { return strings.Join(c.LogDirs, ",") },
	},
	"group.min.session.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupMinSessionTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 1",
		meaning: "the shortest session timeout a member may ask for",
	}),
	"group.max.session.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupMaxSessionTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ `group.min.session.timeout.ms`",
		meaning: "the longest session timeout a member may ask for",
	}),
	"group.initial.rebalance.delay.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 0",
		meaning: "how long a new group waits for more members before its first rebalance",
	}),
	"group.max.size": int32Key(func(c *Config) *int32 { return &c.GroupMaxSize }).documented(keyDoc{
		section: "Group coordinator", allowed: "1 .. 2147483647",
		meaning: "members of one group (GROUP_MAX_SIZE_REACHED past it)",
	}),
	"group.consumer.session.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerSessionTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "`group.consumer.min.session.timeout.ms` .. `group.consumer.max.session.timeout.ms`",
		meaning: "how long a consumer-protocol member (KIP-848) may go without a heartbeat before it is removed",
	}),
	"group.consumer.min.session.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerMinSessionTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 1",
		meaning: "the lower bound of `group.consumer.session.timeout.ms`",
	}),
	"group.consumer.max.session.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerMaxSessionTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ `group.consumer.min.session.timeout.ms`",
		meaning: "the upper bound of `group.consumer.session.timeout.ms`",
	}),
	"group.consumer.heartbeat.interval.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerHeartbeatInterval }).documented(keyDoc{
		section: "Group coordinator", allowed: "`group.consumer.min.heartbeat.interval.ms` .. `group.consumer.max.heartbeat.interval.ms`, < `group.consumer.session.timeout.ms`",
		meaning: "how often consumer-protocol members are told to heartbeat",
	}),
	"group.consumer.min.heartbeat.interval.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerMinHeartbeatInterval }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 1",
		meaning: "the lower bound of `group.consumer.heartbeat.interval.ms`",
	}),
	"group.consumer.max.heartbeat.interval.ms": millisKey(func(c *Config) *time.Duration { return &c.GroupConsumerMaxHeartbeatInterval }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ `group.consumer.min.heartbeat.interval.ms`",
		meaning: "the upper bound of `group.consumer.heartbeat.interval.ms`",
	}),
	"group.consumer.assignors": configKey{
		set: func(c *Config, k, v string) error {
			c.GroupConsumerAssignors = nil
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					c.GroupConsumerAssignors = append(c.GroupConsumerAssignors, a)
				}
			}
			return nil
		},
		get: func(c Config) string { return strings.Join(c.GroupConsumerAssignors, ",") },
	}.documented(keyDoc{
		section: "Group coordinator", allowed: "`uniform`, `range`",
		meaning: "the server-side assignors of consumer-protocol groups, the first the default",
	}),
	"group.consumer.max.size": int32Key(func(c *Config) *int32 { return &c.GroupConsumerMaxSize }).documented(keyDoc{
		section: "Group coordinator", allowed: "1 .. 2147483647",
		meaning: "members of one consumer-protocol group (GROUP_MAX_SIZE_REACHED past it)",
	}),
	"group.consumer.migration.policy": configKey{
		set: func(c *Config, k, v string) error {
			c.GroupConsumerMigrationPolicy = strings.ToLower(strings.TrimSpace(v))
			return nil
		},
		get: func(c Config) string { return c.GroupConsumerMigrationPolicy },
	}.documented(keyDoc{
		section: "Group coordinator", allowed: "`disabled`, `upgrade`, `downgrade`, `bidirectional`",
		meaning: "KIP-848's online migration: whether a classic group becomes a consumer-protocol group when a consumer-protocol member joins it (upgrade), and back when its last consumer-protocol member leaves (downgrade)",
	}),
	"offsets.topic.num.partitions": int32Key(func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions }).documented(keyDoc{
		section: "Group coordinator", allowed: "1 .. 1000000",
		meaning: "partitions of `__consumer_offsets`",
	}),
	"offsets.topic.replication.factor": int32Key(func(c *Config) *int32 { return &c.OffsetsTopicReplicationFactor }).documented(keyDoc{
		section: "Group coordinator", allowed: "1 .. 32767",
		meaning: "replicas of `__consumer_offsets`",
	}),
	"offsets.topic.segment.bytes": int32Key(func(c *Config) *int32 { return &c.OffsetsTopicSegmentBytes }).documented(keyDoc{
		section: "Group coordinator", allowed: "14 .. 2147483647",
		meaning: "segment size of `__consumer_offsets`",
	}),
	"offsets.retention.check.interval.ms": millisKey(func(c *Config) *time.Duration { return &c.OffsetsRetentionCheckInterval }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 1",
		meaning: "how often expired offsets are looked for",
	}),
	"offsets.commit.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.OffsetsCommitTimeout }).documented(keyDoc{
		section: "Group coordinator", allowed: "≥ 1",
		meaning: "how long an offset commit waits for every in-sync replica",
	}),
	"offset.metadata.max.bytes": int32Key(func(c *Config) *int32 { return &c.OffsetMetadataMaxBytes }).documented(keyDoc{
		section: "Group coordinator", allowed: "0 .. 2147483647",
		meaning: "the metadata string of a committed offset",
	}),
	"offsets.load.buffer.size": int32Key(func(c *Config) *int32 { return &c.OffsetsLoadBufferSize }).documented(keyDoc{
		section: "Group coordinator", allowed: "1 .. 2147483647",
		meaning: "bytes read at a time when a coordinator loads its partition",
	}),
	"transaction.state.log.num.partitions": int32Key(func(c *Config) *int32 { return &c.TransactionStateLogNumPartitions }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "1 .. 1000000",
		meaning: "partitions of `__transaction_state`",
	}),
	"transaction.state.log.replication.factor": int32Key(func(c *Config) *int32 { return &c.TransactionStateLogReplicationFactor }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "1 .. 32767",
		meaning: "replicas of `__transaction_state`",
	}),
	"transaction.state.log.segment.bytes": int32Key(func(c *Config) *int32 { return &c.TransactionStateLogSegmentBytes }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "14 .. 2147483647",
		meaning: "segment size of `__transaction_state`",
	}),
	"transaction.state.log.min.isr": int32Key(func(c *Config) *int32 { return &c.TransactionStateLogMinISR }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "1 .. 2147483647",
		meaning: "`min.insync.replicas` of `__transaction_state`, capped by its replication factor",
	}),
	"transaction.max.timeout.ms": millisKey(func(c *Config) *time.Duration { return &c.TransactionMaxTimeout }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "1 .. 2147483647",
		meaning: "the longest `transaction.timeout.ms` a producer may ask for (INVALID_TRANSACTION_TIMEOUT past it)",
	}),
	"transactional.id.expiration.ms": millisKey(func(c *Config) *time.Duration { return &c.TransactionalIDExpiration }).documented(keyDoc{
		section: "Transaction coordinator", allowed: "1 .. 2147483647",
		meaning: "how long a transactional id with no open transaction is kept after its last change",
	}),
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": millisKey(func(c *Config) *time.Duration {
		return &c.TransactionAbortTimedOutCleanupInterval
	}).documented(keyDoc{
		section: "Transaction coordinator", allowed: "≥ 1",
		meaning: "how often open transactions past their timeout are aborted",
	}),
	"transaction.remove.expired.transaction.cleanup.interval.ms": millisKey(func(c *Config) *time.Duration {
		return &c.TransactionRemoveExpiredCleanupInterval
	}).documented(keyDoc{
		section: "Transaction coordinator", allowed: "≥ 1",
		meaning: "how often expired transactional ids are removed",
	}),
	"offsets.retention.minutes": {
		doc: keyDoc{
			section: "Group coordinator", allowed: "≥ 1",
			meaning: "how long committed offsets are kept after their group emptied",
		},
		set: func(c *Config, k, v string) error {
			var n int32
			if err := setInt32(&n, k, v); err != nil {
				return err
			}
			c.OffsetsRetention = time.Duration(n) * time.Minute
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(int64(c.OffsetsRetention/time.Minute), 10) },
	},
	"num.partitions": {
		doc: keyDoc{
			section: "Broker", allowed: "1 .. 1000000",
			meaning: "partitions of an auto-created topic, and of a CreateTopics asking for the default",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.NumPartitions, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.NumPartitions)) },
	},
	"max.request.partitions": int32Key(func(c *Config) *int32 { return &c.MaxRequestPartitions }).documented(keyDoc{see: seeLimits}),
	"max.partitions":         int32Key(func(c *Config) *int32 { return &c.MaxPartitions }).documented(keyDoc{see: seeLimits}),
	"max.broker.partitions":  int32Key(func(c *Config) *int32 { return &c.MaxBrokerPartitions }).documented(keyDoc{see: seeLimits}),
	"auto.create.topics.enable": {
		doc: keyDoc{
			section: "Broker", allowed: "true, false",
			meaning: "creates a topic that a Metadata request names, as Kafka",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.AutoCreateTopics, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.AutoCreateTopics) },
	},
	"transaction.partition.verification.enable": {
		doc: keyDoc{
			section: "Transaction coordinator", allowed: "true, false",
			meaning: "a partition leader asks the transaction coordinator whether the partition is in the producer's transaction before appending the transaction's first batch there (KIP-890 part 1; INVALID_TXN_STATE if not)",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.TransactionPartitionVerification, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.TransactionPartitionVerification) },
	},
	"max.connections": {
		doc: keyDoc{
			section: "Broker", allowed: "1 .. 2147483647",
			meaning: "connections of all listeners: at the limit the broker stops accepting until a connection closes",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.MaxConnections, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.MaxConnections)) },
	},
	"max.connections.per.ip": {
		doc: keyDoc{
			section: "Broker", allowed: "1 .. 2147483647",
			meaning: "connections from one address: one more is closed at once and logged",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.MaxConnectionsPerIP, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.MaxConnectionsPerIP)) },
	},
	"max.connection.creation.rate": {
		doc: keyDoc{
			section: "Broker", allowed: "0 .. 2147483647",
			meaning: "connections per second accepted over all listeners but a protected inter-broker one; over it, accepting waits (2147483647: no limit)",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.MaxConnectionCreationRate, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.MaxConnectionCreationRate)) },
	},
	"max.connections.per.ip.overrides": {
		doc: keyDoc{
			section: "Broker", allowed: "`HOST:N,...`",
			meaning: "per-address exceptions to `max.connections.per.ip`: `127.0.0.1:200,10.0.0.7:5`",
		},
		set: func(c *Config, k, v string) error {
			return setConnectionOverrides(&c.MaxConnectionsPerIPOverrides, k, v)
		},
		get: func(c Config) string { return formatConnectionOverrides(c.MaxConnectionsPerIPOverrides) },
	},
	"socket.request.max.bytes": {
		doc: keyDoc{
			section: "Broker", allowed: "1 .. 2147483647",
			meaning: "one request frame: see [Limits and hostile clients](operations.md#limits-and-hostile-clients)",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.SocketRequestMaxBytes, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.SocketRequestMaxBytes)) },
	},
	"queued.max.request.bytes": {
		doc: keyDoc{see: seeLimits},
		set: func(c *Config, k, v string) error { return setInt64(&c.QueuedMaxRequestBytes, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.QueuedMaxRequestBytes, 10) },
	},
	"fetch.max.bytes": {
		doc: keyDoc{see: seeLimits},
		set: func(c *Config, k, v string) error { return setInt32(&c.FetchMaxBytes, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.FetchMaxBytes)) },
	},
	"log.segment.bytes": {
		doc: keyDoc{
			section: "Log", allowed: "14 .. 2147483647",
			meaning: "bytes of a segment before it rolls",
		},
		set: func(c *Config, k, v string) error { return setInt64(&c.LogSegmentBytes, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogSegmentBytes, 10) },
	},
	"log.roll.ms": {
		doc: keyDoc{
			section: "Log", allowed: "≥ 1",
			meaning: "rolls a segment once its first batch is this old",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.LogRoll, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogRoll.Milliseconds(), 10) },
	},
	"log.retention.bytes": {
		doc: keyDoc{
			section: "Log", allowed: "-1 (no limit), or ≥ 0",
			meaning: "bytes a partition keeps before retention deletes its oldest segments",
		},
		set: func(c *Config, k, v string) error { return setInt64(&c.LogRetentionBytes, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogRetentionBytes, 10) },
	},
	"log.retention.ms": {
		doc: keyDoc{
			section: "Log", allowed: "-1 (forever), or ≥ 0",
			meaning: "how long a segment is kept (604800000: 7 days)",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.LogRetention, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogRetention.Milliseconds(), 10) },
	},
	"log.flush.interval.messages": {
		doc: keyDoc{
			section: "Log", allowed: "≥ 1",
			meaning: "fsync after this many records (the default: never; replication keeps what is acknowledged)",
		},
		set: func(c *Config, k, v string) error { return setInt64(&c.LogFlushIntervalMessages, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogFlushIntervalMessages, 10) },
	},
	"log.flush.interval.ms": {
		doc: keyDoc{
			section: "Log", allowed: "≥ 0 (0: never on time)",
			meaning: "fsync once the oldest unflushed record is this old",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.LogFlushInterval, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogFlushInterval.Milliseconds(), 10) },
	},
	"log.writeback.bytes": {
		doc: keyDoc{
			section: "Log", allowed: "0 (off), or 4096 .. 1073741824",
			meaning: "tripod's own: after this many bytes appended to a segment, ask the kernel to start writing them to disk (sync_file_range), without waiting or fsyncing, so that the page cache never holds gigabytes for the kernel to write at once while appends wait; see [Tail latency](bench/README.md#tail-latency)",
		},
		set: func(c *Config, k, v string) error { return setInt64(&c.LogWritebackBytes, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogWritebackBytes, 10) },
	},
	"log.retention.check.interval.ms": {
		doc: keyDoc{
			section: "Log", allowed: "≥ 1",
			meaning: "how often retention (and age-based rolls) run",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.LogRetentionCheckInterval, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogRetentionCheckInterval.Milliseconds(), 10) },
	},
	"log.open.files.max": {
		doc: keyDoc{
			section: "Log", allowed: "1 .. 2147483647",
			meaning: "tripod's own: the segment files the broker's logs hold open beside those in use; see [Idle replicas and restarts at scale](bench/README.md#idle-replicas-and-restarts-at-scale)",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.LogOpenFilesMax, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.LogOpenFilesMax)) },
	},
	"log.cleaner.enable": {
		doc: keyDoc{
			section: "Log compaction", allowed: "true, false",
			meaning: "runs the log cleaner",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.LogCleanerEnable, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.LogCleanerEnable) },
	},
	"log.cleaner.dedupe.buffer.size": {
		doc: keyDoc{
			section: "Log compaction", allowed: "≥ 24",
			meaning: "bytes of the cleaner's offset map",
		},
		set: func(c *Config, k, v string) error { return setInt64(&c.LogCleanerDedupeBufferSize, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogCleanerDedupeBufferSize, 10) },
	},
	"log.cleaner.backoff.ms": {
		doc: keyDoc{
			section: "Log compaction", allowed: "≥ 1",
			meaning: "how long the cleaner sleeps when nothing needs cleaning",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.LogCleanerBackoff, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.LogCleanerBackoff.Milliseconds(), 10) },
	},
	"connections.max.idle.ms": {
		doc: keyDoc{see: seeLimits},
		set: func(c *Config, k, v string) error { return setMillis(&c.ConnectionsMaxIdle, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ConnectionsMaxIdle.Milliseconds(), 10) },
	},
	"message.max.bytes": {
		doc: keyDoc{
			section: "Broker", allowed: "0 .. 2147483647",
			meaning: "the largest record batch a topic without `max.message.bytes` accepts",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.MessageMaxBytes, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.MessageMaxBytes)) },
	},
	"coordination.backend": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { c.Coord.Backend = v; return nil },
		get: func(c Config) string { return c.Coord.Backend },
	},
	"zookeeper.connect": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { c.Coord.ZKConnect = v; return nil },
		get: func(c Config) string { return c.Coord.ZKConnect },
	},
	"zookeeper.session.timeout.ms": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { return setMillis(&c.Coord.SessionTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.Coord.SessionTimeout.Milliseconds(), 10) },
	},
	"etcd.lease.ttl.ms": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { return setMillis(&c.Coord.SessionTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.Coord.SessionTimeout.Milliseconds(), 10) },
	},
	"etcd.endpoints": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error {
			c.Coord.EtcdEndpoints = nil
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" {
					c.Coord.EtcdEndpoints = append(c.Coord.EtcdEndpoints, e)
				}
			}
			return nil
		},
		get: func(c Config) string { return strings.Join(c.Coord.EtcdEndpoints, ",") },
	},
	"zookeeper.set.acl": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { return setBool(&c.Coord.ZKSetACL, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.Coord.ZKSetACL) },
	},
	"zookeeper.digest.username": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.Coord.ZKDigestUsername = v; return nil },
		get: func(c Config) string { return c.Coord.ZKDigestUsername },
	},
	"zookeeper.digest.password": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.Coord.ZKDigestPassword = v; return nil },
		get: func(c Config) string { return c.Coord.ZKDigestPassword },
	},
	"etcd.username": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.Coord.EtcdUsername = v; return nil },
		get: func(c Config) string { return c.Coord.EtcdUsername },
	},
	"etcd.password": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.Coord.EtcdPassword = v; return nil },
		get: func(c Config) string { return c.Coord.EtcdPassword },
	},
	"etcd.ssl.truststore.location": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.CoordSSL.EtcdTruststoreLocation = v; return nil },
		get: func(c Config) string { return c.CoordSSL.EtcdTruststoreLocation },
	},
	"etcd.ssl.keystore.location": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.CoordSSL.EtcdKeystoreLocation = v; return nil },
		get: func(c Config) string { return c.CoordSSL.EtcdKeystoreLocation },
	},
	"raft.ssl.keystore.location": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.CoordSSL.RaftKeystoreLocation = v; return nil },
		get: func(c Config) string { return c.CoordSSL.RaftKeystoreLocation },
	},
	"raft.ssl.truststore.location": {
		doc: keyDoc{see: seeCoordSecurity},
		set: func(c *Config, k, v string) error { c.CoordSSL.RaftTruststoreLocation = v; return nil },
		get: func(c Config) string { return c.CoordSSL.RaftTruststoreLocation },
	},
	"etcd.prefix": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { c.Coord.EtcdPrefix = v; return nil },
		get: func(c Config) string { return c.Coord.EtcdPrefix },
	},
	"raft.listen": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error { c.Coord.RaftListen = v; return nil },
		get: func(c Config) string { return c.CoordConfig().RaftListen },
	},
	"raft.voters": {
		doc: keyDoc{see: seeBackends},
		set: func(c *Config, k, v string) error {
			voters, err := coord.ParseRaftVoters(v)
			if err != nil {
				return err
			}
			c.Coord.RaftVoters = voters
			return nil
		},
		get: func(c Config) string { return coord.FormatRaftVoters(c.Coord.RaftVoters) },
	},
	"raft.heartbeat.timeout.ms": {
		doc: keyDoc{
			section: "Raft", allowed: "≥ 5",
			meaning: "hashicorp/raft's HeartbeatTimeout",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.Coord.RaftHeartbeatTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.Coord.RaftHeartbeatTimeout.Milliseconds(), 10) },
	},
	"raft.election.timeout.ms": {
		doc: keyDoc{
			section: "Raft", allowed: "≥ 5",
			meaning: "hashicorp/raft's ElectionTimeout",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.Coord.RaftElectionTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.Coord.RaftElectionTimeout.Milliseconds(), 10) },
	},
	"raft.leader.lease.timeout.ms": {
		doc: keyDoc{
			section: "Raft", allowed: "≤ `raft.heartbeat.timeout.ms`",
			meaning: "hashicorp/raft's LeaderLeaseTimeout: kept close to the heartbeat timeout, since a shorter one deposes healthy leaders of a loaded machine in the middle of large commits",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.Coord.RaftLeaderLeaseTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.Coord.RaftLeaderLeaseTimeout.Milliseconds(), 10) },
	},
	"unclean.leader.election.enable": {
		doc: keyDoc{
			section: "Controller", allowed: "true, false",
			meaning: "elects a replica outside the ISR when no in-sync replica is live; per topic too",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.UncleanLeaderElection, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.UncleanLeaderElection) },
	},
	"auto.leader.rebalance.enable": {
		doc: keyDoc{
			section: "Controller", allowed: "true, false",
			meaning: "moves leaderships back to the preferred replicas",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.AutoLeaderRebalance, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.AutoLeaderRebalance) },
	},
	"leader.imbalance.check.interval.seconds": {
		doc: keyDoc{
			section: "Controller", allowed: "≥ 1",
			meaning: "how often the controller checks the leaders' balance",
		},
		set: func(c *Config, k, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return fmt.Errorf("%s %q: must be an integer number of seconds", k, v)
			}
			c.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(int64(c.LeaderImbalanceCheckInterval/time.Second), 10) },
	},
	"leader.imbalance.per.broker.percentage": {
		doc: keyDoc{
			section: "Controller", allowed: "0 .. 100",
			meaning: "the share of a broker's partitions not led by their preferred replica that starts a rebalance",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.LeaderImbalancePerBrokerPercentage, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.LeaderImbalancePerBrokerPercentage)) },
	},
	"default.replication.factor": {
		doc: keyDoc{
			section: "Controller", allowed: "1 .. 32767",
			meaning: "replicas of an auto-created topic, and of a CreateTopics asking for the default",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.DefaultReplicationFactor, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.DefaultReplicationFactor)) },
	},
	"broker.crash.probe.interval.ms": {
		doc: keyDoc{
			section: "Controller", allowed: "0 (off) .. 60000",
			meaning: "tripod's own: how often the controller probes the brokers; 0 turns off the probes that fence a crashed broker, whose port refuses connections, before its session expires ([architecture](architecture.md#crashed-processes-told-from-slow-ones-crash-probes))",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.BrokerProbeInterval, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.BrokerProbeInterval.Milliseconds(), 10) },
	},
	"controller.socket.timeout.ms": {
		doc: keyDoc{
			section: "Controller", allowed: "100 .. 900000",
			meaning: "how long a controller request may take before it is sent again",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ControllerSocketTimeout, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ControllerSocketTimeout.Milliseconds(), 10) },
	},
	"replica.lag.time.max.ms": {
		doc: keyDoc{
			section: "Replication", allowed: "≥ 1",
			meaning: "how long a follower may fail to catch up before it leaves the ISR",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ReplicaLagTimeMax, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ReplicaLagTimeMax.Milliseconds(), 10) },
	},
	"min.insync.replicas": {
		doc: keyDoc{
			section: "Replication", allowed: "≥ 1",
			meaning: "the ISR size an acks=all produce needs; per topic too",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.MinInsyncReplicas, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.MinInsyncReplicas)) },
	},
	"replication.truncation": {
		doc: keyDoc{
			section: "Replication", allowed: "`fetch`, `epoch`, `hw`",
			meaning: "how a new follower truncates: where its first fetch's answer says its log parts from the leader's (Kafka since 2.7), to the leader epoch's end asked first (KIP-101), or to its own high watermark",
		},
		set: func(c *Config, k, v string) error { c.ReplicationTruncation = v; return nil },
		get: func(c Config) string { return c.ReplicationTruncation },
	},
	"replica.fetch.wait.max.ms": {
		doc: keyDoc{
			section: "Replication", allowed: "≥ 1, below `replica.lag.time.max.ms`",
			meaning: "how long a follower's fetch waits at the leader for records",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ReplicaFetchWaitMax, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ReplicaFetchWaitMax.Milliseconds(), 10) },
	},
	"num.replica.fetchers": int32Key(func(c *Config) *int32 { return &c.NumReplicaFetchers }).documented(keyDoc{
		section: "Replication", allowed: "1 .. 64",
		meaning: "fetchers per leader, each with its own connection and fetch session, partitions shared out by Kafka's hash",
	}),
	"replica.fetch.min.bytes": {
		doc: keyDoc{
			section: "Replication", allowed: "1 .. 2147483647",
			meaning: "bytes a follower's fetch waits for",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.ReplicaFetchMinBytes, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.ReplicaFetchMinBytes)) },
	},
	"replication.quota.window.num": int32Key(func(c *Config) *int32 { return &c.ReplicationQuotaWindowNum }).documented(keyDoc{
		section: "Replication throttle sampling", allowed: "≥ 1",
		meaning: "samples over which a throttled rate is measured",
	}),
	"replication.quota.window.size.seconds": {
		doc: keyDoc{
			section: "Replication throttle sampling", allowed: "whole seconds, ≥ 1",
			meaning: "the length of one sample",
		},
		set: func(c *Config, k, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return fmt.Errorf("%s %q: must be a whole number of seconds", k, v)
			}
			c.ReplicationQuotaWindowSize = time.Duration(n) * time.Second
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(int64(c.ReplicationQuotaWindowSize/time.Second), 10) },
	},
	"quota.window.num": int32Key(func(c *Config) *int32 { return &c.QuotaWindowNum }).documented(keyDoc{
		section: "Client quotas", allowed: "≥ 1",
		meaning: "samples over which a client quota's rate is measured",
	}),
	"quota.window.size.seconds": {
		doc: keyDoc{
			section: "Client quotas", allowed: "whole seconds, ≥ 1",
			meaning: "the length of one client quota sample",
		},
		set: func(c *Config, k, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return fmt.Errorf("%s %q: must be a whole number of seconds", k, v)
			}
			c.QuotaWindowSize = time.Duration(n) * time.Second
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(int64(c.QuotaWindowSize/time.Second), 10) },
	},
	"controller.quota.window.num": int32Key(func(c *Config) *int32 { return &c.ControllerQuotaWindowNum }).documented(keyDoc{
		section: "Client quotas", allowed: "≥ 1",
		meaning: "samples of a controller_mutation_rate quota: its burst is the quota × this × controller.quota.window.size.seconds",
	}),
	"controller.quota.window.size.seconds": {
		doc: keyDoc{
			section: "Client quotas", allowed: "whole seconds, ≥ 1",
			meaning: "the length of one controller_mutation_rate sample",
		},
		set: func(c *Config, k, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return fmt.Errorf("%s %q: must be a whole number of seconds", k, v)
			}
			c.ControllerQuotaWindowSize = time.Duration(n) * time.Second
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(int64(c.ControllerQuotaWindowSize/time.Second), 10) },
	},
	"replica.fetch.max.bytes": {
		doc: keyDoc{
			section: "Replication", allowed: "1 .. 2147483647",
			meaning: "bytes a follower's fetch asks for per partition",
		},
		set: func(c *Config, k, v string) error { return setInt32(&c.ReplicaFetchMaxBytes, k, v) },
		get: func(c Config) string { return strconv.Itoa(int(c.ReplicaFetchMaxBytes)) },
	},
	"replica.fetch.backoff.ms": {
		doc: keyDoc{
			section: "Replication", allowed: "≥ 1",
			meaning: "how long a follower waits after a failed fetch",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ReplicaFetchBackoff, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ReplicaFetchBackoff.Milliseconds(), 10) },
	},
	"replica.high.watermark.checkpoint.interval.ms": {
		doc: keyDoc{
			section: "Replication", allowed: "≥ 1",
			meaning: "how often each log dir's `replication-offset-checkpoint` is written",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ReplicaHighWatermarkCheckpointInterval, k, v) },
		get: func(c Config) string {
			return strconv.FormatInt(c.ReplicaHighWatermarkCheckpointInterval.Milliseconds(), 10)
		},
	},
	"producer.id.expiration.ms": {
		doc: keyDoc{
			section: "Idempotent producers", allowed: "≥ 1",
			meaning: "a partition forgets a producer whose last batch is older",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ProducerIDExpiration, k, v) },
		get: func(c Config) string { return strconv.FormatInt(c.ProducerIDExpiration.Milliseconds(), 10) },
	},
	"producer.id.expiration.check.interval.ms": {
		doc: keyDoc{
			section: "Idempotent producers", allowed: "≥ 1",
			meaning: "how often partitions look for expired producers",
		},
		set: func(c *Config, k, v string) error { return setMillis(&c.ProducerIDExpirationCheckInterval, k, v) },
		get: func(c Config) string {
			return strconv.FormatInt(c.ProducerIDExpirationCheckInterval.Milliseconds(), 10)
		},
	},
	"controlled.shutdown.enable": {
		doc: keyDoc{
			section: "Controller", allowed: "true, false",
			meaning: "on SIGTERM a broker asks the controller to move its leaderships (ControlledShutdown) before it stops",
		},
		set: func(c *Config, k, v string) error { return setBool(&c.ControlledShutdown, k, v) },
		get: func(c Config) string { return strconv.FormatBool(c.ControlledShutdown) },
	},
}

// listenerPrefix starts a per-listener property,
// listener.name.<listener>.<key>.
const listenerPrefix = security.ListenerPrefix

// Set sets one property by its Kafka name, or a listener's ssl.* or SASL
// property by listener.name.<lower-cased listener name>.<key>. An unknown
// key or a value that does not parse is an error naming the key; ranges
// and relations are checked by Validate.
func (c *Config) Set(key, value string) error {
	if strings.HasPrefix(key, listenerPrefix) {
		return c.setListenerOverride(key, strings.TrimSpace(value))
	}
	k, ok := brokerKeys[key]
	if !ok {
		if kafkaOnlyKeys[key] {
			return fmt.Errorf("%w: %s", ErrNoEffect, key)
		}
		return fmt.Errorf("unknown broker property %q (known: %s, and %s<listener>.<ssl or sasl key>)", key, strings.Join(BrokerKeys(), ", "), listenerPrefix)
	}
	return k.set(c, key, strings.TrimSpace(value))
}

// splitListenerKey splits listener.name.<listener>.<key>.
func splitListenerKey(key string) (listener, sub string, err error) {
	listener, sub, ok := strings.Cut(strings.TrimPrefix(key, listenerPrefix), ".")
	if !ok || listener == "" || !listenerNamePattern.MatchString(listener) {
		return "", "", fmt.Errorf("%s: must be %s<listener>.<key>", key, listenerPrefix)
	}
	if _, ok := security.SSLKeys[sub]; !ok && security.SASLListenerKeys[sub] == nil {
		known := slices.Concat(slices.Collect(maps.Keys(security.SSLKeys)), slices.Collect(maps.Keys(security.SASLListenerKeys)))
		slices.Sort(known)
		return "", "", fmt.Errorf("%s: %q cannot be set per listener (allowed: %s)", key, sub, strings.Join(known, ", "))
	}
	if listener != strings.ToLower(listener) {
		return "", "", fmt.Errorf("%s: the listener name must be lower case, listener.name.%s.%s", key, strings.ToLower(listener), sub)
	}
	return listener, sub, nil
}

// setListenerOverride records one listener.name.<listener>.<key>. The
// maps are copied, not changed, as copies of a Config share them.
func (c *Config) setListenerOverride(key, value string) error {
	listener, sub, err := splitListenerKey(key)
	if err != nil {
		return err
	}
	if check, ok := security.SASLListenerKeys[sub]; ok {
		if err := check(key, value); err != nil {
			return err
		}
	} else {
		var probe security.SSLConfig
		if err := security.SSLKeys[sub].Set(&probe, key, value); err != nil {
			return err
		}
	}
	overrides := maps.Clone(c.ListenerOverrides)
	if overrides == nil {
		overrides = map[string]map[string]string{}
	}
	inner := maps.Clone(overrides[listener])
	if inner == nil {
		inner = map[string]string{}
	}
	inner[sub] = value
	overrides[listener] = inner
	c.ListenerOverrides = overrides
	return nil
}

// ErrNoEffect is what Set returns for a Kafka broker property that tripod
// accepts but does not act on (a stock server.properties sets several:
// num.network.threads, num.io.threads, ...). The Config is unchanged;
// callers warn and go on.
var ErrNoEffect = errors.New("kafka broker property has no effect in tripod")

// coordSensitiveKeys are the coordination backend's passwords: never
// logged, and not shown by DescribeConfigs.
var coordSensitiveKeys = map[string]bool{
	"zookeeper.digest.password": true,
	"etcd.password":             true,
}

// kafkaOnlyKeys are Kafka broker properties that tripod accepts with a
// warning: thread pools, socket buffers and the settings of subsystems
// tripod does not have (yet), among them every key of Kafka's stock
// config/server.properties.
var kafkaOnlyKeys = map[string]bool{
	"num.network.threads":                      true,
	"num.io.threads":                           true,
	"num.recovery.threads.per.data.dir":        true,
	"background.threads":                       true,
	"queued.max.requests":                      true,
	"socket.send.buffer.bytes":                 true,
	"socket.receive.buffer.bytes":              true,
	"replica.socket.timeout.ms":                true,
	"replica.socket.receive.buffer.bytes":      true,
	"zookeeper.connection.timeout.ms":          true,
	"zookeeper.max.in.flight.requests":         true,
	"transaction.state.log.replication.factor": true,
	"transaction.state.log.min.isr":            true,
	"transaction.state.log.num.partitions":     true,
	"log.cleaner.threads":                      true,
	"log.cleanup.policy":                       true,
	"log.message.format.version":               true,
	"inter.broker.protocol.version":            true,
	"compression.type":                         true,
	"delete.topic.enable":                      true,
	"process.roles":                            true,
	"node.id":                                  true,
	"controller.quorum.voters":                 true,
	"controller.quorum.bootstrap.servers":      true,
	// Settings of Java's TLS that PEM keystores and Go's crypto/tls do
	// without.
	"ssl.keystore.password":                            true,
	"ssl.truststore.password":                          true,
	"ssl.protocol":                                     true,
	"ssl.provider":                                     true,
	"ssl.keymanager.algorithm":                         true,
	"ssl.trustmanager.algorithm":                       true,
	"ssl.secure.random.implementation":                 true,
	"ssl.engine.factory.class":                         true,
	"ssl.allow.dn.changes":                             true,
	"ssl.allow.san.changes":                            true,
	"metadata.log.dir":                                 true,
	"share.coordinator.state.topic.replication.factor": true,
	"share.coordinator.state.topic.min.isr":            true,
}

// Get returns one property's current value by its Kafka name (a
// listener.name.<listener>.<key> only if set).
func (c Config) Get(key string) (string, bool) {
	if strings.HasPrefix(key, listenerPrefix) {
		listener, sub, err := splitListenerKey(key)
		if err != nil {
			return "", false
		}
		v, ok := c.ListenerOverrides[listener][sub]
		return v, ok
	}
	k, ok := brokerKeys[key]
	if !ok {
		return "", false
	}
	return k.get(c), true
}

// BrokerKeys lists the property names Set accepts, sorted.
func BrokerKeys() []string {
	keys := make([]string, 0, len(brokerKeys))
	for k := range brokerKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setConnectionOverrides parses max.connections.per.ip.overrides:
// "host:N,host:N", each host an IP address (IPv6 ones may be written in
// brackets) and each N 0 .. 2147483647.
func setConnectionOverrides(dst *map[string]int32, key, value string) error {
	out := map[string]int32{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return fmt.Errorf("%s %q: %q must be host:N", key, value, item)
		}
		host := strings.Trim(item[:i], "[]")
		ip := net.ParseIP(host)
		if ip == nil {
			return fmt.Errorf("%s %q: host %q must be an IP address", key, value, host)
		}
		n, err := strconv.ParseInt(item[i+1:], 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%s %q: limit %q of %s must be an integer between 0 and 2147483647", key, value, item[i+1:], host)
		}
		out[ip.String()] = int32(n)
	}
	*dst = out
	return nil
}

// formatConnectionOverrides is the inverse of setConnectionOverrides,
// sorted by host.
func formatConnectionOverrides(m map[string]int32) string {
	items := make([]string, 0, len(m))
	for host, n := range m {
		items = append(items, net.JoinHostPort(host, strconv.Itoa(int(n))))
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

// int32Key is the configKey of an int32 property.
func int32Key(field func(*Config) *int32) configKey {
	return configKey{
		set: func(c *Config, k, v string) error { return setInt32(field(c), k, v) },
		get: func(c Config) string { return strconv.Itoa(int(*field(&c))) },
	}
}

// millisKey is the configKey of a property in milliseconds.
func millisKey(field func(*Config) *time.Duration) configKey {
	return configKey{
		set: func(c *Config, k, v string) error { return setMillis(field(c), k, v) },
		get: func(c Config) string { return strconv.FormatInt(field(&c).Milliseconds(), 10) },
	}
}

func setInt32(dst *int32, key, value string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return fmt.Errorf("%s %q: must be an integer between -2147483648 and 2147483647", key, value)
	}
	*dst = int32(n)
	return nil
}

func setInt64(dst *int64, key, value string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q: must be a 64-bit integer", key, value)
	}
	*dst = n
	return nil
}

func setMillis(dst *time.Duration, key, value string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n > math.MaxInt64/int64(time.Millisecond) || n < math.MinInt64/int64(time.Millisecond) {
		return fmt.Errorf("%s %q: must be an integer number of milliseconds", key, value)
	}
	*dst = time.Duration(n) * time.Millisecond
	return nil
}

func setBool(dst *bool, key, value string) error {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return fmt.Errorf("%s %q: must be true or false", key, value)
	}
	return nil
}

// LogConfig is the replication/log configuration of a topic: the broker's
// log.* defaults overridden by the topic's own configs (already validated).
func (c Config) LogConfig(topicConfigs map[string]string) tlog.Config {
	lc := tlog.DefaultConfig()
	lc.SegmentBytes = c.LogSegmentBytes
	lc.RollTime = c.LogRoll
	lc.RetentionBytes = c.LogRetentionBytes
	lc.RetentionTime = c.LogRetention
	lc.FlushMessages = c.LogFlushIntervalMessages
	lc.FlushInterval = c.LogFlushInterval
	lc.WritebackBytes = c.LogWritebackBytes
	// millis is a topic's time in milliseconds, Kafka's Long.MAX_VALUE
	// ("never") and anything past time.Duration's range capped at it.
	millis := func(n int64) time.Duration {
		if n > math.MaxInt64/int64(time.Millisecond) {
			return math.MaxInt64
		}
		return time.Duration(n) * time.Millisecond
	}
	for k, v := range topicConfigs {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "segment.bytes":
			lc.SegmentBytes = n
		case "segment.ms":
			lc.RollTime = millis(n)
		case "retention.bytes":
			lc.RetentionBytes = n
		case "retention.ms":
			lc.RetentionTime = millis(n)
			if n < 0 {
				lc.RetentionTime = time.Duration(n) * time.Millisecond
			}
		case "flush.messages":
			lc.FlushMessages = n
		case "flush.ms":
			// Kafka's meanings: 0 syncs every batch, Long.MAX_VALUE never.
			switch {
			case n == 0:
				lc.FlushMessages, lc.FlushInterval = 1, 0
			case millis(n) == math.MaxInt64:
				lc.FlushInterval = 0
			default:
				lc.FlushInterval = millis(n)
			}
		case "index.interval.bytes":
			lc.IndexIntervalBytes = n
		}
	}
	// Only "delete" in cleanup.policy deletes segments by age and size;
	// a topic that is only compacted keeps them.
	if compact, del := CleanupPolicy(topicConfigs); compact && !del {
		lc.RetentionTime, lc.RetentionBytes = -1, -1
	}
	return lc
}

// CleanupPolicy reports which of compact and delete a topic's
// cleanup.policy (already validated; default delete) holds.
func CleanupPolicy(topicConfigs map[string]string) (compact, del bool) {
	v, ok := topicConfigs["cleanup.policy"]
	if !ok {
		return false, true
	}
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "delete":
			del = true
		}
	}
	return compact, del
}

// CleanConfig is the compaction configuration of a topic: Kafka's
// defaults (declared by replication/log), the broker's dedupe buffer and
// the topic's delete.retention.ms, min.cleanable.dirty.ratio,
// min.compaction.lag.ms and max.compaction.lag.ms (already validated).
func (c Config) CleanConfig(topicConfigs map[string]string) tlog.CleanConfig {
	cc := tlog.DefaultCleanConfig()
	cc.DedupeBufferSize = c.LogCleanerDedupeBufferSize
	millis := func(n int64) time.Duration {
		if n > math.MaxInt64/int64(time.Millisecond) {
			return math.MaxInt64
		}
		return time.Duration(n) * time.Millisecond
	}
	for k, v := range topicConfigs {
		if k == "min.cleanable.dirty.ratio" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				cc.MinCleanableDirtyRatio = f
			}
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "delete.retention.ms":
			cc.DeleteRetention = millis(n)
		case "min.compaction.lag.ms":
			cc.MinCompactionLag = millis(n)
		case "max.compaction.lag.ms":
			cc.MaxCompactionLag = millis(n)
		}
	}
	return cc
}

// ControllerConfig is the configuration of the controller this broker
// runs when it wins the election, logging to logger.
func (c Config) ControllerConfig(logger hclog.Logger) controller.Config {
	cc := controller.DefaultConfig()
	cc.UncleanLeaderElection = c.UncleanLeaderElection
	cc.AutoLeaderRebalance = c.AutoLeaderRebalance
	cc.LeaderImbalanceCheckInterval = c.LeaderImbalanceCheckInterval
	cc.LeaderImbalancePerBrokerPercentage = int(c.LeaderImbalancePerBrokerPercentage)
	cc.MaxPartitions = int(c.MaxPartitions)
	cc.MaxBrokerPartitions = int(c.MaxBrokerPartitions)
	cc.Logger = logger
	return cc
}

// GroupConfig is the configuration of the group coordinator's groups.
func (c Config) GroupConfig() group.Config {
	gc := group.DefaultConfig()
	gc.MinSessionTimeout = c.GroupMinSessionTimeout
	gc.MaxSessionTimeout = c.GroupMaxSessionTimeout
	gc.InitialRebalanceDelay = c.GroupInitialRebalanceDelay
	gc.MaxSize = int(c.GroupMaxSize)
	return gc
}

// ConsumerGroupConfig is the configuration of the group coordinator's
// consumer groups of the consumer protocol (KIP-848).
func (c Config) ConsumerGroupConfig() consumer.Config {
	cc := consumer.DefaultConfig()
	cc.SessionTimeout = c.GroupConsumerSessionTimeout
	cc.HeartbeatInterval = c.GroupConsumerHeartbeatInterval
	cc.Assignors = c.GroupConsumerAssignors
	cc.MaxSize = int(c.GroupConsumerMaxSize)
	cc.MigrationPolicy = consumer.MigrationPolicy(c.GroupConsumerMigrationPolicy)
	return cc
}

// validateConsumerGroups checks the consumer group properties: Kafka's
// bounds and relations (GroupCoordinatorConfig), then the consumer
// package's.
func (c Config) validateConsumerGroups() error {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	switch {
	case c.GroupConsumerMinSessionTimeout < time.Millisecond:
		return fmt.Errorf("group.consumer.min.session.timeout.ms %d: must be at least 1", ms(c.GroupConsumerMinSessionTimeout))
	case c.GroupConsumerMaxSessionTimeout < c.GroupConsumerMinSessionTimeout:
		return fmt.Errorf("group.consumer.max.session.timeout.ms %d: must be at least group.consumer.min.session.timeout.ms (%d)",
			ms(c.GroupConsumerMaxSessionTimeout), ms(c.GroupConsumerMinSessionTimeout))
	case c.GroupConsumerSessionTimeout < c.GroupConsumerMinSessionTimeout || c.GroupConsumerSessionTimeout > c.GroupConsumerMaxSessionTimeout:
		return fmt.Errorf("group.consumer.session.timeout.ms %d: must be between group.consumer.min.session.timeout.ms (%d) and group.consumer.max.session.timeout.ms (%d)",
			ms(c.GroupConsumerSessionTimeout), ms(c.GroupConsumerMinSessionTimeout), ms(c.GroupConsumerMaxSessionTimeout))
	case c.GroupConsumerMinHeartbeatInterval < time.Millisecond:
		return fmt.Errorf("group.consumer.min.heartbeat.interval.ms %d: must be at least 1", ms(c.GroupConsumerMinHeartbeatInterval))
	case c.GroupConsumerMaxHeartbeatInterval < c.GroupConsumerMinHeartbeatInterval:
		return fmt.Errorf("group.consumer.max.heartbeat.interval.ms %d: must be at least group.consumer.min.heartbeat.interval.ms (%d)",
			ms(c.GroupConsumerMaxHeartbeatInterval), ms(c.GroupConsumerMinHeartbeatInterval))
	case c.GroupConsumerHeartbeatInterval < c.GroupConsumerMinHeartbeatInterval || c.GroupConsumerHeartbeatInterval > c.GroupConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %d: must be between group.consumer.min.heartbeat.interval.ms (%d) and group.consumer.max.heartbeat.interval.ms (%d)",
			ms(c.GroupConsumerHeartbeatInterval), ms(c.GroupConsumerMinHeartbeatInterval), ms(c.GroupConsumerMaxHeartbeatInterval))
	case c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %d: must be below group.consumer.session.timeout.ms (%d)",
			ms(c.GroupConsumerHeartbeatInterval), ms(c.GroupConsumerSessionTimeout))
	}
	return c.ConsumerGroupConfig().Validate()
}

// ReplicationConfig is the replication configuration of a topic: the
// broker's defaults overridden by the topic's min.insync.replicas.
func (c Config) ReplicationConfig(topicConfigs map[string]string) replication.Config {
	rc := replication.DefaultConfig()
	rc.ReplicaLagTimeMax = c.ReplicaLagTimeMax
	rc.MinInsyncReplicas = int(c.MinInsyncReplicas)
	rc.Truncation = replication.TruncationMode(c.ReplicationTruncation)
	if v, ok := topicConfigs["min.insync.replicas"]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 1 {
			rc.MinInsyncReplicas = int(n)
		}
	}
	return rc
}

// Property is one "key=value" of a properties file, with the line it
// ends on.
type Property struct {
	Key, Value string
	Line       int
}

// ParseProperties reads a Java properties file (Kafka's server.properties
// format): "key=value", "key:value" or "key value" lines, '#' and '!'
// comments, backslash line continuations and escapes. The properties come
// in file order, a key repeated as often as it is written, so that
// applying them in order gives what Java gives: the later line wins.
func ParseProperties(r io.Reader) ([]Property, error) {
	var props []Property
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	lineNo := 0
	var logical strings.Builder
	add := func() error {
		key, value, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		props = append(props, Property{Key: key, Value: value, Line: lineNo})
		return nil
	}
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeftFunc(sc.Text(), unicode.IsSpace)
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		// A line ending in an odd number of backslashes continues.
		trailing := len(line) - len(strings.TrimRight(line, "\\"))
		if trailing%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		if err := add(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read properties: %w", err)
	}
	if logical.Len() > 0 {
		if err := add(); err != nil {
			return nil, err
		}
	}
	return props, nil
}

// splitProperty splits one logical properties line into an unescaped key
// and value.
func splitProperty(line string) (string, string, error) {
	var key strings.Builder
	i := 0
	for ; i < len(line); i++ {
		ch := line[i]
		if ch == '\\' && i+1 < len(line) {
			i++
			key.WriteByte(unescape(line[i]))
			continue
		}
		if ch == '=' || ch == ':' || ch == ' ' || ch == '\t' || ch == '\f' {
			break
		}
		key.WriteByte(ch)
	}
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	var value strings.Builder
	for j := 0; j < len(rest); j++ {
		if rest[j] == '\\' && j+1 < len(rest) {
			j++
			value.WriteByte(unescape(rest[j]))
			continue
		}
		value.WriteByte(rest[j])
	}
	if key.Len() == 0 {
		return "", "", fmt.Errorf("empty key in %q", line)
	}
	return key.String(), strings.TrimRight(value.String(), " \t"), nil
}

func unescape(ch byte) byte {
	switch ch {
	case 't':
		return '\t'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 'f':
		return '\f'
	}
	return ch
}

// RackAwareReplicaSelector is Kafka's rack-aware replica selector class,
// the one value of replica.selector.class besides empty.
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// setReplicaSelector sets replica.selector.class: empty or Kafka's
// RackAwareReplicaSelector; tripod runs no Java class, so any other is
// refused.
func setReplicaSelector(dst *string, k, v string) error {
	if v != "" && v != RackAwareReplicaSelector {
		return fmt.Errorf("%s %q: must be empty or %s", k, v, RackAwareReplicaSelector)
	}
	*dst = v
	return nil
}

// setRack sets broker.rack. Kafka takes any string; one with control
// characters is refused, since it could not be stored in a znode's JSON
// readably, nor printed on a broker line, and cannot be a zone's name.
func setRack(dst *string, k, v string) error {
	if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
		return fmt.Errorf("%s %q: must be a UTF-8 string without control characters", k, v)
	}
	*dst = v
	return nil
}
