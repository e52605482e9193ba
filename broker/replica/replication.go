package replica

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// This file is the glue between the partitions' logs and their
// replication state machines (replication.Partition): it appends as
// leader, moves the log start for DeleteRecords, records followers'
// fetches, ticks the waits, and acts on every Ready (acks, high
// watermarks, AlterPartition proposals). Roles are applied in replicas.go
// (applyRole), the fetchers are in fetcher.go, the AlterPartition sender
// in isr.go, the high watermark checkpoint's writes in logdirs.go and its
// file in replica/checkpoint.go.

// truncateProducers drops the producer state of the records a truncation
// removed, rebuilding it from the latest producer snapshot below the cut
// (the log deleted those above) and the log after it when a producer
// lost all it had. The caller holds p.appendMu.
func (m *Manager) truncateProducers(p *Partition, offset int64) {
	// The log cuts whole batches: its end may be below offset.
	offset = min(offset, p.log.EndOffset())
	defer p.publishTxns()
	if !p.producers.TruncateTo(offset) {
		return
	}
	p.producers.Reset()
	if err := m.recoverProducers(p, time.Now()); err != nil {
		m.logger.Error("rebuild producer state failed", "partition", p.Name(), "error", err)
	}
}

// handleReady acts on what p's state machine decided, after p.ready
// published its high watermark: it answers the acks=all produces and
// DeleteRecords that completed or failed, wakes the fetches waiting for
// the new high watermark and sends an AlterPartition proposal to the
// controller.
func (m *Manager) handleReady(p *Partition, rd replication.Ready) {
	if len(rd.Acks) > 0 || len(rd.Deletes) > 0 {
		p.repMu.Lock()
		for _, a := range rd.Acks {
			if ch, ok := p.acks[a.ID]; ok {
				delete(p.acks, a.ID)
				ch <- a.Err
			}
		}
		for _, d := range rd.Deletes {
			if ch, ok := p.deletes[d.ID]; ok {
				delete(p.deletes, d.ID)
				ch <- d
			}
		}
		p.dropEmptyWaits()
		p.repMu.Unlock()
	}
	if rd.HighWatermarkChanged {
		p.wakeAll()
	}
	if rd.Proposal != nil {
		m.isr.propose(p, *rd.Proposal)
	}
}

