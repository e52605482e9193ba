package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// WriteTxnMarkers v0..v1 (KIP-98; v1 is the flexible version): a
// transaction coordinator ends a transaction on the partitions it wrote
// to.
func init() { registerAPI(27, 0, 1, handleWriteTxnMarkers) }

// txnMarkerTimeout bounds the wait for a marker's replication, Kafka's
// request.timeout.ms default, which its WriteTxnMarkers waits as long.
const txnMarkerTimeout = 30 * time.Second

// handleWriteTxnMarkers writes, for every marker and every partition it
// names, the control batch that commits or aborts the producer's
// transaction (log.BuildMarker) as the partition's leader, acks=all, as
// Kafka's KafkaApis.handleWriteTxnMarkersRequest does. The authorizer
// requires CLUSTER_ACTION on the cluster (only a coordinator sends it). A
// partition this broker does not lead gets the error LeaderFor answers
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION); a marker whose
// producer epoch is older than the partition's current epoch for the
// producer id gets INVALID_PRODUCER_EPOCH (a newer one is written and
// becomes the producer's epoch), one whose coordinator epoch is older
// than that of the producer's last marker TRANSACTION_COORDINATOR_FENCED;
// an append's other errors and the outcome of the wait for the high
// watermark are mapped as Produce maps them. The waits run after the
// connection's reader moves on. Once a marker is replicated on a
// partition of __consumer_offsets, the group coordinator is told
// (txnMarkerWritten).
func handleWriteTxnMarkers(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := time.Now()
	deadline := now.Add(txnMarkerTimeout)
	// waiting is a marker appended to a partition: its place in the
	// response, the partition and the channel its acks=all outcome
	// arrives on.
	type waiting struct {
		marker, topic, partition int
		p                        *replica.Partition
		done                     <-chan error
	}
	var waits []waiting
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, index := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = index
				var p *replica.Partition
				var done <-chan error
				p, rp.ErrorCode, done = b.writeTxnMarker(m, mt.Topic, index, now, deadline)
				rt.Partitions = append(rt.Partitions, rp)
				if done != nil {
					waits = append(waits, waiting{marker: len(resp.Markers), topic: len(rm.Topics), partition: len(rt.Partitions) - 1, p: p, done: done})
				}
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
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
			m := r.Markers[w.marker]
			rp := &resp.Markers[w.marker].Topics[w.topic].Partitions[w.partition]
			select {
			case err := <-w.done:
				rp.ErrorCode = replica.AppendErrors.Code(err)
			case <-backstop.C:
				rp.ErrorCode = kerr.RequestTimedOut.Code
			case <-ctx.Done():
				return resp
			case <-b.closing:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
			if rp.ErrorCode == 0 && w.p.Topic() == group.OffsetsTopic {
				b.txnMarkerWritten(w.p, m.ProducerID, m.Committed)
			}
		}
		return resp
	}, nil
}

// writeTxnMarker appends marker m to partition index of topic, if this
// broker leads it, and returns the partition, the Kafka error code and
// the channel on which the outcome of the wait for the high watermark
// arrives (nil when the append failed).
func (b *Broker) writeTxnMarker(m kmsg.WriteTxnMarkersRequestMarker, topic string, index int32, now, deadline time.Time) (*replica.Partition, int16, <-chan error) {
	p, code := b.replicas.LeaderFor(topic, index)
	if p == nil {
		return nil, code, nil
	}
	batch := tlog.BuildMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, now)
	_, done, err := b.replicas.AppendAsLeader(p, batch, true, deadline)
	if err != nil {
		if b.replicas.CheckStorage(p, err) {
			return p, kerr.KafkaStorageError.Code, nil
		}
		code := replica.AppendErrors.Code(err)
		if code == kerr.UnknownServerError.Code {
			b.logger.Error("transaction marker append failed", "partition", p.Name(), "producer_id", m.ProducerID, "error", err)
		}
		return p, code, nil
	}
	return p, 0, done
}
