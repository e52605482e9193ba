package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum v0..v2 (KIP-595; v1 fetch and caught-up times, v2 the
// voters' listeners and directory ids, KIP-853), on a broker that runs
// the quorum (quorum.go).
func init() { registerOptionalAPI(55, 0, 2, servesQuorum, handleDescribeQuorum) }

// handleDescribeQuorum answers the quorum as its leader sees it
// (coord.Quorum.DescribeQuorum, a round trip to the leader from any other
// broker, bounded by quorumWait): KRaft's __cluster_metadata partition 0
// with the leader, its epoch (the Raft term), the high watermark (the
// commit index) and every voter's and observer's log end. A request for
// any other partition gets UNKNOWN_TOPIC_OR_PARTITION for each partition
// it names; no reachable leader gets NOT_LEADER_OR_FOLLOWER on the
// partition, as from a Kafka controller that does not lead. With an
// authorizer the request needs DESCRIBE on the cluster
// (security/rules.go).
func handleDescribeQuorum(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeQuorumRequest)
	if !asksQuorumPartition(r) {
		return unknownQuorumPartitions(r), nil, nil
	}
	q, _ := b.quorum()
	return nil, func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, quorumWait)
		defer cancel()
		st, err := q.DescribeQuorum(ctx)
		_, live, _ := b.cache.View()
		return describeQuorumResponse(r.Version, st, err, live, time.Now())
	}, nil
}

// asksQuorumPartition reports whether r asks about the quorum's
// partition alone, as Kafka's RaftUtil.hasValidTopicPartition.
func asksQuorumPartition(r *kmsg.DescribeQuorumRequest) bool {
	return len(r.Topics) == 1 && r.Topics[0].Topic == quorumTopic &&
		len(r.Topics[0].Partitions) == 1 && r.Topics[0].Partitions[0].Partition == quorumPartition
}

// unknownQuorumPartitions answers every partition r names with
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
// DescribeQuorumRequest.getPartitionLevelErrorResponse.
func unknownQuorumPartitions(r *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			rp.LeaderID = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
