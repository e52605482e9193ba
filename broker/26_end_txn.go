package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn v0..v5 (v5 answers the producer id and epoch, KIP-890).
func init() { registerAPI(26, 0, 5, handleEndTxn) }

// handleEndTxn commits or aborts the producer's open transaction: once
// PrepareCommit or PrepareAbort is stored in __transaction_state the
// producer is answered, and the coordinator writes the markers on the
// transaction's partitions and completes it in the background.
func handleEndTxn(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	return nil, func(context.Context) kmsg.Response {
		code, id, epoch := b.txns.EndTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, req.received)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = fencedBefore(r.Version, 2, code), id, epoch
		return resp
	}, nil
}
