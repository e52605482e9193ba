package txncoord

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/txn"
)

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID and ProducerEpoch are the producer the client holds
	// (KIP-360), -1 when it names none.
	ProducerID    int64
	ProducerEpoch int16
	// NewProducerID hands out a fresh producer id to the requester.
	NewProducerID func(ctx context.Context) (int64, error)
	// Owns reports whether the requester may write with producer id
	// (nil: any). An id it may not (handed to another principal) is
	// replaced by a fresh one when no transaction is open.
	Owns func(id int64) bool
}

// InitResult is the answer to an InitProducerId.
type InitResult struct {
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
}

// initAttempts bounds how often an InitProducerId takes a fresh producer
// id and decides again.
const initAttempts = 3

// InitProducerID answers an InitProducerId with a transactional id
// (Kafka's handleInitProducerId): a new id gets a producer id at epoch
// 0, a known one its epoch bumped (or a new producer id once its epoch
// is exhausted); an open transaction of the id is aborted first, its
// producer fenced, and the client answered CONCURRENT_TRANSACTIONS,
// which it retries.
func (c *Coordinator) InitProducerID(ctx context.Context, r InitRequest) InitResult {
	fail := func(code int16) InitResult { return InitResult{Code: code, ProducerID: -1, ProducerEpoch: -1} }
	if code := c.cfg.Limits.ValidTimeout(r.TimeoutMs); code != 0 {
		return fail(code)
	}
	newID := txn.NoProducerID
	for range initAttempts {
		sh, code := c.shard(r.TransactionalID)
		if code != 0 {
			return fail(code)
		}
		now := c.nowMs()
		m := sh.txns[r.TransactionalID]
		created := false
		if m == nil && newID != txn.NoProducerID {
			m, created = txn.New(r.TransactionalID, newID, r.TimeoutMs, now), true
			sh.txns[r.TransactionalID], newID = m, txn.NoProducerID
		}
		var d txn.InitDecision
		var err error
		pending := false
		if m != nil {
			_, pending = m.Pending()
		}
		switch {
		case m == nil:
			d.NeedProducerID = true
		case !created && !pending && r.Owns != nil && !r.Owns(m.ProducerID) && m.ProducerEpoch != txn.NoProducerEpoch &&
			(m.State == txn.Empty || m.State == txn.CompleteCommit || m.State == txn.CompleteAbort):
			// The id's producer id was handed to another principal:
			// this one could not write with it.
			if newID == txn.NoProducerID {
				d.NeedProducerID = true
				break
			}
			d.Transit, err = m.PrepareRotateProducerID(newID, r.TimeoutMs, false, now)
		default:
			d, err = m.InitProducerID(c.cfg.Limits, r.TimeoutMs, r.ProducerID, r.ProducerEpoch, newID, now)
		}
		if m != nil {
			c.logger.Debug("InitProducerId", "transactional_id", r.TransactionalID, "producer_id", r.ProducerID, "epoch", r.ProducerEpoch,
				"state", m.State, "current_epoch", m.ProducerEpoch, "code", d.Code, "abort_first", d.AbortFirst, "need_id", d.NeedProducerID)
		}
		if err != nil {
			sh.mu.Unlock()
			return fail(c.illegal(r.TransactionalID, err))
		}
		if d.Code != 0 {
			sh.mu.Unlock()
			return fail(d.Code)
		}
		if d.NeedProducerID {
			sh.mu.Unlock()
			id, err := r.NewProducerID(ctx)
			if err != nil {
				c.logger.Warn("InitProducerId answered COORDINATOR_LOAD_IN_PROGRESS: no producer id", "transactional_id", r.TransactionalID, "error", err)
				return fail(kerr.CoordinatorLoadInProgress.Code)
			}
			newID = id
			continue
		}
		wait := c.store(sh, m, d.Transit)
		sh.mu.Unlock()
		code = c.finish(sh, m, d.Transit, wait())
		if code != 0 {
			if created {
				c.forgetUnused(sh, m)
			}
			return fail(code)
		}
		if d.AbortFirst {
			c.startMarkers(sh, m)
			return fail(kerr.ConcurrentTransactions.Code)
		}
		return InitResult{ProducerID: d.Transit.ProducerID, ProducerEpoch: d.Transit.ProducerEpoch}
	}
	return fail(kerr.ConcurrentTransactions.Code)
}

