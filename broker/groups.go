package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// The group coordinator: this broker coordinates the groups that map to the
// partitions of __consumer_offsets it leads. group/ decides (members,
// generations, offsets expiry); this file does the I/O around it: it loads
// a partition's records when the broker becomes its leader, appends group
// metadata and offset commits to it and answers only once they are
// replicated as acks=all would be, holds the JoinGroup and SyncGroup
// requests that wait, and fires the groups' timers.

// groupCoordinator is the broker's group coordinator: one shard per
// __consumer_offsets partition this broker leads.
type groupCoordinator struct {
	b   *Broker
	cfg group.Config
	// ccfg is the configuration of consumer groups of the consumer
	// protocol (KIP-848).
	ccfg consumer.Config

	// mu guards shards. It is never held while a shard's mu is taken,
	// nor taken while one is held.
	mu     sync.Mutex
	shards map[int32]*groupShard
	// nextWaiter numbers the held requests.
	nextWaiter atomic.Uint64

	// wake tells timerLoop that a deadline moved.
	wake    chan struct{}
	closing chan struct{}
	// wg counts timerLoop, the loads and the stores waiting for their
	// replication.
	wg sync.WaitGroup
}

// shardState is where a shard is in its life.
type shardState int

const (
	// shardLoading: the partition's records are being read; requests get
	// COORDINATOR_LOAD_IN_PROGRESS.
	shardLoading shardState = iota
	// shardActive: the shard coordinates its groups.
	shardActive
	// shardUnloaded: the broker stopped leading the partition; requests
	// get NOT_COORDINATOR.
	shardUnloaded
)

// groupShard is the coordinator of the groups of one __consumer_offsets
// partition, for one leader epoch of it.
type groupShard struct {
	index int32
	epoch int32
	p     *replica.Partition

	// mu guards everything below; it is taken before the partition's
	// locks (appends happen under it).
	mu    sync.Mutex
	state shardState
	// groups are the groups this shard coordinates, with the time each
	// must next be ticked (absent: no timer).
	groups map[string]*group.Group
	// consumers are the consumer groups of the consumer protocol
	// (KIP-848); a group id is in groups or consumers, never both.
	consumers map[string]*consumer.Group
	deadlines map[string]time.Time
	// offsets are the committed offsets, and offsetAt the log offset of
	// the record each came from: a commit whose replication completes
	// after a later one's does not overwrite it.
	offsets  *group.Offsets
	offsetAt map[group.OffsetKey]int64
	// txnOffsets are the offsets open transactions committed
	// (TxnOffsetCommit), applied or dropped by their markers.
	txnOffsets *group.TxnOffsets
	// waiters are the held JoinGroup and SyncGroup requests.
	waiters map[group.Waiter]chan group.Reply
	// lastStore is, per group, closed when the outcome of its latest
	// metadata store has been given to the group: a group hears of its
	// stores in the order they were made.
	lastStore map[string]chan struct{}
}

// newGroupCoordinator returns the coordinator of b; start runs its timer.
func newGroupCoordinator(b *Broker) *groupCoordinator {
	return &groupCoordinator{
		b: b, cfg: b.cfg.GroupConfig(), ccfg: b.cfg.ConsumerGroupConfig(),
		shards:  map[int32]*groupShard{},
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
}

// start runs the timer loop until close.
func (c *groupCoordinator) start() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.timerLoop()
	}()
}

// close unloads every shard and waits for the coordinator's goroutines.
func (c *groupCoordinator) close() {
	close(c.closing)
	c.mu.Lock()
	shards := c.shards
	c.shards = map[int32]*groupShard{}
	c.mu.Unlock()
	for _, sh := range shards {
		sh.unload()
	}
	c.wg.Wait()
}

