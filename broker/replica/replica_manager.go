package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// Manager owns the partitions this broker holds: their logs and the
// log dirs they live in, their roles (applied from the controller's
// LeaderAndIsr, StopReplica and UpdateMetadata, whose acceptance it
// decides), the fetchers that copy the partitions it follows, the ISR
// changes it reports for those it leads, the acks=all produces and
// DeleteRecords waiting on them, the high watermark checkpoints, the
// producer snapshots, retention and the log cleaner. A partition's leader,
// epoch and ISR are held once, by its replication.Partition.
//
// Its dependencies on the rest of the broker are the fields below the
// line "dependencies", set by NewManager (from Deps) and not changed
// after:
//
//   - cfg, the broker's configuration, and dyn, the dynamic configs
//     (Configs): the live config (CurrentConfig), the topics' configs
//     the config watch delivers (WatchedTopicConfigs) and the
//     registration of a new replica for dynamic config changes
//     (AddReplica);
//   - logger and metrics (Metrics: Throttled, ISRChanged);
//   - backend, to load the topic configs a LeaderAndIsr does not carry;
//   - cache, the metadata cache (Metadata) an UpdateMetadata
//     updates and whose brokers the fetchers reach;
//   - member, the cluster membership (Membership): the broker
//     epoch (CurrentEpoch, CheckBrokerEpoch), the controllers
//     (Controller, BackendController, AskController) and the clients of
//     peers (PeerAddr, PeerClient);
//   - roleChanged and resign, the coordinators' callbacks for a
//     partition whose role changed or that went away (the group
//     coordinator's __consumer_offsets, the transaction coordinator's
//     __transaction_state);
//   - followerQuota, the follower replication throttle;
//   - closing, closed when the broker closes: the loops return on it.
//
// Lock order: stateMu before replicasMu before a partition's appendMu
// before its repMu; waitMu before a partition's repMu. stateMu is held
// for the whole application of a controller request (LeaderAndIsr,
// StopReplica, UpdateMetadata) and while offline replicas are closed, so
// that two never interleave.
type Manager struct {
	// replicasMu guards replicas: the partitions this broker holds.
	replicasMu sync.RWMutex
	replicas   map[coord.TopicPartition]*Partition

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
	hwCkpt   *HWCheckpoints
	// followerThrottleSeen is set once any replica of this broker is a
	// throttled follower (follower.replication.throttled.replicas); until
	// then the fetchers need not look for one (fetcher.run's fast
	// rounds).
	followerThrottleSeen atomic.Bool
	// files is the pool through which every log of the broker opens its
	// segment files (log.open.files.max).
	files *tlog.FilePool
	// logDirs are the log dirs: their locks, the ones gone offline and
	// the replicas offline until restart (logdirs.go); its Failed wakes
	// logDirLoop.
	logDirs *LogDirs
	// waitMu guards waiting, the partitions with acks=all produces or
	// DeleteRecords waiting (queueWait), which tickLoop ticks every
	// interval; it is taken before a partition's repMu.
	waitMu  sync.Mutex
	waiting map[*Partition]struct{}

	// openReplicaHook, if not nil, is called at the start of each
	// openReplica with whether the fetchers are held: tests block it to
	// hold a LeaderAndIsr in its log opens (SetOpenReplicaHook). It is
	// nil in production; it is set with stateMu held.
	openReplicaHook func(tp coord.TopicPartition, fetchersHeld bool)

	// deleter removes the directories of deleted logs in the
	// background (deleter.go).
	deleter *dirDeleter

	// wg counts the loops Start starts; Close waits for them.
	wg sync.WaitGroup

	// dependencies
	cfg           *config.Config
	dyn           Configs
	logger        hclog.Logger
	metrics       Metrics
	backend       coord.Backend
	cache         Metadata
	member        Membership
	roleChanged   func(p *Partition)
	resign        func(tp coord.TopicPartition)
	topicsDeleted func(topics []string)
	followerQuota *Quota
	closing       <-chan struct{}
}