// AppendAsLeader appends a produce's records to p, stamped with the leader
// epoch, and tells the state machine. With acks=all it first checks
// min.insync.replicas and then registers a wait for the high watermark to
// pass the batch, whose outcome arrives on the returned channel; deadline
// is the produce's timeout. An idempotent producer's batch is checked
// against the producer's sequence first: a retry of one of its last five
// batches is answered with the original offsets and not written again
// (acks=all still waits for the high watermark to pass it), a gap is
// ErrOutOfOrderSequence, an older producer epoch ErrProducerFenced, a
// batch outside its producer's open transaction ErrInvalidTxnState. A
// transaction marker (WriteTxnMarkers' control batch) is checked for its
// producer epoch (ErrProducerFenced) and coordinator epoch
// (ErrCoordinatorFenced); an abort's aborted-transaction index entry is
// added to the log with it.
func (m *Manager) AppendAsLeader(p *Partition, records []byte, acksAll bool, deadline time.Time) (tlog.AppendResult, <-chan error, error) {
	// Framing only: log.Append checks the CRC-32C of what it writes, and
	// a duplicate's is checked below, so no batch pays for it twice.
	metas, err := replication.ParseBatchHeaders(records)
	if err != nil {
		return tlog.AppendResult{}, nil, err
	}
	p.appendMu.Lock()
	p.repMu.Lock()
	if p.rep.Role() != replication.RoleLeader {
		p.repMu.Unlock()
		p.appendMu.Unlock()
		return tlog.AppendResult{}, nil, replication.ErrNotLeader
	}
	if acksAll {
		if err := p.rep.CheckAcksAll(); err != nil {
			p.repMu.Unlock()
			p.appendMu.Unlock()
			return tlog.AppendResult{}, nil, err
		}
	}
	epoch := p.rep.LeaderEpoch()
	p.repMu.Unlock()
	dup, err := p.producers.Check(metas)
	if err != nil {
		p.appendMu.Unlock()
		return tlog.AppendResult{}, nil, err
	}
	var res tlog.AppendResult
	if dup != nil {
		// A corrupt retry is CORRUPT_MESSAGE, never a duplicate.
		if _, err := replication.ParseBatchMeta(records); err != nil {
			p.appendMu.Unlock()
			return tlog.AppendResult{}, nil, err
		}
		res = tlog.AppendResult{BaseOffset: dup.FirstOffset, LastOffset: dup.LastOffset}
		m.logger.Debug("duplicate batch answered with its original offsets", "partition", p.Name(),
			"producer_id", dup.ProducerID, "sequence", dup.BaseSequence, "offset", dup.FirstOffset)
	} else {
		res, err = p.log.Append(records, epoch)
		if err != nil {
			p.appendMu.Unlock()
			return res, nil, err
		}
		if err := p.recordAppended(metas, res.BaseOffset); err != nil {
			m.logger.Error("record transaction markers failed", "partition", p.Name(), "error", err)
			m.CheckStorage(p, err)
		}
	}
	now := time.Now()
	var done chan error
	p.repMu.Lock()
	if dup == nil {
		if err := p.rep.Appended(p.log.EndOffset(), now); err != nil {
			m.logger.Error("record append in state machine failed", "partition", p.Name(), "error", err)
		}
	}
	if acksAll {
		p.nextID++
		id := p.nextID
		done = make(chan error, 1)
		if p.acks == nil {
			p.acks = make(map[replication.AckID]chan error)
		}
		p.acks[id] = done
		if err := p.rep.Await(id, res.LastOffset, deadline, now); err != nil {
			delete(p.acks, id)
			p.dropEmptyWaits()
			done <- err
		}
	}
	rd := p.ready()
	p.repMu.Unlock()
	p.appendMu.Unlock()
	if acksAll {
		m.queueWait(p)
	}
	if dup == nil {
		p.wakeAll()
	}
	m.handleReady(p, rd)
	return res, done, nil
}

// DeleteRecordsAsLeader moves the log start offset of p, which this
// broker leads, to offset (DeleteRecords): the state machine checks it and
// says where the log is to start (DeleteRecordsOffset), the log advances
// its start, and a wait for the low watermark to reach it is registered,
// whose outcome arrives on the returned channel; deadline is the
// request's timeout. It returns the Kafka error code, and the channel when
// the offset was accepted.
func (m *Manager) DeleteRecordsAsLeader(p *Partition, offset int64, deadline time.Time) (int16, <-chan replication.DeleteResult) {
	p.appendMu.Lock()
	p.repMu.Lock()
	target, err := p.rep.DeleteRecordsOffset(offset)
	p.repMu.Unlock()
	if err != nil {
		p.appendMu.Unlock()
		m.logger.Debug("delete records refused", "partition", p.Name(), "offset", offset, "error", err)
		return AppendErrors.Code(err), nil
	}
	if _, err := p.log.AdvanceStartOffset(target); err != nil {
		p.appendMu.Unlock()
		switch {
		case m.CheckStorage(p, err):
			return kerr.KafkaStorageError.Code, nil
		case errors.Is(err, tlog.ErrClosed):
			return kerr.NotLeaderForPartition.Code, nil
		}
		m.logger.Error("delete records failed", "partition", p.Name(), "offset", target, "error", err)
		return kerr.UnknownServerError.Code, nil
	}
	now := time.Now()
	done := make(chan replication.DeleteResult, 1)
	p.repMu.Lock()
	p.rep.SetLogStart(p.log.StartOffset(), now)
	p.nextDeleteID++
	id := p.nextDeleteID
	if p.deletes == nil {
		p.deletes = make(map[replication.DeleteID]chan replication.DeleteResult)
	}
	p.deletes[id] = done
	if err := p.rep.AwaitLowWatermark(id, target, deadline, now); err != nil {
		delete(p.deletes, id)
		p.dropEmptyWaits()
		done <- replication.DeleteResult{ID: id, LowWatermark: -1, Err: err}
	}
	rd := p.ready()
	p.repMu.Unlock()
	p.appendMu.Unlock()
	m.queueWait(p)
	m.handleReady(p, rd)
	// The followers' fetch sessions answer the new log start, which the
	// low watermark waits for.
	p.wakeAll()
	m.logger.Debug("log start offset moved by delete records", "partition", p.Name(), "log_start_offset", p.log.StartOffset())
	return 0, done
}

