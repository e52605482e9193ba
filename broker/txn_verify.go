package broker

import (
	"context"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/txn"
)

// KIP-890 part 1 on the produce path: before a partition leader appends
// the first batch of a producer's transaction on a partition (the
// partition holds no open transaction of the producer id), it asks the
// transaction coordinator of the request's transactional id whether the
// partition is in that producer's ongoing transaction at that producer id
// and epoch (transaction.partition.verification.enable). A late or
// hanging produce thus cannot open a transaction on a partition after the
// coordinator ended it, which would hold the partition's last stable
// offset back until the transaction timed out on no coordinator.

// batchAttributesOffset and batchProducerEpochOffset are where a v2
// record batch holds its attributes and its producer epoch.
const (
	batchAttributesOffset    = 21
	batchProducerEpochOffset = 51
)

// txnVerification is a partition's produce waiting for the coordinator's
// verification before its append.
type txnVerification struct {
	topic, partition int // the place in the request and the response
	tp               txn.TopicPartition
	producerID       int64
	epoch            int16
	// code is the verification's outcome, 0 when verified, else what
	// the partition is answered.
	code int16
	// queued is a partition that needs no verification, appended in the
	// deferred part only to follow the connection's previous produce
	// (handleProduce).
	queued bool
}

// firstTxnBatch returns the producer id and epoch of the first
// transactional batch of records (validated), reading only the batch
// headers; ok is false when no batch is transactional.
func firstTxnBatch(records []byte) (producerID int64, epoch int16, ok bool) {
	for rest := records; len(rest) >= batchHeaderSize && rest[batchMagicOffset] == 2; {
		if binary.BigEndian.Uint16(rest[batchAttributesOffset:])&transactionalAttr != 0 {
			return int64(binary.BigEndian.Uint64(rest[batchProducerIDOffset:])),
				int16(binary.BigEndian.Uint16(rest[batchProducerEpochOffset:])), true
		}
		next := 12 + int64(int32(binary.BigEndian.Uint32(rest[8:])))
		if next < batchHeaderSize || next > int64(len(rest)) {
			break
		}
		rest = rest[next:]
	}
	return 0, 0, false
}

// verifyTxnPartitions asks the transaction coordinator of transactionalID
// whether each of tps is in the ongoing transaction of producer id at
// epoch, in process when this broker is the coordinator and otherwise
// with an AddPartitionsToTxn v4 VerifyOnly to it; it returns the code
// each partition's produce is answered with, 0 for the verified ones.
// ctx bounds the wait (the produce request's timeout).
func (b *Broker) verifyTxnPartitions(ctx context.Context, transactionalID string, producerID int64, epoch int16, tps []txn.TopicPartition) []int16 {
	codes := make([]int16, len(tps))
	fill := func(code int16) []int16 {
		for i := range codes {
			codes[i] = verificationCode(code)
		}
		return codes
	}
	leader, code := b.txnCoordinatorOf(transactionalID)
	if code != 0 {
		return fill(code)
	}
	if leader == int32(b.cfg.BrokerID) {
		code, each := b.txns.VerifyPartitions(transactionalID, producerID, epoch, tps)
		if code != 0 {
			return fill(code)
		}
		for i, c := range each {
			codes[i] = verificationCode(c)
		}
		return codes
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = transactionalID, producerID, epoch, true
	for _, tp := range tps {
		i := len(t.Topics) - 1
		if i < 0 || t.Topics[i].Topic != tp.Topic {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic = tp.Topic
			t.Topics = append(t.Topics, rt)
			i++
		}
		t.Topics[i].Partitions = append(t.Topics[i].Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, t)
	kresp, err := b.markers.request(ctx, leader, req)
	if err != nil {
		if ctx.Err() != nil {
			return fill(kerr.RequestTimedOut.Code)
		}
		b.logger.Debug("transaction verification failed", "transactional_id", transactionalID, "coordinator", leader, "error", err)
		return fill(kerr.CoordinatorNotAvailable.Code)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return fill(resp.ErrorCode)
	}
	// A partition the answer leaves out is not verified.
	fill(kerr.InvalidTxnState.Code)
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, rtt := range rt.Topics {
			for _, rp := range rtt.Partitions {
				for i, tp := range tps {
					if tp.Topic == rtt.Topic && tp.Partition == rp.Partition {
						codes[i] = verificationCode(rp.ErrorCode)
					}
				}
			}
		}
	}
	return codes
}

// txnCoordinatorOf returns the broker leading transactionalID's
// __transaction_state partition, as FindCoordinator type 1 finds it, or
// COORDINATOR_NOT_AVAILABLE.
func (b *Broker) txnCoordinatorOf(transactionalID string) (int32, int16) {
	t, ok := b.cache.Topic(txn.StateTopic)
	if !ok || len(t.Partitions) == 0 {
		return -1, kerr.CoordinatorNotAvailable.Code
	}
	index := txn.PartitionFor(transactionalID, len(t.Partitions))
	for _, p := range t.Partitions {
		if p.Partition != index {
			continue
		}
		if _, live := b.cache.Broker(p.Leader); live && p.Leader != coord.NoBroker {
			return int32(p.Leader), 0
		}
	}
	return -1, kerr.CoordinatorNotAvailable.Code
}

// verificationCode is the code a produce is answered with for the
// coordinator's answer to its verification, as Kafka's
// AddPartitionsToTxnManager and ReplicaManager map them: a fenced
// producer is INVALID_PRODUCER_EPOCH (the error a producer knows on
// produce), and a coordinator that is not there (loading, moved, not
// reachable) or busy is NOT_ENOUGH_REPLICAS, which producers retry.
// INVALID_TXN_STATE (the partition is not in the transaction) and the
// others are answered as they are.
func verificationCode(code int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}