// forgetUnused drops a Metadata created by an InitProducerId whose store
// failed: it never held a producer.
func (c *Coordinator) forgetUnused(sh *shard, m *txn.Metadata) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, pending := m.Pending(); sh.txns[m.TransactionalID] == m && m.ProducerEpoch == txn.NoProducerEpoch && !pending {
		delete(sh.txns, m.TransactionalID)
		delete(sh.began, m.TransactionalID)
	}
}

// AddPartitions answers an AddPartitionsToTxn (and an AddOffsetsToTxn,
// with the group's __consumer_offsets partition) of producer id at
// epoch: the code for every partition.
func (c *Coordinator) AddPartitions(transactionalID string, producerID int64, epoch int16, tps []txn.TopicPartition) int16 {
	deadline := time.Now().Add(concurrentHold)
	for {
		code, settled, sh := c.addPartitions(transactionalID, producerID, epoch, tps)
		if settled == nil || !c.awaitSettled(sh, settled, deadline) {
			return code
		}
	}
}

// addPartitions is one attempt of AddPartitions. When the previous
// transaction is still ending, it answers CONCURRENT_TRANSACTIONS with
// the shard's settled channel, on which the caller may wait to try again.
func (c *Coordinator) addPartitions(transactionalID string, producerID int64, epoch int16, tps []txn.TopicPartition) (int16, <-chan struct{}, *shard) {
	sh, code := c.shard(transactionalID)
	if code != 0 {
		return code, nil, nil
	}
	m := sh.txns[transactionalID]
	if m == nil {
		sh.mu.Unlock()
		return kerr.InvalidProducerIDMapping.Code, nil, nil
	}
	code, t, err := m.AddPartitions(producerID, epoch, tps, c.nowMs())
	if c.logger.IsDebug() {
		c.logger.Debug("AddPartitionsToTxn", "transactional_id", transactionalID, "producer_id", producerID, "epoch", epoch, "add", tps,
			"state", m.State, "partitions", m.SortedPartitions(), "code", code, "transit", t != nil)
	}
	if err != nil {
		sh.mu.Unlock()
		return c.illegal(transactionalID, err), nil, nil
	}
	if t == nil {
		var settled <-chan struct{}
		if code == kerr.ConcurrentTransactions.Code && (m.State == txn.PrepareCommit || m.State == txn.PrepareAbort) {
			settled = sh.settled
		}
		sh.mu.Unlock()
		return code, settled, sh
	}
	opening, decided := m.State != txn.Ongoing, time.Now()
	wait := c.store(sh, m, *t)
	sh.mu.Unlock()
	code = c.finish(sh, m, *t, wait())
	if code == 0 && opening {
		sh.mu.Lock()
		if sh.txns[transactionalID] == m && m.State == txn.Ongoing {
			sh.began[transactionalID] = decided
		}
		sh.mu.Unlock()
	}
	return code, nil, nil
}

// VerifyPartitions answers a partition leader's check (KIP-890 part 1)
// that producer id at epoch has each of tps in its open transaction: a
// code for the whole transaction (NOT_COORDINATOR, ...) or one per
// partition.
func (c *Coordinator) VerifyPartitions(transactionalID string, producerID int64, epoch int16, tps []txn.TopicPartition) (int16, []int16) {
	sh, code := c.shard(transactionalID)
	if code != 0 {
		return code, nil
	}
	defer sh.mu.Unlock()
	m := sh.txns[transactionalID]
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if m == nil {
			codes[i] = kerr.InvalidProducerIDMapping.Code
			continue
		}
		codes[i] = m.VerifyPartition(producerID, epoch, tp)
	}
	return 0, codes
}

