package txncoord

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// Config is what the coordinator is configured with (the broker's
// transaction properties).
type Config struct {
	// Limits are transaction.max.timeout.ms and
	// transactional.id.expiration.ms.
	Limits txn.Limits
	// NumPartitions is transaction.state.log.num.partitions: the
	// partition count of __transaction_state before it exists.
	NumPartitions int
	// AbortTimedOutInterval and RemoveExpiredInterval are how often
	// timed-out transactions are aborted and expired ids removed.
	AbortTimedOutInterval time.Duration
	RemoveExpiredInterval time.Duration
	// StoreTimeout bounds how long a write to __transaction_state waits
	// for every in-sync replica.
	StoreTimeout time.Duration
	// MarkerTimeout bounds one WriteTxnMarkers request.
	MarkerTimeout time.Duration
}

// StateLog is one __transaction_state partition this broker leads, at
// one leader epoch.
type StateLog interface {
	// Name is the partition's name, for logs.
	Name() string
	// Replay calls fn with the key and value (nil: a tombstone) of every
	// record of the partition, in order, from its start to its end as of
	// the call.
	Replay(fn func(key, value []byte)) error
	// Append appends one record (a nil value is a tombstone) as the
	// partition's leader with acks=all, and returns the function that
	// waits for its outcome: the Kafka error code of the append (0 once
	// every in-sync replica has it), or NOT_COORDINATOR when stop is
	// closed first.
	Append(key, value []byte, deadline time.Time) (wait func(stop <-chan struct{}) int16)
}

// Leader is where a partition's markers go.
type Leader struct {
	// Known is false when the cluster's metadata has no such partition
	// (its topic was deleted): the partition holds nothing to end.
	Known bool
	// Broker is the partition's leader, -1 when it has none now.
	Broker int32
}

// Cluster is what the coordinator reads of the cluster's metadata.
type Cluster interface {
	// StatePartitions is __transaction_state's partition count, 0 when
	// the topic does not exist.
	StatePartitions() int
	// LeaderOf is the leader of topic's partition.
	LeaderOf(topic string, partition int32) Leader
}

// Markers sends WriteTxnMarkers requests to other brokers (and this one).
type Markers interface {
	// WriteTxnMarkers sends req to broker and returns its answer.
	WriteTxnMarkers(ctx context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
}

// Deps is what the coordinator needs of its broker.
type Deps struct {
	Logger  hclog.Logger
	Cluster Cluster
	Markers Markers
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Coordinator is a broker's transaction coordinator. New returns it;
// Start runs its timers; Close stops it.
type Coordinator struct {
	cfg    Config
	logger hclog.Logger
	d      Deps

	// mu guards shards; it is never taken while a shard's mu is held.
	mu     sync.Mutex
	shards map[int32]*shard

	closing   chan struct{}
	closeOnce sync.Once
	// wg counts the timer loop, the loads, the stores and the marker
	// writers; goMu guards closed, so that none is added once Close
	// waits. goMu is taken after any other lock.
	wg     sync.WaitGroup
	goMu   sync.Mutex
	closed bool

	// timedOut counts the transactions aborted past their timeout.
	timedOut atomic.Int64
	// held counts the requests held until a transaction completes.
	held atomic.Int32
}

// Stats are a coordinator's figures for the broker's metrics.
type Stats struct {
	// Ongoing counts the transactional ids with a transaction open or
	// ending (Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence).
	Ongoing int
	// AbortedOnTimeout counts the transactions aborted past their
	// transaction.timeout.ms since the coordinator started.
	AbortedOnTimeout int64
}

// Stats returns the coordinator's figures, over the partitions it has
// loaded; a nil coordinator (a broker built in part, in tests) has none.
func (c *Coordinator) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	shards, _ := c.allShards()
	st := Stats{AbortedOnTimeout: c.timedOut.Load()}
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			for _, m := range sh.txns {
				switch m.State {
				case txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.PrepareEpochFence:
					st.Ongoing++
				}
			}
		}
		sh.mu.Unlock()
	}
	return st
}

// shardState is where a shard is in its life.
type shardState int

const (
	shardLoading shardState = iota
	shardActive
	shardUnloaded
)

