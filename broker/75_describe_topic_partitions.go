package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/txn"
)

// DescribeTopicPartitions v0 (KIP-966): the topics' partitions, paged,
// which Kafka's admin client (kafka-topics --describe) asks from 3.8 on
// instead of Metadata.
func init() { registerAPI(75, 0, 0, handleDescribeTopicPartitions) }

// describeTopicPartitionsLimit is Kafka's max.request.partition.size.limit
// default: an answer holds at most this many partitions, whatever the
// request's response_partition_limit.
const describeTopicPartitionsLimit = 2000

// handleDescribeTopicPartitions answers as Kafka's
// DescribeTopicPartitionsRequestHandler: the named topics (all of them
// when none are named) from the cursor on, sorted by name, each with its
// partitions from the cursor's partition index (for the cursor's topic)
// in partition order, at most response_partition_limit partitions in all
// (1 .. 2000); NextCursor names where the next page starts when
// partitions are left. A named topic that does not exist is answered
// UNKNOWN_TOPIC_OR_PARTITION; a topic the principal may not DESCRIBE was
// taken out by the authorizer's rule (security.authorizeDescribeTopicPartitions),
// which answers it TOPIC_AUTHORIZATION_FAILED when named. Partitions are
// answered as Metadata answers them (leader, epoch, replicas, ISR,
// offline replicas); tripod has no eligible leader replicas (KIP-966's
// ELR), so those lists are empty.
func handleDescribeTopicPartitions(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	cursorTopic, cursorPartition := "", int32(0)
	if r.Cursor != nil {
		cursorTopic, cursorPartition = r.Cursor.Topic, r.Cursor.Partition
	}
	var names []string
	allTopics := len(r.Topics) == 0
	if allTopics {
		for _, t := range b.cache.AllTopics() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range r.Topics {
			if t.Topic >= cursorTopic && !slices.Contains(names, t.Topic) {
				names = append(names, t.Topic)
			}
		}
		if r.Cursor != nil && !slices.Contains(names, cursorTopic) {
			return describeTopicPartitionsError(r, kerr.InvalidRequest), nil, nil
		}
	}
	if r.Cursor != nil && cursorPartition < 0 {
		return describeTopicPartitionsError(r, kerr.InvalidRequest), nil, nil
	}
	slices.Sort(names)
	_, live, _ := b.cache.View()
	liveSet := map[coord.BrokerID]bool{}
	for _, lb := range live {
		liveSet[lb.ID] = true
	}
	remaining := int(min(max(r.ResponsePartitionLimit, 1), describeTopicPartitionsLimit))
	for _, name := range names {
		if remaining == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = &name
		rt.IsInternal = isInternalTopic(name)
		rt.AuthorizedOperations = security.AllOperations(coord.ACLResourceTopic)
		t, ok := b.cache.Topic(name)
		if !ok {
			if !allTopics {
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		rt.TopicID = t.ID
		md := metadataTopic(t, liveSet)
		slices.SortFunc(md.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
		start := int32(0)
		if name == cursorTopic {
			start = cursorPartition
		}
		for i, p := range md.Partitions {
			if p.Partition < start {
				continue
			}
			if remaining == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: md.Partitions[i].Partition}
				break
			}
			dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			dp.ErrorCode, dp.Partition, dp.LeaderID, dp.LeaderEpoch = p.ErrorCode, p.Partition, p.Leader, p.LeaderEpoch
			dp.Replicas, dp.ISR, dp.OfflineReplicas = p.Replicas, p.ISR, p.OfflineReplicas
			dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
			rt.Partitions = append(rt.Partitions, dp)
			remaining--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return resp, nil, nil
}

// describeTopicPartitionsError answers every named topic with err, as
// Kafka answers a request it refuses whole.
func describeTopicPartitionsError(r *kmsg.DescribeTopicPartitionsRequest, err *kerr.Error) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(t.Topic), err.Code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// isInternalTopic reports whether name is one of Kafka's internal topics,
// which tripod keeps too: the group and transaction coordinators' logs.
func isInternalTopic(name string) bool {
	return name == group.OffsetsTopic || name == txn.StateTopic
}