// EndTxn answers a client's EndTxn of producer id at epoch, received
// (read off its connection) at received: once the end is stored the
// client is answered and the markers are written in the background. It
// returns the code and the producer id and epoch the id holds (EndTxn
// v5).
//
// An EndTxn received before this coordinator began the open transaction
// was sent for an earlier one: its client gave up waiting, ended that
// transaction with a retry, and began this one. Protocol v1 gives both
// transactions one producer epoch, so nothing else tells them apart; it
// is answered INVALID_TXN_STATE and not applied, as applying it would
// end a transaction its producer is still writing (an abort would drop
// records of a transaction the producer then commits).
func (c *Coordinator) EndTxn(transactionalID string, producerID int64, epoch int16, commit bool, received time.Time) (int16, int64, int16) {
	sh, code := c.shard(transactionalID)
	if code != 0 {
		return code, -1, -1
	}
	m := sh.txns[transactionalID]
	if m == nil {
		sh.mu.Unlock()
		return kerr.InvalidProducerIDMapping.Code, -1, -1
	}
	if began, ok := sh.began[transactionalID]; ok && m.State == txn.Ongoing && received.Before(began) {
		sh.mu.Unlock()
		c.logger.Info("EndTxn received before the transaction it would end began: a late request for an earlier transaction, not applied",
			"transactional_id", transactionalID, "producer_id", producerID, "epoch", epoch, "commit", commit,
			"received_before_begin", began.Sub(received))
		return kerr.InvalidTxnState.Code, -1, -1
	}
	code, t, err := m.EndTxn(producerID, epoch, commit, c.nowMs())
	if c.logger.IsDebug() {
		c.logger.Debug("EndTxn", "transactional_id", transactionalID, "producer_id", producerID, "epoch", epoch, "commit", commit,
			"state", m.State, "partitions", m.SortedPartitions(), "code", code, "transit", t != nil)
	}
	if err != nil {
		sh.mu.Unlock()
		return c.illegal(transactionalID, err), -1, -1
	}
	if t == nil {
		id, ep := m.ProducerID, m.ProducerEpoch
		sh.mu.Unlock()
		return code, id, ep
	}
	wait := c.store(sh, m, *t)
	sh.mu.Unlock()
	if code := c.finish(sh, m, *t, wait()); code != 0 {
		return code, -1, -1
	}
	c.startMarkers(sh, m)
	return 0, t.ProducerID, t.ProducerEpoch
}

// Description is a transactional id's state, as DescribeTransactions
// answers it.
type Description struct {
	// Code is NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
	// TRANSACTIONAL_ID_NOT_FOUND when not 0.
	Code          int16
	State         txn.State
	TimeoutMs     int32
	StartMs       int64
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []txn.TopicPartition
}

// Describe returns transactionalID's state.
func (c *Coordinator) Describe(transactionalID string) Description {
	sh, code := c.shard(transactionalID)
	if code != 0 {
		return Description{Code: code}
	}
	defer sh.mu.Unlock()
	m := sh.txns[transactionalID]
	if m == nil {
		return Description{Code: kerr.TransactionalIDNotFound.Code}
	}
	return Description{State: m.State, TimeoutMs: m.TimeoutMs, StartMs: m.StartMs, ProducerID: m.ProducerID,
		ProducerEpoch: m.ProducerEpoch, Partitions: m.SortedPartitions()}
}

// Listing is one transactional id ListTransactions answers.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           txn.State
}

// List returns the transactional ids f matches, sorted, of every shard;
// COORDINATOR_LOAD_IN_PROGRESS while one loads.
func (c *Coordinator) List(f txn.ListFilter) ([]Listing, int16) {
	shards, loading := c.allShards()
	if loading {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	now := c.nowMs()
	var out []Listing
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			for id, m := range sh.txns {
				if f.Matches(m, now) {
					out = append(out, Listing{TransactionalID: id, ProducerID: m.ProducerID, State: m.State})
				}
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Listing) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	return out, 0
}