// poke wakes the timer loop.
func (c *groupCoordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// roleChanged is told of every role a __consumer_offsets replica takes:
// leading it (at a new leader epoch) loads its groups, anything else
// unloads them.
func (c *groupCoordinator) roleChanged(p *replica.Partition) {
	if p.Topic() != group.OffsetsTopic {
		return
	}
	leads, epoch := p.Leads(coord.BrokerID(c.b.cfg.BrokerID))
	if !leads {
		c.resign(p.Index())
		return
	}
	c.mu.Lock()
	old := c.shards[p.Index()]
	if old != nil && old.p == p && old.epoch == epoch {
		c.mu.Unlock()
		return
	}
	select {
	case <-c.closing:
		c.mu.Unlock()
		return
	default:
	}
	sh := &groupShard{index: p.Index(), epoch: epoch, p: p, state: shardLoading,
		groups: map[string]*group.Group{}, consumers: map[string]*consumer.Group{}, deadlines: map[string]time.Time{},
		offsets: group.NewOffsets(), offsetAt: map[group.OffsetKey]int64{}, txnOffsets: group.NewTxnOffsets(),
		waiters: map[group.Waiter]chan group.Reply{}, lastStore: map[string]chan struct{}{}}
	c.shards[p.Index()] = sh
	c.wg.Add(1)
	c.mu.Unlock()
	if old != nil {
		old.unload()
	}
	go func() {
		defer c.wg.Done()
		c.load(sh)
	}()
}

// resign unloads the shard of __consumer_offsets partition index, if
// this broker coordinates it.
func (c *groupCoordinator) resign(index int32) {
	c.mu.Lock()
	sh := c.shards[index]
	delete(c.shards, index)
	c.mu.Unlock()
	if sh != nil {
		sh.unload()
	}
}

// unload ends the shard: every held request is answered NOT_COORDINATOR.
func (sh *groupShard) unload() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state == shardUnloaded {
		return
	}
	sh.state = shardUnloaded
	for _, g := range sh.groups {
		sh.deliver(g.Unload().Replies)
	}
	for w, ch := range sh.waiters {
		delete(sh.waiters, w)
		close(ch)
	}
}