// followerFetched records a fetch by follower replica at fetchOffset,
// with log start offset logStart (-1 if the fetch carries none), on p,
// which this broker leads. It returns the Kafka error code for the
// partition: OFFSET_OUT_OF_RANGE when the follower is ahead of this log,
// NOT_LEADER_OR_FOLLOWER when this broker stopped leading or the replica
// is not assigned the partition.
func (m *Manager) followerFetched(p *Partition, replica int32, fetchOffset, logStart int64) int16 {
	p.repMu.Lock()
	err := p.rep.FollowerFetch(replication.ReplicaID(replica), fetchOffset, logStart, time.Now())
	rd := p.ready()
	p.repMu.Unlock()
	m.handleReady(p, rd)
	code := kafkaerr.FollowerFetch.Code(err)
	if code == kerr.NotLeaderForPartition.Code && errors.Is(err, replication.ErrUnknownReplica) {
		m.logger.Warn("fetch from a replica the partition does not have", "partition", p.Name(), "replica", replica)
	}
	return code
}

// tickLoop advances the partitions' state machines: acks=all produces
// and DeleteRecords past their timeout fail, and followers that fell
// behind for replica.lag.time.max.ms are proposed out of the ISR. Every
// interval (a quarter of replica.lag.time.max.ms, at most 100 ms) it
// ticks the partitions with such waits (waiting: queueWait); every
// fullEvery (the same quarter, at most a second) all of them, which is
// what the ISR checks need. At 100 000 partitions ticking them all every
// 100 ms took a third of a broker's CPU. It runs until the broker closes.
func (m *Manager) tickLoop() {
	interval := max(min(m.cfg.ReplicaLagTimeMax/4, 100*time.Millisecond), time.Millisecond)
	fullEvery := max(min(m.cfg.ReplicaLagTimeMax/4, time.Second), interval)
	t := time.NewTicker(interval)
	defer t.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-m.closing:
			return
		case now := <-t.C:
			if now.Sub(lastFull) < fullEvery {
				m.tickWaiting(now)
				continue
			}
			lastFull = now
			for _, p := range m.Partitions() {
				m.tick(p, now)
			}
		}
	}
}

// tick advances p's state machine if p leads, and acts on what it
// decided.
func (m *Manager) tick(p *Partition, now time.Time) {
	p.repMu.Lock()
	if p.rep.Role() != replication.RoleLeader {
		p.repMu.Unlock()
		return
	}
	p.rep.Tick(now)
	var rd replication.Ready
	if p.rep.HasReady() {
		rd = p.ready()
	}
	p.repMu.Unlock()
	m.handleReady(p, rd)
}

// tickWaiting ticks the partitions in the waiting set, and takes out
// those left without waits.
func (m *Manager) tickWaiting(now time.Time) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	for p := range m.waiting {
		m.tick(p, now)
		p.repMu.Lock()
		if p.acks == nil && p.deletes == nil {
			// Under repMu, where waits are added: one added later
			// queues the partition again.
			delete(m.waiting, p)
			p.waitQueued.Store(false)
		}
		p.repMu.Unlock()
	}
}

