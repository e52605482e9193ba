package txncoord

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// The pauses between two rounds of markers that left partitions to
// retry (a leader moved, could not be reached, or does not answer
// WriteTxnMarkers yet): doubling from markerBackoffMin to
// markerBackoffMax.
const (
	markerBackoffMin = 100 * time.Millisecond
	markerBackoffMax = 5 * time.Second
)

// markerVersion is the WriteTxnMarkers version sent (v1: flexible, as
// Kafka 3.x's coordinator sends).
const markerVersion = 1

// startMarkers writes the markers of m's ending transaction (PrepareCommit
// or PrepareAbort) in the background, then stores its completion.
func (c *Coordinator) startMarkers(sh *shard, m *txn.Metadata) {
	c.goroutine(func() { c.writeMarkers(sh, m) })
}

// ending reports whether the shard still coordinates m and m's
// transaction is ending. The caller holds sh.mu.
func ending(sh *shard, m *txn.Metadata) bool {
	return sh.state == shardActive && sh.txns[m.TransactionalID] == m && (m.State == txn.PrepareCommit || m.State == txn.PrepareAbort)
}

// writeMarkers sends WriteTxnMarkers for every partition of m's ending
// transaction to its current leader, one request per leader, in rounds
// until each partition's marker is written (or it is gone), as Kafka's
// TransactionMarkerChannelManager, and then stores CompleteCommit or
// CompleteAbort. It stops when the shard unloads, the coordinator
// closes, or a leader answers that a newer producer or coordinator took
// over.
func (c *Coordinator) writeMarkers(sh *shard, m *txn.Metadata) {
	backoff := markerBackoffMin
	pause := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, markerBackoffMax)
		select {
		case <-t.C:
			return true
		case <-c.closing:
		case <-sh.gone:
		}
		return false
	}
	for {
		sh.mu.Lock()
		if !ending(sh, m) {
			sh.mu.Unlock()
			return
		}
		byLeader := map[int32][]txn.TopicPartition{}
		for _, tp := range m.SortedPartitions() {
			switch l := c.d.Cluster.LeaderOf(tp.Topic, tp.Partition); {
			case !l.Known:
				// The topic was deleted: nothing of the transaction
				// is left on it (Kafka's coordinator skips it too).
				_ = m.RemovePartition(tp)
			case l.Broker >= 0:
				byLeader[l.Broker] = append(byLeader[l.Broker], tp)
			}
		}
		if len(m.Partitions) == 0 {
			t, err := m.PrepareComplete(c.nowMs())
			if err != nil {
				sh.mu.Unlock()
				c.illegal(m.TransactionalID, err)
				return
			}
			wait := c.store(sh, m, t)
			sh.mu.Unlock()
			switch code := c.finish(sh, m, t, wait()); code {
			case 0:
				c.logger.Debug("transaction completed", "transactional_id", m.TransactionalID, "state", t.State)
				return
			case kerr.NotCoordinator.Code:
				return
			default:
				c.logger.Warn("store of a completed transaction failed; retrying", "transactional_id", m.TransactionalID,
					"error", kerr.ErrorForCode(code))
			}
			if !pause() {
				return
			}
			continue
		}
		pid, epoch, commit := m.ProducerID, m.ProducerEpoch, m.State == txn.PrepareCommit
		c.logger.Debug("writing transaction markers", "transactional_id", m.TransactionalID, "producer_id", pid, "epoch", epoch,
			"commit", commit, "leaders", byLeader)
		sh.mu.Unlock()

		actions := c.sendMarkers(sh, byLeader, pid, epoch, commit)

		sh.mu.Lock()
		if !ending(sh, m) {
			sh.mu.Unlock()
			return
		}
		stop, progress := false, false
		for tp, a := range actions {
			switch a {
			case txn.MarkerWritten, txn.MarkerDropPartition:
				_ = m.RemovePartition(tp)
				progress = true
			case txn.MarkerAbandon:
				stop = true
			case txn.MarkerFatal:
				c.logger.Error("a leader refused a transaction marker with an error no marker may get; the transaction stays pending",
					"transactional_id", m.TransactionalID, "topic", tp.Topic, "partition", tp.Partition)
				stop = true
			}
		}
		done := len(m.Partitions) == 0
		sh.mu.Unlock()
		if stop {
			c.logger.Info("transaction markers abandoned: a newer producer or coordinator took over", "transactional_id", m.TransactionalID)
			return
		}
		if done {
			continue
		}
		if progress {
			backoff = markerBackoffMin
		}
		if !pause() {
			return
		}
	}
}

// sendMarkers sends one WriteTxnMarkers to each leader, concurrently, and
// returns what each partition's answer means; a partition whose leader
// did not answer is absent (retried).
func (c *Coordinator) sendMarkers(sh *shard, byLeader map[int32][]txn.TopicPartition, pid int64, epoch int16, commit bool) map[txn.TopicPartition]txn.MarkerAction {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closing:
		case <-sh.gone:
		case <-ctx.Done():
		}
		cancel()
	}()
	var mu sync.Mutex
	out := map[txn.TopicPartition]txn.MarkerAction{}
	var wg sync.WaitGroup
	for broker, tps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, rcancel := context.WithTimeout(ctx, c.cfg.MarkerTimeout)
			defer rcancel()
			resp, err := c.d.Markers.WriteTxnMarkers(rctx, broker, MarkerRequest(pid, epoch, commit, sh.epoch, tps))
			if err != nil {
				c.logger.Debug("WriteTxnMarkers not answered; retrying", "broker", broker, "producer_id", pid, "error", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for tp, a := range MarkerActions(resp, pid, tps) {
				out[tp] = a
			}
		}()
	}
	wg.Wait()
	return out
}

// MarkerRequest is the WriteTxnMarkers (v1) that ends producer pid's
// transaction at epoch on tps, from the coordinator at coordinatorEpoch
// (its __transaction_state partition's leader epoch).
func MarkerRequest(pid int64, epoch int16, commit bool, coordinatorEpoch int32, tps []txn.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = markerVersion
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	for _, tp := range tps {
		if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			mk.Topics = append(mk.Topics, t)
		}
		last := &mk.Topics[len(mk.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, mk)
	return req
}

// MarkerActions reads a WriteTxnMarkers response to the request of
// producer pid for tps: what each partition's code means
// (txn.MarkerOutcome). Partitions the response does not name are absent,
// and retried.
func MarkerActions(resp *kmsg.WriteTxnMarkersResponse, pid int64, tps []txn.TopicPartition) map[txn.TopicPartition]txn.MarkerAction {
	asked := map[txn.TopicPartition]bool{}
	for _, tp := range tps {
		asked[tp] = true
	}
	out := map[txn.TopicPartition]txn.MarkerAction{}
	for _, mk := range resp.Markers {
		if mk.ProducerID != pid {
			continue
		}
		for _, t := range mk.Topics {
			for _, p := range t.Partitions {
				tp := txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if asked[tp] {
					out[tp] = txn.MarkerOutcome(p.ErrorCode)
				}
			}
		}
	}
	return out
}