// load reads the shard's partition from its start to its end as of now
// (only the coordinator writes it, and it waits for the load) and
// rebuilds its groups and offsets.
func (c *groupCoordinator) load(sh *groupShard) {
	start := time.Now()
	l := sh.p.Log()
	end := l.EndOffset()
	values := map[string]*kmsg.GroupMetadataValue{}
	consumers := consumer.NewLoader()
	offsets := group.NewOffsets()
	offsetAt := map[group.OffsetKey]int64{}
	txnOffsets := group.NewTxnOffsets()
	// apply sets a committed offset the log holds at logOffset unless a
	// later record of its key was applied (a transaction's offsets apply
	// at its marker, possibly after later plain commits of the same key).
	apply := func(k group.OffsetKey, v *group.Offset, logOffset int64) {
		if at, ok := offsetAt[k]; ok && at > logOffset {
			return
		}
		offsets.Apply(k, v)
		if v == nil {
			delete(offsetAt, k)
		} else {
			offsetAt[k] = logOffset
		}
	}
	// txnProducer is the producer of the batch being read when it is a
	// transaction's (TxnOffsetCommit), -1 otherwise.
	txnProducer := int64(-1)
	records, skipped := 0, 0
	off := l.StartOffset()
	for off < end {
		sh.mu.Lock()
		state := sh.state
		sh.mu.Unlock()
		if state != shardLoading {
			return
		}
		data, err := l.Read(off, int(c.b.cfg.OffsetsLoadBufferSize))
		if errors.Is(err, tlog.ErrOffsetOutOfRange) && off < l.StartOffset() {
			off = l.StartOffset()
			continue
		}
		if err != nil {
			c.b.logger.Error("load of group coordinator partition failed; its groups are unavailable here",
				"partition", sh.p.Name(), "offset", off, "error", err)
			return
		}
		next := off
		if err := tlog.EachBatch(data, false, func(bi tlog.BatchInfo) { next = bi.LastOffset + 1 }); err != nil || next <= off {
			c.b.logger.Error("load of group coordinator partition stopped at a batch it cannot read",
				"partition", sh.p.Name(), "offset", off, "error", err)
			return
		}
		err = group.EachBatchRecord(data, func(h tlog.BatchInfo, m *tlog.Marker) {
			txnProducer = -1
			switch {
			case h.BaseOffset >= end:
			case m != nil:
				for _, c := range txnOffsets.Complete(m.ProducerID, m.Commit) {
					v := c.Value.Offset
					apply(c.Key, &v, c.Value.LogOffset)
				}
			case group.Transactional(h):
				txnProducer = h.ProducerID
			}
		}, func(o int64, key, value []byte) error {
			if o >= end {
				return nil
			}
			if consumer.IsConsumerGroupKey(key) {
				if err := consumers.Apply(key, value); err != nil {
					skipped++
					return nil
				}
				records++
				return nil
			}
			rec, err := group.DecodeRecord(key, value)
			if err != nil {
				skipped++
				return nil
			}
			records++
			switch {
			case rec.OffsetKey != nil && txnProducer >= 0:
				if rec.OffsetValue != nil {
					txnOffsets.Add(txnProducer, *rec.OffsetKey, *rec.OffsetValue, o)
				}
			case rec.OffsetKey != nil:
				apply(*rec.OffsetKey, rec.OffsetValue, o)
			case rec.Group != "":
				values[rec.Group] = rec.GroupValue
			}
			return nil
		})
		if err != nil {
			c.b.logger.Error("load of group coordinator partition failed", "partition", sh.p.Name(), "offset", off, "error", err)
			return
		}
		off = next
	}
	now := time.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state != shardLoading {
		return
	}
	for id, v := range values {
		if v == nil {
			continue
		}
		g, out := group.Restore(id, c.cfg, v, now)
		sh.groups[id] = g
		sh.apply(c, g, out)
	}
	for _, g := range consumers.Groups(c.ccfg, now) {
		sh.consumers[g.ID()] = g
		sh.setDeadline(c, g.ID(), g.Deadline())
	}
	for _, id := range offsets.Groups() {
		if sh.groups[id] == nil && sh.consumers[id] == nil {
			sh.groups[id] = group.New(id, c.cfg)
		}
	}
	sh.offsets, sh.offsetAt, sh.txnOffsets = offsets, offsetAt, txnOffsets
	sh.state = shardActive
	c.b.logger.Info("loaded group coordinator partition", "partition", sh.p.Name(), "leader_epoch", sh.epoch,
		"groups", len(sh.groups), "consumer_groups", len(sh.consumers), "records", records, "skipped", skipped, "log_end", end, "took", time.Since(start).Round(time.Millisecond))
}

// shard returns the locked shard coordinating groupID, or the error code
// to answer: INVALID_GROUP_ID for an empty id, NOT_COORDINATOR when this
// broker does not lead its partition, COORDINATOR_LOAD_IN_PROGRESS while
// it loads it. The caller unlocks sh.mu.
func (c *groupCoordinator) shard(groupID string) (*groupShard, int16) {
	if groupID == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	index := group.PartitionFor(groupID, c.offsetsPartitions())
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

// activeShards returns the shards, and whether any is still loading. It
// takes c.mu and each sh.mu in turn, never together: request handlers
// hold a sh.mu and then ask for waiter ids.
func (c *groupCoordinator) activeShards() ([]*groupShard, bool) {
	c.mu.Lock()
	out := make([]*groupShard, 0, len(c.shards))
	for _, sh := range c.shards {
		out = append(out, sh)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b *groupShard) int { return int(a.index - b.index) })
	loading := false
	for _, sh := range out {
		sh.mu.Lock()
		loading = loading || sh.state == shardLoading
		sh.mu.Unlock()
	}
	return out, loading
}

// newWaiter registers a held request on sh and returns its id and the
// channel its answer arrives on (closed if the shard unloads first). The
// caller holds sh.mu.
func (c *groupCoordinator) newWaiter(sh *groupShard) (group.Waiter, chan group.Reply) {
	w := group.Waiter(c.nextWaiter.Add(1))
	ch := make(chan group.Reply, 1)
	sh.waiters[w] = ch
	return w, ch
}

