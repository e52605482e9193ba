package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers v0 (KIP-664).
func init() { registerAPI(61, 0, 0, handleDescribeProducers) }

// handleDescribeProducers lists, for each requested partition this broker
// leads, the idempotent producers its producer state remembers: producer
// id, epoch, last sequence, the max timestamp of the last batch and the
// first offset of its open transaction (CurrentTxnStartOffset, -1 when
// none is open: kafka-transactions.sh finds hanging transactions by it)
// and the coordinator epoch of its last transaction marker (-1 if none).
// A partition led elsewhere is
// NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION, as
// Kafka answers.
func handleDescribeProducers(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, index := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			p, code := b.replicas.LeaderFor(rt.Topic, index)
			if p == nil {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, ps := range p.ActiveProducers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = ps.ProducerID
				ap.ProducerEpoch = int32(ps.ProducerEpoch)
				ap.LastSequence = ps.LastSequence
				ap.LastTimestamp = ps.LastTimestamp
				ap.CoordinatorEpoch = ps.CoordinatorEpoch
				ap.CurrentTxnStartOffset = ps.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}
