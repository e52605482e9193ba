package replica

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// Partition is one replica this broker holds: its log, its replication
// state (which alone holds its leader, leader epoch, replicas and ISR), and
// the fetches waiting for it to grow.
type Partition struct {
	topic   string
	index   int32
	topicID [16]byte
	// dir is the log's directory.
	dir string
	log *tlog.Log
	// configs are the topic's config overrides, as last applied
	// (setConfigs); cfg is the broker config they were applied over (its
	// dynamic broker configs included), shared by every replica it was
	// applied to and never changed. leaderThrottled and
	// followerThrottled say whether the topic's throttled replicas
	// configs name this replica; throttleSeen is its manager's
	// followerThrottleSeen, set with the first followerThrottled.
	configs           atomic.Pointer[map[string]string]
	cfg               atomic.Pointer[config.Config]
	leaderThrottled   atomic.Bool
	followerThrottled atomic.Bool
	throttleSeen      *atomic.Bool

	// appendMu serialises appends, truncations and role changes of the
	// log, so that offsets and the wake-ups that follow them happen in
	// order and a fetcher never appends across a role change. It is
	// taken before repMu.
	appendMu sync.Mutex
	// followGen counts role changes (guarded by appendMu): a fetcher's
	// response for an older generation is dropped.
	followGen uint64
	// producers is the idempotent producers' state (guarded by
	// appendMu), kept by leader and followers alike so that a new leader
	// recognises a retried batch.
	producers *replication.Producers
	// producersLoad is how the latest RecoverProducers rebuilt producers
	// (guarded by appendMu): from which snapshot, reading which offsets.
	producersLoad tlog.ProducerLoad

	// repMu guards rep and acks.
	repMu sync.Mutex
	// rep is the partition's replication state machine: the one holder of
	// its role, leader, leader epoch, partition epoch, replicas and ISR
	// (role reads them).
	rep *replication.Partition
	// acks are the acks=all produces waiting for the high watermark, by
	// the id given to rep.Await.
	// Like deletes, it is nil while empty, so that an idle partition
	// holds no map.
	acks   map[replication.AckID]chan error
	nextID replication.AckID
	// deletes are the DeleteRecords waiting for the low watermark, by the
	// id given to rep.AwaitLowWatermark.
	deletes      map[replication.DeleteID]chan replication.DeleteResult
	nextDeleteID replication.DeleteID
	// waitQueued is set while the partition is in the broker's waiting
	// set (queueWait), which the tick loop ticks often.
	waitQueued atomic.Bool

	// hw is the high watermark as of the latest Ready: consumers read
	// below it, fetch responses carry it and the checkpoint stores it.
	hw atomic.Int64
	// unstable is what decides the last stable offset besides hw (the
	// transactions open or ended above the high watermark), published
	// under appendMu by publishTxns after every append and truncation;
	// nil while every transaction is decided.
	unstable atomic.Pointer[replication.Unstable]

	// mu guards waiters, the fetches' wake-up channels (watch), and
	// sessions, the fetch sessions that hold the partition
	// (WatchChanges); both nil until the first.
	mu       sync.Mutex
	waiters  map[chan struct{}]struct{}
	sessions []ChangeWatcher
}

func newPartition(info controller.PartitionInfo, l *tlog.Log, cfg *config.Config, configs map[string]string, self int32, rep *replication.Partition, hw int64, throttleSeen *atomic.Bool) *Partition {
	p := &Partition{topic: info.Topic, index: info.Partition, topicID: info.TopicID, log: l,
		rep: rep, producers: replication.NewProducers(), throttleSeen: throttleSeen}
	p.storeConfigs(cfg, configs, self)
	// A checkpointed high watermark older than a DeleteRecords that moved
	// the log start is raised to it, as Kafka's updateHighWatermark
	// does: the records below the log start were committed.
	p.hw.Store(min(max(hw, l.StartOffset()), l.EndOffset()))
	return p
}

// TopicConfigs returns the topic's config overrides as last applied. The
// caller must not change them.
func (p *Partition) TopicConfigs() map[string]string { return *p.configs.Load() }

// BrokerConfig returns the broker config the topic's configs were last
// applied over. The caller must not change it.
func (p *Partition) BrokerConfig() *config.Config { return p.cfg.Load() }