// Deps are the replica manager's dependencies on the rest of the
// broker (see Manager). TopicsDeleted, if set, is told of the topics an
// UpdateMetadata request says were deleted, with stateMu held (as
// RoleChanged is).
type Deps struct {
	Configs       Configs
	Logger        hclog.Logger
	Metrics       Metrics
	Backend       coord.Backend
	Metadata      Metadata
	Membership    Membership
	RoleChanged   func(p *Partition)
	Resign        func(tp coord.TopicPartition)
	TopicsDeleted func(topics []string)
	FollowerQuota *Quota
	// Closing is closed when the broker closes: the manager's loops and
	// fetchers end on it, and Close may then be called.
	Closing <-chan struct{}
}

// NewManager returns the replica manager of a broker configured by cfg
// (which the caller no longer changes), holding logDirs (locked by
// OpenLogDirs) and the high watermarks hwCkpt read from them. It opens
// no partition: the controller's LeaderAndIsr does. Start starts its
// loops.
func NewManager(cfg *config.Config, logDirs *LogDirs, hwCkpt *HWCheckpoints, d Deps) *Manager {
	m := &Manager{
		replicas:      make(map[coord.TopicPartition]*Partition),
		controllerID:  coord.NoBroker,
		waiting:       map[*Partition]struct{}{},
		hwCkpt:        hwCkpt,
		files:         tlog.NewFilePool(int(cfg.LogOpenFilesMax)),
		logDirs:       logDirs,
		cfg:           cfg,
		dyn:           d.Configs,
		logger:        d.Logger,
		metrics:       d.Metrics,
		backend:       d.Backend,
		cache:         d.Metadata,
		member:        d.Membership,
		roleChanged:   d.RoleChanged,
		resign:        d.Resign,
		topicsDeleted: d.TopicsDeleted,
		followerQuota: d.FollowerQuota,
		closing:       d.Closing,
	}
	m.fetchers = newFetcherManager(m)
	m.isr = newISRSender(m)
	m.deleter = newDirDeleter(m.logger)
	return m
}

// Start starts the manager's loops: the log dir failure reports, the
// background maintenance (retention, checkpoints, producer expiry,
// flushes), the ticks of waiting produces, the ISR reports, the removal
// of deleted logs (those an earlier run left first) and, with
// log.cleaner.enable, the log cleaner. They end when Closing closes.
func (m *Manager) Start() {
	deleter := func() {
		m.deleter.findLeftovers(m.logDirs.Online())
		m.deleter.run(m.closing)
	}
	loops := []func(){m.logDirLoop, m.backgroundLoop, m.tickLoop, m.isr.run, deleter}
	if m.cfg.LogCleanerEnable {
		loops = append(loops, m.cleanerLoop)
	}
	m.wg.Add(len(loops))
	for _, loop := range loops {
		go func() {
			defer m.wg.Done()
			loop()
		}()
	}
}

// Close, once Closing is closed and no request reaches the manager any
// more, waits for its loops, stops its fetchers, writes the high
// watermark checkpoint, writes the producer snapshots and closes every
// log, and unlocks the log dirs.
func (m *Manager) Close() error {
	m.wg.Wait()
	m.fetchers.close()
	if err := m.WriteHWCheckpoints(true); err != nil {
		m.logger.Error("high watermark checkpoint failed", "error", err)
	}
	err := m.closeLogs()
	m.logDirs.Unlock()
	return err
}

// AcceptedController returns the controller whose requests were last
// accepted (coord.NoBroker before the first) and the highest controller
// epoch accepted.
func (m *Manager) AcceptedController() (coord.BrokerID, int64) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	return m.controllerID, m.controllerEpoch
}

// TryControllerEpoch returns the highest controller epoch accepted, or
// false while a controller request is being applied (it may hold the
// state for as long as it opens logs or truncates).
func (m *Manager) TryControllerEpoch() (int64, bool) {
	if !m.stateMu.TryLock() {
		return 0, false
	}
	defer m.stateMu.Unlock()
	return m.controllerEpoch, true
}

// LogDirs returns the broker's log dirs.
func (m *Manager) LogDirs() *LogDirs { return m.logDirs }

// OpenSegmentFiles returns how many segment files the broker's logs hold
// open (log.open.files.max bounds them).
func (m *Manager) OpenSegmentFiles() int { return m.files.Open() }

// SetOpenReplicaHook makes every replica open of a LeaderAndIsr call
// hook first, with the partition and whether the fetchers are held: a
// test hook, to hold a LeaderAndIsr in its log opens. nil removes it.
func (m *Manager) SetOpenReplicaHook(hook func(tp coord.TopicPartition, fetchersHeld bool)) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	m.openReplicaHook = hook
}