// queueWait puts p in the waiting set, which tickWaiting ticks, after an
// acks=all produce or a DeleteRecords registered a wait on it. The caller
// does not hold p.repMu.
func (m *Manager) queueWait(p *Partition) {
	if p.waitQueued.CompareAndSwap(false, true) {
		m.waitMu.Lock()
		m.waiting[p] = struct{}{}
		m.waitMu.Unlock()
	}
}

// failAcks answers every acks=all produce and DeleteRecords waiting on p
// with err (the partition is going away).
func (p *Partition) failAcks(err error) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	for id, ch := range p.acks {
		delete(p.acks, id)
		ch <- err
	}
	for id, ch := range p.deletes {
		delete(p.deletes, id)
		ch <- replication.DeleteResult{ID: id, LowWatermark: -1, Err: err}
	}
	p.dropEmptyWaits()
}

// dropEmptyWaits lets go of the acks and deletes maps once they are
// empty. The caller holds repMu.
func (p *Partition) dropEmptyWaits() {
	if len(p.acks) == 0 {
		p.acks = nil
	}
	if len(p.deletes) == 0 {
		p.deletes = nil
	}
}

// logStartMoved tells p's state machine where p's log starts now, after
// retention, a truncation or a DeleteRecords moved it; on a leader that
// may complete DeleteRecords waits. A follower's Ready is left alone:
// its high watermark is the fetcher's to publish. The fetch sessions
// holding p hear of it: fetch answers carry the log start.
func (m *Manager) logStartMoved(p *Partition) {
	p.repMu.Lock()
	p.rep.SetLogStart(p.log.StartOffset(), time.Now())
	var rd replication.Ready
	if p.rep.Role() == replication.RoleLeader && p.rep.HasReady() {
		rd = p.ready()
	}
	p.repMu.Unlock()
	m.handleReady(p, rd)
	p.wakeAll()
}

// AppendErrors answers an append, an acks wait or a DeleteRecords: the
// table's replication and log rows, and an offline log dir
// KAFKA_STORAGE_ERROR.
var AppendErrors = kafkaerr.Append.With(ErrLogDirOffline, kerr.KafkaStorageError)

// newReplicationState returns the state machine of a replica this broker
// opens.
func (m *Manager) newReplicationState(cfg config.Config, tp coord.TopicPartition, configs map[string]string) (*replication.Partition, error) {
	rep, err := replication.New(cfg.ReplicationConfig(configs), replication.ReplicaID(m.cfg.BrokerID))
	if err != nil {
		return nil, fmt.Errorf("replication state of %s: %w", tp, err)
	}
	return rep, nil
}

// replicaIDs converts broker ids to replica ids.
func replicaIDs(ids []coord.BrokerID) []replication.ReplicaID {
	out := make([]replication.ReplicaID, len(ids))
	for i, id := range ids {
		out[i] = replication.ReplicaID(id)
	}
	return out
}

// fromReplicaIDs converts replica ids to broker ids.
func fromReplicaIDs(ids []replication.ReplicaID) []coord.BrokerID {
	out := make([]coord.BrokerID, len(ids))
	for i, id := range ids {
		out[i] = coord.BrokerID(id)
	}
	return out
}

// LeaderThrottles reports whether the leader's throttle applies to
// follower's fetch of p: the topic's leader.replication.throttled.replicas
// names this replica and the follower is not in the ISR (as the
// replication state has it: an expansion counts once committed).
func (m *Manager) LeaderThrottles(p *Partition, follower int32) bool {
	if !p.leaderThrottled.Load() {
		return false
	}
	p.repMu.Lock()
	isr := p.rep.ISR()
	p.repMu.Unlock()
	return !slices.Contains(isr, replication.ReplicaID(follower))
}

// FetchRefusal is how a leader answers one partition of a follower's
// fetch before reading it: with an error code, or (Diverging) with the
// epoch and offset where the follower's log parts from this one
// (Fetch's DivergingEpoch), which the follower cuts to before it fetches
// again.
type FetchRefusal struct {
	Code      int16
	Diverging bool
	Epoch     int32
	EndOffset int64
}