// Topic is the partition's topic.
func (p *Partition) Topic() string { return p.topic }

// Index is the partition's index in its topic.
func (p *Partition) Index() int32 { return p.index }

// TopicID is the id of the partition's topic.
func (p *Partition) TopicID() [16]byte { return p.topicID }

// Log is the partition's log. Appends go through the replica manager
// (AppendAsLeader, the fetchers), which orders them with the partition's
// role changes; readers read it directly.
func (p *Partition) Log() *tlog.Log { return p.log }

// KnowsProducer reports whether the partition's producer state holds
// producer id: a producer that wrote to it and did not expire.
func (p *Partition) KnowsProducer(id int64) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producers.Knows(id)
}

// TxnOpen reports whether producer id has an open transaction on the
// partition: a batch of it was appended and no marker ended it.
func (p *Partition) TxnOpen(id int64) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producers.Txns().IsOpen(id)
}

// ProducerState returns how the partition's producer state was last
// recovered (from which snapshot, reading which offsets) and how many
// producers it holds.
func (p *Partition) ProducerState() (load tlog.ProducerLoad, producers int) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producersLoad, p.producers.Len()
}

// ActiveProducers returns the idempotent producers the partition's
// producer state holds, with their open transactions (DescribeProducers).
func (p *Partition) ActiveProducers() []replication.ProducerState {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producers.Active()
}

// noConfigs are the configs of a topic without overrides, shared by its
// replicas.
var noConfigs = map[string]string{}

// storeConfigs records configs over cfg (which the caller no longer
// changes) and whether they throttle this replica (broker self).
func (p *Partition) storeConfigs(cfg *config.Config, configs map[string]string, self int32) {
	if configs == nil {
		configs = noConfigs
	}
	p.configs.Store(&configs)
	p.cfg.Store(cfg)
	p.leaderThrottled.Store(config.ThrottledReplicas(configs[config.LeaderThrottledKey], p.index, self))
	throttled := config.ThrottledReplicas(configs[config.FollowerThrottledKey], p.index, self)
	if throttled {
		p.throttleSeen.Store(true)
	}
	p.followerThrottled.Store(throttled)
}

// SetConfigs applies a topic's changed configs, over the broker config
// cfg, to the running replica: its log (segments, retention, flush), its
// replication state (min.insync.replicas) and what produce and the
// cleaner read. Nothing changes if the log or the replication state
// refuses them.
func (p *Partition) SetConfigs(cfg *config.Config, configs map[string]string, self int32) error {
	rc := cfg.ReplicationConfig(configs)
	if err := rc.Validate(); err != nil {
		return err
	}
	if err := p.log.SetConfig(cfg.LogConfig(configs)); err != nil {
		return err
	}
	p.repMu.Lock()
	err := p.rep.SetConfig(rc)
	p.repMu.Unlock()
	if err != nil {
		return err
	}
	p.storeConfigs(cfg, configs, self)
	return nil
}

// Role is a partition's leader, leader epoch, partition epoch,
// replicas and ISR, as its replication state holds them.
type Role struct {
	Leader         coord.BrokerID
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []coord.BrokerID
	ISR            []coord.BrokerID
}

// Role returns the partition's leader, epochs, replicas and ISR from its
// replication state: those of the latest LeaderAndIsr applied, with the
// ISR changes committed since (AlterPartition). Before the first
// LeaderAndIsr the leader is coord.NoBroker and the epochs -1.
func (p *Partition) Role() Role {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return Role{
		Leader:         coord.BrokerID(p.rep.Leader()),
		LeaderEpoch:    p.rep.LeaderEpoch(),
		PartitionEpoch: p.rep.PartitionEpoch(),
		Replicas:       fromReplicaIDs(p.rep.Replicas()),
		ISR:            fromReplicaIDs(p.rep.ISR()),
	}
}

// LeaderEpoch returns the leader epoch of the partition's replication
// state, -1 before the first LeaderAndIsr.
func (p *Partition) LeaderEpoch() int32 {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return p.rep.LeaderEpoch()
}

// Leads reports whether broker id Leads this partition, and at which
// leader epoch.
func (p *Partition) Leads(id coord.BrokerID) (bool, int32) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return coord.BrokerID(p.rep.Leader()) == id, p.rep.LeaderEpoch()
}