// Partitions returns every open partition.

func (m *Manager) Partitions() []*Partition {
	m.replicasMu.RLock()
	defer m.replicasMu.RUnlock()
	out := make([]*Partition, 0, len(m.replicas))
	for _, p := range m.replicas {
		out = append(out, p)
	}
	return out
}

// PartitionFor returns the replica this broker holds, or nil.
func (m *Manager) PartitionFor(topic string, index int32) *Partition {
	m.replicasMu.RLock()
	defer m.replicasMu.RUnlock()
	return m.replicas[coord.TopicPartition{Topic: topic, Partition: index}]
}

// backgroundLoop enforces retention and closes the segment files idle
// since the last check every log.retention.check.interval.ms, writes the high watermark checkpoint every
// replica.high.watermark.checkpoint.interval.ms, expires idle producers
// and writes producer snapshots every
// producer.id.expiration.check.interval.ms (maintainProducers) and, when
// log.flush.interval.ms is set, flushes the logs on that period.
func (m *Manager) backgroundLoop() {
	retention := time.NewTicker(m.cfg.LogRetentionCheckInterval)
	defer retention.Stop()
	checkpoint := time.NewTicker(m.cfg.ReplicaHighWatermarkCheckpointInterval)
	defer checkpoint.Stop()
	producers := time.NewTicker(m.cfg.ProducerIDExpirationCheckInterval)
	defer producers.Stop()
	var flushC <-chan time.Time
	if m.cfg.LogFlushInterval > 0 {
		flush := time.NewTicker(m.cfg.LogFlushInterval)
		defer flush.Stop()
		flushC = flush.C
	}
	for {
		select {
		case <-m.closing:
			return
		case now := <-retention.C:
			for _, p := range m.Partitions() {
				n, err := p.log.EnforceRetention(now)
				if err != nil && !errors.Is(err, tlog.ErrClosed) {
					m.logger.Error("enforce retention failed", "partition", p.Name(), "error", err)
					m.CheckStorage(p, err)
				}
				if n > 0 {
					m.logStartMoved(p)
					m.logger.Info("retention deleted segments", "partition", p.Name(), "segments", n, "log_start_offset", p.log.StartOffset())
				}
			}
			// A segment file unused since the last check holds no
			// descriptor until it is used again.
			m.files.CloseIdle()
		case <-checkpoint.C:
			if err := m.WriteHWCheckpoints(false); err != nil {
				m.logger.Error("high watermark checkpoint failed", "error", err)
			}
		case now := <-producers.C:
			m.maintainProducers(now)
		case <-flushC:
			for _, p := range m.Partitions() {
				if err := p.log.Flush(); err != nil && !errors.Is(err, tlog.ErrClosed) {
					m.logger.Error("flush failed", "partition", p.Name(), "error", err)
					m.CheckStorage(p, err)
				}
			}
		}
	}
}