// RecordFollowerFetch tells the replication state machine of every
// partition a follower fetches where the follower's log ends, and returns
// the partitions refused: with the leader's usual error codes,
// OFFSET_OUT_OF_RANGE for a follower ahead of this log, or a diverging
// epoch for one whose last fetched epoch (Fetch v12) says its log parts
// from this one. That one's position is not recorded: it holds records
// this leader does not, and counting them would let the high watermark
// pass records the follower does not have.
func (m *Manager) RecordFollowerFetch(r *kmsg.FetchRequest) map[coord.TopicPartition]FetchRefusal {
	refused := map[coord.TopicPartition]FetchRefusal{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			p, code := m.LeaderFor(rt.Topic, rp.Partition)
			switch {
			case p == nil:
			case r.Version >= 9 && CheckLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()) != 0:
				code = CheckLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch())
			case rp.FetchOffset < p.log.StartOffset():
				code = kerr.OffsetOutOfRange.Code
			default:
				if r.Version >= 12 && rp.LastFetchedEpoch >= 0 {
					epoch, end, diverges, undefined := p.divergence(rp.LastFetchedEpoch, rp.FetchOffset)
					if diverges {
						refused[tp] = FetchRefusal{Diverging: true, Epoch: epoch, EndOffset: end}
						continue
					}
					if undefined {
						refused[tp] = FetchRefusal{Code: kerr.OffsetOutOfRange.Code}
						continue
					}
				}
				logStart := int64(-1)
				if r.Version >= 5 {
					logStart = rp.LogStartOffset
				}
				code = m.followerFetched(p, r.ReplicaID, rp.FetchOffset, logStart)
			}
			if code != 0 {
				refused[tp] = FetchRefusal{Code: code}
			}
		}
	}
	return refused
}

// divergence is the leader's check of a fetch from fetchOffset whose
// last batch was of lastFetchedEpoch (replication.FetchDiverges), over
// this log's epochs as its leader sees them (LeaderEndOffsetForEpoch).
func (p *Partition) divergence(lastFetchedEpoch int32, fetchOffset int64) (epoch int32, end int64, diverges, undefined bool) {
	p.repMu.Lock()
	leaderEpoch, start := p.rep.LeaderEpoch(), p.rep.LeaderEpochStartOffset()
	if p.rep.Role() != replication.RoleLeader {
		leaderEpoch = -1
	}
	p.repMu.Unlock()
	epoch, end = p.log.LeaderEndOffsetForEpoch(lastFetchedEpoch, leaderEpoch, start)
	diverges, undefined = replication.FetchDiverges(lastFetchedEpoch, fetchOffset, epoch, end)
	return epoch, end, diverges, undefined
}

// IdlePosition is a session's position in a partition that did not change
// since the session was last answered for it, with the epoch of the last
// batch the follower named there (-1: none).
type IdlePosition struct {
	Partition             *Partition
	FetchOffset, LogStart int64
	LastFetchedEpoch      int32
}

// RecordIdlePositions records a follower's positions in the idle
// partitions of its session (a refresh, broker/fetchsession), as
// RecordFollowerFetch records those it names. Nothing changed in them
// since the follower was last answered, so there is no error to tell it;
// one that stopped leading here meanwhile refuses the position (its
// replication state is no longer a leader's), and its change is the next
// fetch's to serve. A position whose log parts from this one (the
// follower was told, and names the partition again once it has cut) is
// not recorded.
func (m *Manager) RecordIdlePositions(idle []IdlePosition, replica int32) {
	for _, ip := range idle {
		if ip.LastFetchedEpoch >= 0 {
			if _, _, diverges, undefined := ip.Partition.divergence(ip.LastFetchedEpoch, ip.FetchOffset); diverges || undefined {
				continue
			}
		}
		m.followerFetched(ip.Partition, replica, ip.FetchOffset, ip.LogStart)
	}
}