// shard coordinates the transactional ids of one __transaction_state
// partition, for one leader epoch of it.
type shard struct {
	index int32
	// epoch is the partition's leader epoch: the coordinator epoch the
	// markers carry.
	epoch int32
	log   StateLog
	// gone is closed when the shard unloads.
	gone chan struct{}

	// mu guards state, txns, began and settled.
	mu    sync.Mutex
	state shardState
	txns  map[string]*txn.Metadata
	// began holds, per transactional id whose open transaction this
	// shard began, when it decided to begin it (this process's clock,
	// monotonic): a request received before then was sent for an
	// earlier transaction.
	began map[string]time.Time
	// settled is closed, and replaced, whenever a transaction of the
	// shard leaves PrepareCommit or PrepareAbort: requests held while it
	// ended look again.
	settled chan struct{}
}

// New returns the coordinator; it coordinates nothing until Lead.
func New(cfg Config, d Deps) *Coordinator {
	if d.Logger == nil {
		d.Logger = hclog.NewNullLogger()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Coordinator{cfg: cfg, logger: d.Logger, d: d, shards: map[int32]*shard{}, closing: make(chan struct{})}
}

// Start runs the timer loop until Close.
func (c *Coordinator) Start() { c.goroutine(c.timerLoop) }

// goroutine runs fn on a goroutine Close waits for, unless Close began.
func (c *Coordinator) goroutine(fn func()) bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// Close unloads every shard and waits for the coordinator's goroutines:
// the timer loop, the loads, and the writers of markers and of the
// states that follow them.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		c.goMu.Lock()
		c.closed = true
		c.goMu.Unlock()
		c.mu.Lock()
		close(c.closing)
		shards := c.shards
		c.shards = map[int32]*shard{}
		c.mu.Unlock()
		for _, sh := range shards {
			sh.unload()
		}
		c.wg.Wait()
	})
}

func (c *Coordinator) nowMs() int64 { return c.d.Now().UnixMilli() }

// Lead makes the coordinator load __transaction_state partition index,
// which this broker leads at leaderEpoch, from log; a shard of an older
// epoch is unloaded first. Leading the same log at the same epoch again
// changes nothing.
func (c *Coordinator) Lead(index, leaderEpoch int32, log StateLog) {
	c.mu.Lock()
	select {
	case <-c.closing:
		c.mu.Unlock()
		return
	default:
	}
	old := c.shards[index]
	if old != nil && old.epoch == leaderEpoch && old.log == log {
		c.mu.Unlock()
		return
	}
	sh := &shard{index: index, epoch: leaderEpoch, log: log, gone: make(chan struct{}), state: shardLoading, txns: map[string]*txn.Metadata{},
		began: map[string]time.Time{}, settled: make(chan struct{})}
	c.shards[index] = sh
	c.mu.Unlock()
	if old != nil {
		old.unload()
	}
	if !c.goroutine(func() { c.load(sh) }) {
		sh.unload()
	}
}

// Resign unloads the shard of partition index, if this broker
// coordinates it: its ids are then answered NOT_COORDINATOR.
func (c *Coordinator) Resign(index int32) {
	c.mu.Lock()
	sh := c.shards[index]
	delete(c.shards, index)
	c.mu.Unlock()
	if sh != nil {
		sh.unload()
	}
}

func (sh *shard) unload() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state == shardUnloaded {
		return
	}
	sh.state = shardUnloaded
	close(sh.gone)
}

// load rebuilds the shard's ids from its log, then starts the markers of
// the transactions left ending.
func (c *Coordinator) load(sh *shard) {
	start := time.Now()
	latest := map[string][]byte{}
	records, skipped := 0, 0
	err := sh.log.Replay(func(key, value []byte) {
		id, err := txn.DecodeKey(key)
		if err != nil {
			skipped++
			return
		}
		records++
		latest[id] = value
	})
	if err != nil {
		c.logger.Error("load of transaction coordinator partition failed; its transactional ids are unavailable here",
			"partition", sh.log.Name(), "error", err)
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state != shardLoading {
		return
	}
	for id, v := range latest {
		m, err := txn.Restore(id, v)
		if err != nil {
			skipped++
			c.logger.Warn("transaction state record skipped", "partition", sh.log.Name(), "transactional_id", id, "error", err)
			continue
		}
		if m != nil {
			sh.txns[id] = m
		}
	}
	sh.state = shardActive
	ending := 0
	for _, m := range sh.txns {
		if m.State == txn.PrepareCommit || m.State == txn.PrepareAbort {
			ending++
			c.startMarkers(sh, m)
		}
	}
	c.logger.Info("loaded transaction coordinator partition", "partition", sh.log.Name(), "leader_epoch", sh.epoch,
		"transactional_ids", len(sh.txns), "ending", ending, "records", records, "skipped", skipped,
		"took", time.Since(start).Round(time.Millisecond))
}

// PartitionFor is the __transaction_state partition of transactionalID.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	n := c.d.Cluster.StatePartitions()
	if n <= 0 {
		n = c.cfg.NumPartitions
	}
	return txn.PartitionFor(transactionalID, n)
}

