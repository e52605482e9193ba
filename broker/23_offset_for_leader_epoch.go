package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
			p := b.partitionFor(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case r.Version >= 2 && checkLeaderEpoch(rp.CurrentLeaderEpoch) != 0:
				sp.ErrorCode = checkLeaderEpoch(rp.CurrentLeaderEpoch)
			default:
				sp.LeaderEpoch, sp.EndOffset = p.log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}

// checkLeaderEpoch compares a client's idea of the current leader epoch
// with this leader's: -1 skips the check, an older one is
// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (the client knows
// of an election this broker has not heard of yet).
func checkLeaderEpoch(current int32) int16 {
	switch {
	case current < 0 || current == leaderEpoch:
		return 0
	case current < leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}
