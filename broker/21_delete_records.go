package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/replication"
)

// DeleteRecords v0..v2 (KIP-107; v2 is flexible).
func init() { registerAPI(21, 0, 2, handleDeleteRecords) }

// handleDeleteRecords moves each partition's log start offset up to the
// requested offset (-1: the high watermark) on its leader, as Kafka's
// does: the records below can no longer be read (a fetch below gets
// OFFSET_OUT_OF_RANGE, ListOffsets earliest answers the new log start),
// the log start is checkpointed before the answer and every follower
// raises its own when its next fetch response carries the leader's; the
// segments wholly below it go at the next retention check
// (log.retention.check.interval.ms). A partition is answered once every
// ISR member's log start has reached the offset (its low_watermark, the
// lowest log start over the leader and the ISR), or REQUEST_TIMED_OUT at
// the request's timeout. An offset above the high watermark is
// OFFSET_OUT_OF_RANGE; a partition led elsewhere NOT_LEADER_OR_FOLLOWER;
// __consumer_offsets INVALID_TOPIC_EXCEPTION; a topic whose cleanup.policy
// is compact alone POLICY_VIOLATION. A refused partition changes nothing.
func handleDeleteRecords(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deadline := time.Now().Add(time.Duration(max(r.TimeoutMillis, 0)) * time.Millisecond)
	// waiting is a partition whose answer waits for the low watermark:
	// its place in the response and the channel its outcome arrives on.
	type waiting struct {
		topic, partition int
		done             <-chan replication.DeleteResult
	}
	var waits []waiting
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			var done <-chan replication.DeleteResult
			sp.ErrorCode, done = b.deleteRecords(rt.Topic, rp.Partition, rp.Offset, deadline)
			st.Partitions = append(st.Partitions, sp)
			if done != nil {
				waits = append(waits, waiting{topic: len(resp.Topics), partition: len(st.Partitions) - 1, done: done})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) == 0 {
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		// The state machine fails a wait at its deadline; the timer is
		// a backstop for a partition removed while waiting.
		backstop := time.NewTimer(time.Until(deadline) + time.Second)
		defer backstop.Stop()
		for _, w := range waits {
			sp := &resp.Topics[w.topic].Partitions[w.partition]
			select {
			case res := <-w.done:
				sp.LowWatermark = res.LowWatermark
				sp.ErrorCode = replica.AppendErrors.Code(res.Err)
			case <-backstop.C:
				sp.ErrorCode = kerr.RequestTimedOut.Code
			case <-ctx.Done():
				return resp
			case <-b.closing:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
		}
		return resp
	}, nil
}

// deleteRecords moves one partition's log start offset to offset as
// handleDeleteRecords describes. It returns the Kafka error code and,
// when the offset was accepted, the channel on which the outcome of the
// wait for the low watermark arrives.
func (b *Broker) deleteRecords(topic string, index int32, offset int64, deadline time.Time) (int16, <-chan replication.DeleteResult) {
	if topic == group.OffsetsTopic {
		return kerr.InvalidTopicException.Code, nil
	}
	p, code := b.replicas.LeaderFor(topic, index)
	if p == nil {
		return code, nil
	}
	if _, del := config.CleanupPolicy(p.TopicConfigs()); !del {
		return kerr.PolicyViolation.Code, nil
	}
	return b.replicas.DeleteRecordsAsLeader(p, offset, deadline)
}