// forget drops a held request whose client went away.
func (sh *groupShard) forget(w group.Waiter) {
	sh.mu.Lock()
	delete(sh.waiters, w)
	sh.mu.Unlock()
}

// getOrCreate returns the group, created Empty if it does not exist (or
// is Dead). The caller holds sh.mu.
func (sh *groupShard) getOrCreate(c *groupCoordinator, id string) *group.Group {
	g := sh.groups[id]
	if g == nil || g.State() == group.Dead {
		g = group.New(id, c.cfg)
		sh.groups[id] = g
	}
	return g
}

// dropIfUnused forgets a group that holds nothing: no members, no timer,
// no generation and no offsets (a join that failed before it began). The
// caller holds sh.mu.
func (sh *groupShard) dropIfUnused(g *group.Group) {
	if g.State() == group.Empty && g.NumMembers() == 0 && g.Generation() == 0 &&
		sh.deadlines[g.ID()].IsZero() && len(sh.offsets.Keys(g.ID())) == 0 {
		delete(sh.groups, g.ID())
		delete(sh.deadlines, g.ID())
	}
}

// setDeadline sets when group id's timer must next fire (zero: none).
// The caller holds sh.mu.
func (sh *groupShard) setDeadline(c *groupCoordinator, id string, deadline time.Time) {
	if deadline.IsZero() {
		delete(sh.deadlines, id)
		return
	}
	sh.deadlines[id] = deadline
	c.poke()
}

// deliver hands replies to their held requests. The caller holds sh.mu.
func (sh *groupShard) deliver(replies []group.Reply) {
	for _, r := range replies {
		if ch, ok := sh.waiters[r.To]; ok {
			delete(sh.waiters, r.To)
			ch <- r
		}
	}
}

// apply acts on what a group decided: it answers held requests, sets the
// group's timer and starts the store of its metadata. The caller holds
// sh.mu.
func (sh *groupShard) apply(c *groupCoordinator, g *group.Group, out group.Output) {
	sh.deliver(out.Replies)
	if out.Deadline.IsZero() {
		delete(sh.deadlines, g.ID())
	} else {
		sh.deadlines[g.ID()] = out.Deadline
		c.poke()
	}
	if out.Store != nil {
		c.store(sh, g, out.Store)
	}
}

// store appends a group's metadata to the shard's partition and tells the
// group once it is replicated (or failed). The caller holds sh.mu.
func (c *groupCoordinator) store(sh *groupShard, g *group.Group, v *kmsg.GroupMetadataValue) {
	gen := v.Generation
	now := time.Now()
	batch := group.EncodeBatch([]group.KV{{Key: group.GroupRecordKey(g.ID()), Value: group.GroupRecordValue(v)}}, now)
	_, done, err := c.b.replicas.AppendAsLeader(sh.p, batch, true, now.Add(c.b.cfg.OffsetsCommitTimeout))
	if err != nil {
		c.b.replicas.CheckStorage(sh.p, err)
		sh.apply(c, g, g.Stored(now, gen, group.StoreError(replica.AppendErrors.Code(err))))
		return
	}
	prev, told := sh.lastStore[g.ID()], make(chan struct{})
	sh.lastStore[g.ID()] = told
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(told)
		err := c.awaitReplicated(done)
		if prev != nil {
			<-prev
		}
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.lastStore[g.ID()] == told {
			delete(sh.lastStore, g.ID())
		}
		if sh.state == shardActive && sh.groups[g.ID()] == g {
			sh.apply(c, g, g.Stored(time.Now(), gen, group.StoreError(replica.AppendErrors.Code(err))))
		}
	}()
}

// awaitReplicated waits for an acks=all append's outcome, or the
// coordinator's close.
func (c *groupCoordinator) awaitReplicated(done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-c.closing:
		return replication.ErrNotLeader
	}
}

