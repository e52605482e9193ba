package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// AddPartitionsToTxn v0..v5: v0..v3 from a transactional producer, v4+
// batched from partition leaders, which may only verify (KIP-890 part 1).
func init() { registerAPI(24, 0, 5, handleAddPartitionsToTxn) }

// handleAddPartitionsToTxn adds partitions to a producer's open
// transaction (opening it), once stored in __transaction_state. A
// partition the cluster does not have fails the request: it is
// UNKNOWN_TOPIC_OR_PARTITION and every other OPERATION_NOT_ATTEMPTED, as
// in Kafka (the authorizer answers the topics denied WRITE the same way).
func handleAddPartitionsToTxn(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version >= 4 {
		return nil, func(context.Context) kmsg.Response {
			for _, t := range r.Transactions {
				resp.Transactions = append(resp.Transactions, b.addPartitionsBatched(t))
			}
			return resp
		}, nil
	}
	var tps []txn.TopicPartition
	unknown := false
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			unknown = unknown || !b.cache.HasPartition(t.Topic, p)
		}
	}
	answer := func(code func(tp txn.TopicPartition) int16) kmsg.Response {
		for _, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(txn.TopicPartition{Topic: t.Topic, Partition: p})
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if unknown {
		return answer(func(tp txn.TopicPartition) int16 {
			if b.cache.HasPartition(tp.Topic, tp.Partition) {
				return kerr.OperationNotAttempted.Code
			}
			return kerr.UnknownTopicOrPartition.Code
		}), nil, nil
	}
	return nil, func(context.Context) kmsg.Response {
		code := fencedBefore(r.Version, 2, b.txns.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, tps))
		return answer(func(txn.TopicPartition) int16 { return code })
	}, nil
}

// addPartitionsBatched answers one transaction of a v4+ request: a
// verification (VerifyOnly), or an addition as v0..v3's.
func (b *Broker) addPartitionsBatched(t kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var tps []txn.TopicPartition
	for _, rt := range t.Topics {
		for _, p := range rt.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	codes := make([]int16, len(tps))
	if t.VerifyOnly {
		code, each := b.txns.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
		if code == 0 {
			codes = each
		} else {
			for i := range codes {
				codes[i] = code
			}
		}
	} else {
		code := b.txns.AddPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
		for i := range codes {
			codes[i] = code
		}
	}
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = t.TransactionalID
	i := 0
	for _, rt := range t.Topics {
		ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		ot.Topic = rt.Topic
		for _, p := range rt.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			op.Partition, op.ErrorCode = p, codes[i]
			ot.Partitions = append(ot.Partitions, op)
			i++
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}
