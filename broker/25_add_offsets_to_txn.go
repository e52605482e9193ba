package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/txn"
)

// AddOffsetsToTxn v0..v4.
func init() { registerAPI(25, 0, 4, handleAddOffsetsToTxn) }

// handleAddOffsetsToTxn adds the group's __consumer_offsets partition to
// the producer's open transaction, so that the offsets it commits with
// TxnOffsetCommit are ended by the transaction's markers (KIP-98,
// KIP-447).
func handleAddOffsetsToTxn(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: group.PartitionFor(r.Group, b.groups.offsetsPartitions())}
	return nil, func(context.Context) kmsg.Response {
		resp.ErrorCode = fencedBefore(r.Version, 2, b.txns.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TopicPartition{tp}))
		return resp
	}, nil
}