// storeErrorCode maps the outcome of a write of offsets to
// __consumer_offsets to the code the committer is given, as Kafka's
// coordinator does (group metadata writes map theirs with
// group.StoreError).
func (c *groupCoordinator) storeErrorCode(err error) int16 {
	code := offsetStoreErrors.Code(err)
	if code == kerr.UnknownServerError.Code {
		c.b.logger.Error("write to __consumer_offsets failed", "error", err)
	}
	return code
}

// txnStoreErrorCode is storeErrorCode for a TxnOffsetCommit of version:
// an older producer epoch than the partition has seen is
// INVALID_PRODUCER_EPOCH, PRODUCER_FENCED from v5 on (KIP-890), which
// the producer treats as fatal either way.
func (c *groupCoordinator) txnStoreErrorCode(err error, version int16) int16 {
	if errors.Is(err, replication.ErrProducerFenced) {
		if version >= 5 {
			return kerr.ProducerFenced.Code
		}
		return kerr.InvalidProducerEpoch.Code
	}
	return c.storeErrorCode(err)
}

// offsetStoreErrors is kafkaerr.OffsetStore of AppendErrors.
var offsetStoreErrors = kafkaerr.OffsetStore(replica.AppendErrors)

// appendOffsets appends offset records (nil values: tombstones) to the
// shard's partition. With wait, it returns the channel of the replication
// outcome; the records' log offsets start at the returned base. The
// caller holds sh.mu.
func (c *groupCoordinator) appendOffsets(sh *groupShard, kvs []group.KV, wait bool) (int64, <-chan error, error) {
	now := time.Now()
	res, done, err := c.b.replicas.AppendAsLeader(sh.p, group.EncodeBatch(kvs, now), wait, now.Add(c.b.cfg.OffsetsCommitTimeout))
	if err != nil {
		c.b.replicas.CheckStorage(sh.p, err)
		return 0, nil, err
	}
	return res.BaseOffset, done, nil
}

// appendTxnOffsets appends the offset records of producerID's open
// transaction at producerEpoch (TxnOffsetCommit) to the shard's
// partition and waits for their replication as appendOffsets does with
// wait. The caller holds sh.mu.
func (c *groupCoordinator) appendTxnOffsets(sh *groupShard, kvs []group.KV, producerID int64, producerEpoch int16) (int64, <-chan error, error) {
	now := time.Now()
	batch := group.EncodeTxnBatch(kvs, now, producerID, producerEpoch)
	res, done, err := c.b.replicas.AppendAsLeader(sh.p, batch, true, now.Add(c.b.cfg.OffsetsCommitTimeout))
	if err != nil {
		c.b.replicas.CheckStorage(sh.p, err)
		return 0, nil, err
	}
	return res.BaseOffset, done, nil
}

// txnCompleted is told that the marker of producerID's transaction was
// written to __consumer_offsets partition index and replicated: a commit
// makes the offsets the transaction committed there the groups' (unless
// a later commit of the same partition was applied), an abort drops them.
func (c *groupCoordinator) txnCompleted(index int32, producerID int64, commit bool) {
	c.mu.Lock()
	sh := c.shards[index]
	c.mu.Unlock()
	if sh == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.state != shardActive {
		// A shard still loading reads the marker from the log.
		return
	}
	for _, done := range sh.txnOffsets.Complete(producerID, commit) {
		v := done.Value.Offset
		sh.applyOffset(done.Key, &v, done.Value.LogOffset)
		// An offsets-only group stays, as after an OffsetCommit; a
		// consumer-protocol group holds its offsets itself.
		if sh.groups[done.Key.Group] == nil && sh.consumers[done.Key.Group] == nil {
			sh.groups[done.Key.Group] = group.New(done.Key.Group, c.cfg)
		}
	}
}

// applyOffset records a committed offset that the log holds at logOffset,
// unless a later record of the same key is applied already. The caller
// holds sh.mu.
func (sh *groupShard) applyOffset(k group.OffsetKey, v *group.Offset, logOffset int64) {
	if at, ok := sh.offsetAt[k]; ok && at > logOffset {
		return
	}
	sh.offsets.Apply(k, v)
	if v == nil {
		delete(sh.offsetAt, k)
		return
	}
	sh.offsetAt[k] = logOffset
}