// Name is the partition's "topic-index" Name for logs and errors.
func (p *Partition) Name() string { return fmt.Sprintf("%s-%d", p.topic, p.index) }

// HighWatermark is the offset below which consumers may read: the
// minimum log end offset over the ISR, as the replication state machine
// last decided.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// ready takes what p's state machine decided since it was last asked and
// publishes its high watermark; the caller holds p.repMu and passes the
// Ready to Manager.handleReady. Publishing under repMu keeps the high
// watermark in the order the machine decided it, and publishing before
// handleReady answers the acks means a client that reads the partition
// after an acks=all answer sees what was acknowledged.
func (p *Partition) ready() replication.Ready {
	rd := p.rep.Ready()
	if rd.HighWatermarkChanged {
		p.hw.Store(rd.HighWatermark)
	}
	return rd
}

// LastStableOffset is the offset below which every transaction is
// decided (KIP-98): the high watermark, or the first offset of the
// earliest transaction that is open or whose marker the ISR has not all
// replicated, when that is lower; never below the log start offset (an
// open transaction whose first records retention or DeleteRecords
// removed holds it there, as Kafka's UnifiedLog bounds its first
// unstable offset). A read_committed consumer reads below it. It takes
// no lock.
func (p *Partition) LastStableOffset() int64 {
	u := p.unstable.Load()
	hw := p.hw.Load()
	return max(u.LastStable(hw), min(p.log.StartOffset(), hw))
}

// publishTxns forgets the transactions whose marker is below the high
// watermark and publishes what LastStableOffset needs. The caller holds
// p.appendMu.
func (p *Partition) publishTxns() {
	txns := p.producers.Txns()
	txns.HighWatermark(p.hw.Load())
	u := txns.Unstable()
	if u != nil || p.unstable.Load() != nil {
		p.unstable.Store(u)
	}
}

// recordAppended records in the producer state the batches (metas) the
// log just appended from base, adds the aborted-transaction index entries
// of their abort markers to the log and publishes the last stable
// offset's state. The caller holds p.appendMu.
func (p *Partition) recordAppended(metas []replication.BatchMeta, base int64) error {
	var first error
	for _, a := range p.producers.Appended(metas, base) {
		if err := p.log.AppendAbortedTxn(a); err != nil && first == nil {
			first = fmt.Errorf("aborted transaction index entry %+v: %w", a, err)
		}
	}
	p.publishTxns()
	return first
}

// ChangeWatcher is told of every change of the partitions it watches
// (WatchChanges): a fetch session of a client or follower.
type ChangeWatcher interface {
	PartitionChanged(tp coord.TopicPartition)
}

// Watch registers wake to be signalled (non-blocking send on a buffered
// channel) whenever the partition grows, until unwatch.
func (p *Partition) Watch(wake chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = make(map[chan struct{}]struct{})
	}
	p.waiters[wake] = struct{}{}
	p.mu.Unlock()
}

// WaitingFetches returns how many fetches wait for the partition to grow
// (Watch).
func (p *Partition) WaitingFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// Unwatch removes a channel registered with Watch.
func (p *Partition) Unwatch(wake chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, wake)
	p.mu.Unlock()
}

// WatchChanges makes every change of the partition (wakeAll) known to
// sess, until UnwatchChanges.
func (p *Partition) WatchChanges(sess ChangeWatcher) {
	p.mu.Lock()
	p.sessions = append(p.sessions, sess)
	p.mu.Unlock()
}

// UnwatchChanges removes a session registered with WatchChanges.
func (p *Partition) UnwatchChanges(sess ChangeWatcher) {
	p.mu.Lock()
	if i := slices.Index(p.sessions, sess); i >= 0 {
		p.sessions = slices.Delete(p.sessions, i, i+1)
	}
	if len(p.sessions) == 0 {
		p.sessions = nil
	}
	p.mu.Unlock()
}

// wakeAll signals every registered waiter and tells every fetch session
// holding the partition that it changed: it grew, its high watermark or
// log start moved, its role changed or it went away.
func (p *Partition) wakeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	if len(p.sessions) > 0 {
		tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
		for _, sess := range p.sessions {
			sess.PartitionChanged(tp)
		}
	}
}