// shard returns the locked shard coordinating transactionalID, or the
// code to answer: NOT_COORDINATOR when this broker does not lead its
// partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it. The caller
// unlocks sh.mu.
func (c *Coordinator) shard(transactionalID string) (*shard, int16) {
	index := c.PartitionFor(transactionalID)
	c.mu.Lock()
	sh := c.shards[index]
	c.mu.Unlock()
	if sh == nil {
		return nil, kerr.NotCoordinator.Code
	}
	sh.mu.Lock()
	switch sh.state {
	case shardLoading:
		sh.mu.Unlock()
		return nil, kerr.CoordinatorLoadInProgress.Code
	case shardUnloaded:
		sh.mu.Unlock()
		return nil, kerr.NotCoordinator.Code
	}
	return sh, 0
}

// allShards returns the shards and whether any is loading.
func (c *Coordinator) allShards() ([]*shard, bool) {
	c.mu.Lock()
	out := make([]*shard, 0, len(c.shards))
	for _, sh := range c.shards {
		out = append(out, sh)
	}
	c.mu.Unlock()
	loading := false
	for _, sh := range out {
		sh.mu.Lock()
		loading = loading || sh.state == shardLoading
		sh.mu.Unlock()
	}
	return out, loading
}

// store appends t, the pending transit of m, to the shard's partition
// and returns the channel of its outcome: the Kafka code of the append
// as Kafka's TransactionStateManager maps it for the client. The caller
// holds sh.mu; the caller of the returned wait does not.
func (c *Coordinator) store(sh *shard, m *txn.Metadata, t txn.Transit) func() int16 {
	wait := sh.log.Append(txn.RecordKey(m.TransactionalID), txn.RecordValue(t), c.d.Now().Add(c.cfg.StoreTimeout))
	return func() int16 { return storeCode(wait(c.closing)) }
}

// storeCode maps the outcome of an append to __transaction_state to the
// client's answer, as Kafka's TransactionStateManager.appendTransactionToLog.
func storeCode(code int16) int16 {
	switch code {
	case 0:
		return 0
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code,
		kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code:
		return kerr.NotCoordinator.Code
	}
	return kerr.UnknownServerError.Code
}

// finish applies the outcome of the store of t: Complete once stored
// (0), Abandon otherwise, if the shard still coordinates m. It returns
// the code to answer (NOT_COORDINATOR when the shard moved on).
func (c *Coordinator) finish(sh *shard, m *txn.Metadata, t txn.Transit, code int16) int16 {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state != shardActive || sh.txns[m.TransactionalID] != m {
		return kerr.NotCoordinator.Code
	}
	if code != 0 {
		m.Abandon()
		return code
	}
	if err := m.Complete(t); err != nil {
		c.logger.Error("stored transaction state does not follow its metadata", "transactional_id", m.TransactionalID, "error", err)
		m.Abandon()
		return kerr.UnknownServerError.Code
	}
	if t.State == txn.Dead {
		delete(sh.txns, m.TransactionalID)
	}
	if t.State != txn.Ongoing {
		delete(sh.began, m.TransactionalID)
	}
	if t.State == txn.CompleteCommit || t.State == txn.CompleteAbort {
		close(sh.settled)
		sh.settled = make(chan struct{})
	}
	return 0
}

// concurrentHold bounds how long a request that finds its transactional
// id's previous transaction still ending (its markers being written) is
// held before it is answered CONCURRENT_TRANSACTIONS: a producer that
// begins its next transaction at once is answered as soon as the last
// one completes, rather than retrying after a backoff.
const concurrentHold = time.Second

// awaitSettled waits until a transaction of the shard completes, the
// deadline passes, the shard unloads or the coordinator closes; it
// reports whether one completed. settled is the shard's settled read
// under its mu.
func (c *Coordinator) awaitSettled(sh *shard, settled <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	c.held.Add(1)
	defer c.held.Add(-1)
	select {
	case <-settled:
		return true
	case <-t.C:
	case <-sh.gone:
	case <-c.closing:
	}
	return false
}

// illegal logs a transition txn refused (a bug) and answers it.
func (c *Coordinator) illegal(id string, err error) int16 {
	c.logger.Error("transaction coordinator refused an illegal transition", "transactional_id", id, "error", err)
	return kerr.UnknownServerError.Code
}