// timerLoop ticks the groups whose timers are due, and expires offsets
// every offsets.retention.check.interval.ms.
func (c *groupCoordinator) timerLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	nextExpiry := time.Now().Add(c.b.cfg.OffsetsRetentionCheckInterval)
	for {
		now := time.Now()
		if !now.Before(nextExpiry) {
			c.expireOffsets(now)
			nextExpiry = now.Add(c.b.cfg.OffsetsRetentionCheckInterval)
		}
		next := c.tick(now)
		if next.IsZero() || next.After(nextExpiry) {
			next = nextExpiry
		}
		t.Reset(time.Until(next))
		select {
		case <-c.closing:
			return
		case <-c.wake:
		case <-t.C:
		}
	}
}

// tick fires the due timers of every active shard's groups and returns
// the earliest timer left (zero if none).
func (c *groupCoordinator) tick(now time.Time) time.Time {
	shards, _ := c.activeShards()
	var next time.Time
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			for id, dl := range sh.deadlines {
				if dl.After(now) {
					continue
				}
				if g := sh.groups[id]; g != nil {
					sh.apply(c, g, g.Tick(now))
				} else if cg := sh.consumers[id]; cg != nil {
					c.applyConsumer(sh, cg, cg.Tick(now))
				}
			}
			for _, dl := range sh.deadlines {
				if next.IsZero() || dl.Before(next) {
					next = dl
				}
			}
		}
		sh.mu.Unlock()
	}
	return next
}

// expireOffsets removes, in every active shard, the offsets whose
// retention passed (offsets.retention.minutes), writing their tombstones,
// and forgets the empty groups left with no offsets, writing the group's
// tombstone, as Kafka's coordinator does.
func (c *groupCoordinator) expireOffsets(now time.Time) {
	shards, _ := c.activeShards()
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			c.expireShard(sh, now)
		}
		sh.mu.Unlock()
	}
}

// expireShard is expireOffsets for one shard. The caller holds sh.mu.
func (c *groupCoordinator) expireShard(sh *groupShard, now time.Time) {
	expired := sh.offsets.Expired(now, c.b.cfg.OffsetsRetention, func(id string) group.Activity {
		if cg := sh.consumers[id]; cg != nil {
			return group.Activity{Known: true, HasMembers: cg.NumMembers() > 0, ProtocolType: "consumer"}
		}
		g := sh.groups[id]
		if g == nil {
			return group.Activity{}
		}
		return group.Activity{Known: true, HasMembers: g.NumMembers() > 0, ProtocolType: g.ProtocolType(), EmptySince: g.StateSince()}
	})
	var kvs []group.KV
	for _, k := range expired {
		kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k)})
	}
	var dead []string
	for id, g := range sh.groups {
		if g.State() == group.Empty && g.NumMembers() == 0 && sh.deadlines[id].IsZero() &&
			len(sh.offsets.Keys(id)) == len(keysOf(expired, id)) {
			dead = append(dead, id)
			kvs = append(kvs, group.KV{Key: group.GroupRecordKey(id)})
		}
	}
	if len(kvs) == 0 {
		return
	}
	base, _, err := c.appendOffsets(sh, kvs, false)
	if err != nil {
		c.b.logger.Warn("write of expired offsets' tombstones failed; retried at the next check", "partition", sh.p.Name(), "error", err)
		return
	}
	for i, k := range expired {
		sh.applyOffset(k, nil, base+int64(i))
	}
	for _, id := range dead {
		delete(sh.groups, id)
		delete(sh.deadlines, id)
	}
	c.b.logger.Info("expired committed offsets", "partition", sh.p.Name(), "offsets", len(expired), "groups_removed", len(dead))
}

