package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// ListTransactions v0..v1 (KIP-664; v1 filters by duration, KIP-994).
func init() { registerAPI(66, 0, 1, handleListTransactions) }

// handleListTransactions lists the transactional ids this broker
// coordinates that match the request's state, producer id and (v1)
// duration filters; state names it does not know are answered in
// UnknownStateFilters and match nothing, as in Kafka. The authorizer
// leaves out the ids the principal may not DESCRIBE.
func handleListTransactions(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	states, unknown := txn.ParseStates(r.StateFilters)
	resp.UnknownStateFilters = unknown
	if len(unknown) > 0 && len(states) == 0 {
		return resp, nil, nil
	}
	f := txn.ListFilter{States: states, ProducerIDs: r.ProducerIDFilters, DurationMs: -1}
	if r.Version >= 1 {
		f.DurationMs = r.DurationFilterMillis
	}
	list, code := b.txns.List(f)
	resp.ErrorCode = code
	for _, l := range list {
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, nil
}