// closeLogs writes every open partition's producer snapshot, then
// flushes and closes its log.
func (m *Manager) closeLogs() error {
	m.replicasMu.Lock()
	defer m.replicasMu.Unlock()
	parts := slices.Collect(maps.Values(m.replicas))
	errs := make([]error, len(parts))
	inParallel(len(parts), maxOpeners, func(i int) {
		p := parts[i]
		p.appendMu.Lock()
		if err := m.snapshotProducers(p, false); err != nil {
			m.logger.Warn("producer snapshot at close failed; the next open reads the log from an older one", "partition", p.Name(), "error", err)
		}
		p.appendMu.Unlock()
		if err := p.log.Close(); err != nil {
			errs[i] = fmt.Errorf("close log of %s: %w", p.Name(), err)
		}
	})
	m.replicas = make(map[coord.TopicPartition]*Partition)
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// inParallel calls f(0) to f(n-1) from up to workers goroutines and
// returns when every call has.
func inParallel(n, workers int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// recoverProducers rebuilds p's producer state from its latest producer
// snapshot and the log after it (log.RecoverProducers), warning
// of the snapshots it could not use and of a read of the whole log, then
// forgets the producers idle for producer.id.expiration.ms at now, as
// Kafka skips expired producers when it loads a snapshot. The caller
// holds p.appendMu or is the only one to know p.
func (m *Manager) recoverProducers(p *Partition, now time.Time) error {
	load, err := p.log.RecoverProducers(p.producers)
	p.producersLoad = load
	p.publishTxns()
	for _, skipped := range load.Skipped {
		m.logger.Warn("producer snapshot unusable, deleted", "partition", p.Name(), "error", skipped)
	}
	if err != nil {
		return err
	}
	expired := p.producers.Expire(now.UnixMilli() - m.cfg.ProducerIDExpiration.Milliseconds())
	if load.SnapshotOffset < 0 && load.To > load.From {
		m.logger.Warn("no usable producer snapshot, producer state read from the whole log", "partition", p.Name(),
			"from", load.From, "to", load.To, "producers", p.producers.Len(), "expired", expired)
		return nil
	}
	m.logger.Debug("producer state loaded", "partition", p.Name(), "snapshot_offset", load.SnapshotOffset,
		"from", load.From, "to", load.To, "producers", p.producers.Len(), "expired", expired)
	return nil
}

// maintainProducers forgets, in every partition, the producers whose
// last batch is older than producer.id.expiration.ms at now, and writes
// the producer snapshot of each partition whose log rolled a segment
// since its latest snapshot.
func (m *Manager) maintainProducers(now time.Time) {
	before := now.UnixMilli() - m.cfg.ProducerIDExpiration.Milliseconds()
	for _, p := range m.Partitions() {
		p.appendMu.Lock()
		expired := p.producers.Expire(before)
		err := m.snapshotProducers(p, true)
		p.appendMu.Unlock()
		if expired > 0 {
			m.logger.Debug("expired idle producers", "partition", p.Name(), "producers", expired)
		}
		if err != nil && !errors.Is(err, tlog.ErrClosed) {
			m.logger.Error("producer snapshot failed", "partition", p.Name(), "error", err)
		}
	}
}

// snapshotProducers writes p's producer state as its snapshot at the log
// end offset unless the latest snapshot is there already or, with
// afterRoll, is at or above the active segment's base offset (no roll
// since): so a restart replays about one segment, as Kafka's snapshot at
// each roll bounds it. The caller holds p.appendMu.
func (m *Manager) snapshotProducers(p *Partition, afterRoll bool) error {
	offsets, err := p.log.ProducerSnapshots()
	if err != nil {
		return err
	}
	latest := int64(-1)
	if len(offsets) > 0 {
		latest = offsets[len(offsets)-1]
	}
	if latest == p.log.EndOffset() || (afterRoll && latest >= p.log.ActiveSegmentBaseOffset()) {
		return nil
	}
	_, err = p.log.SnapshotProducers(p.producers)
	return err
}

// Membership is what the replica manager asks of the cluster
// membership (package broker's membership): the broker epoch its controller requests
// and AlterPartition carry, the controllers it accepts and asks, and
// the clients its fetchers reach the leaders with.
type Membership interface {
	CurrentEpoch() int64
	CheckBrokerEpoch(ctx context.Context, epoch int64) bool
	Controller() *controller.Controller
	BackendController() coord.ControllerInfo
	AskController(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	PeerAddr(cb coord.Broker) string
	PeerClient(addr string, extra ...kgo.Opt) (*kgo.Client, error)
	// PeerDial says how the followers' fetchers reach a peer (peerconn.go).
	PeerDial() PeerDial
}

// Metadata is what the replica manager reads and writes of the
// metadata cache (metadata.Cache): an UpdateMetadata's application, and
// the brokers and partitions the controller last sent.
type Metadata interface {
	Update(req *controller.UpdateMetadataRequest, full bool)
	IsSynced() bool
	HasPartition(topic string, index int32) bool
	Broker(id coord.BrokerID) (coord.Broker, bool)
}

// Configs is what the replica manager reads of the dynamic
// configs (dynconfig.Configs): the live config a replica opens with, the
// topic configs the config watch delivered, and the registration of a
// new replica for the changes that follow.
type Configs interface {
	CurrentConfig() *config.Config
	WatchedTopicConfigs(names []string) map[string]map[string]string
	AddReplica(p *Partition, register func())
}

// Metrics is what the replica manager counts (package broker's
// metrics).
type Metrics interface {
	Throttled(side string, bytes, leftOut int)
	ISRChanged(shrinks, expands int)
}
