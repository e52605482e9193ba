package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
)

// OffsetForLeaderEpoch v0..v4: where a leader epoch's writes ended
// (KIP-101, KIP-279), for consumers validating their position and, later,
// followers truncating by epoch.
func init() { registerAPI(23, 0, 4, handleOffsetForLeaderEpoch) }

// handleOffsetForLeaderEpoch answers, per partition, the largest epoch at
// most the requested one and the offset where its writes ended, from the
// log's leader-epoch cache.
func handleOffsetForLeaderEpoch(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch = -1
			sp.EndOffset = -1
			p, code := b.replicas.LeaderFor(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = code
			case r.Version >= 2 && replica.CheckLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()) != 0:
				sp.ErrorCode = replica.CheckLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch())
			default:
				sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}