// topicsDeleted drops every group's committed offsets of the deleted
// topics, as Kafka's coordinator does when topics are deleted
// (onPartitionsDeleted): with tombstones in each active shard's
// partition, so that a coordinator that loads it later does not bring
// them back, and so that a topic created again with the same name starts
// with no committed offsets. A shard still loading keeps them.
func (c *groupCoordinator) topicsDeleted(topics []string) {
	gone := map[string]bool{}
	for _, t := range topics {
		gone[t] = true
	}
	shards, _ := c.activeShards()
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			c.dropTopicOffsets(sh, gone)
			for _, cg := range sh.consumers {
				c.applyConsumer(sh, cg, cg.MetadataChanged(c.image()))
			}
		}
		sh.mu.Unlock()
	}
}

// dropTopicOffsets is topicsDeleted for one shard. The caller holds sh.mu.
func (c *groupCoordinator) dropTopicOffsets(sh *groupShard, gone map[string]bool) {
	var keys []group.OffsetKey
	var kvs []group.KV
	for _, id := range sh.offsets.Groups() {
		for _, k := range sh.offsets.Keys(id) {
			if gone[k.Topic] {
				keys = append(keys, k)
				kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k)})
			}
		}
	}
	if len(kvs) == 0 {
		return
	}
	base, _, err := c.appendOffsets(sh, kvs, false)
	if err != nil {
		c.b.logger.Warn("write of deleted topics' offsets' tombstones failed", "partition", sh.p.Name(), "error", err)
		return
	}
	for i, k := range keys {
		sh.applyOffset(k, nil, base+int64(i))
	}
	c.b.logger.Info("removed the committed offsets of deleted topics", "partition", sh.p.Name(), "offsets", len(keys))
}

// keysOf returns the keys of one group.
func keysOf(keys []group.OffsetKey, id string) []group.OffsetKey {
	var out []group.OffsetKey
	for _, k := range keys {
		if k.Group == id {
			out = append(out, k)
		}
	}
	return out
}

// offsetsPartitions is the partition count of __consumer_offsets: the
// topic's, or offsets.topic.num.partitions before it exists.
func (c *groupCoordinator) offsetsPartitions() int {
	if t, ok := c.b.cache.Topic(group.OffsetsTopic); ok && len(t.Partitions) > 0 {
		return len(t.Partitions)
	}
	return int(c.b.cfg.OffsetsTopicNumPartitions)
}

// offsetsReplicationFactor is the replication factor __consumer_offsets
// is created with: offsets.topic.replication.factor, or 1 on a broker
// that its flags make its cluster's only Raft voter (a lone `tripod
// serve`, not an observer of another broker's quorum).
func (c *groupCoordinator) offsetsReplicationFactor() int {
	if c.b.cfg.CoordConfig().LoneRaftVoter() {
		return 1
	}
	return int(c.b.cfg.OffsetsTopicReplicationFactor)
}

// ensureOffsetsTopic creates __consumer_offsets if the cluster has enough
// live brokers for offsets.topic.replication.factor, through the
// controller, and waits (bounded by ctx) until this broker knows its
// leaders. Otherwise it says why the topic cannot exist yet.
func (c *groupCoordinator) ensureOffsetsTopic(ctx context.Context) error {
	if c.b.cache.HasTopic(group.OffsetsTopic) {
		return nil
	}
	_, live, _ := c.b.cache.View()
	rf := c.offsetsReplicationFactor()
	if len(live) < rf {
		return fmt.Errorf("%s needs offsets.topic.replication.factor=%d live brokers and %d are live", group.OffsetsTopic, rf, len(live))
	}
	spec := controller.TopicSpec{Name: group.OffsetsTopic, Partitions: int(c.b.cfg.OffsetsTopicNumPartitions), ReplicationFactor: rf,
		Config: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    fmt.Sprint(c.b.cfg.OffsetsTopicSegmentBytes),
		}}
	if err := c.b.member.createTopic(ctx, spec); err != nil {
		return err
	}
	c.b.cache.WaitFor(ctx, c.b.closing, func() bool { return c.b.cache.TopicReady(group.OffsetsTopic, spec.Partitions) })
	return nil
}
