package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions v0 (KIP-664).
func init() { registerAPI(65, 0, 0, handleDescribeTransactions) }

// handleDescribeTransactions answers the state of each transactional id
// this broker coordinates (NOT_COORDINATOR for the others,
// TRANSACTIONAL_ID_NOT_FOUND for an id it does not know).
func handleDescribeTransactions(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		d := b.txns.Describe(id)
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, d.Code
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if d.Code == 0 {
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			for _, tp := range d.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					st.Topics = append(st.Topics, t)
				}
				last := &st.Topics[len(st.Topics)-1]
				last.Partitions = append(last.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, nil
}
