package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
)

// ListOffsets v0..v9: v0 answers a list of old-style offsets (sarama
// configured for Kafka 0.10.0 and older asks so), v1 the one offset; v7
// adds the max-timestamp query (KIP-734), v8 and v9 the tiered-storage
// ones (KIP-1005).
func init() { registerAPI(2, 0, 9, handleListOffsets) }

// Special timestamps of a ListOffsets query.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
	// listEarliestLocal is the start of the log on the broker's own disk:
	// the log start, since tripod keeps no tiered storage.
	listEarliestLocal = -4
	// listLatestTiered is the last offset in tiered storage: none.
	listLatestTiered = -5
)

// debuggingReplicaID is Kafka's DEBUGGING_REPLICA_ID: a ListOffsets from
// it is answered by any replica, leader or follower, and its latest is
// that replica's log end offset, with no isolation level applied. tripod's
// console reads each replica's LEO so.
const debuggingReplicaID = -2

// handleListOffsets answers earliest (-2, and -4 earliest-local: the log
// start offset), latest (-1: the high watermark), max-timestamp (-3: the
// last offset of the batch below the high watermark with the largest
// timestamp), latest-tiered (-5: -1, nothing is tiered) and by-timestamp
// queries (the first offset whose timestamp is at or after it, or -1 if
// none). For a read_committed consumer (isolation level 1) the last
// stable offset takes the high watermark's place in each, as Kafka's
// lastFetchableOffset does.
//
// v0 answers the offset in a list of at most MaxNumOffsets: for earliest
// and latest what Kafka's legacy answer starts with (the log start; the
// high watermark), for a timestamp the offset v1 answers. Kafka lists,
// after the first, the base offsets of older segments; tripod lists none.
//
// From the debugging replica id (-2) a follower answers too, and latest
// is the replica's log end offset: what Kafka answers when
// fetchOnlyFromLeader is false.
func handleListOffsets(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset = -1
			sp.Timestamp = -1
			p, code := b.replicas.LeaderFor(rt.Topic, rp.Partition)
			if r.ReplicaID == debuggingReplicaID {
				p, code = b.replicas.ReplicaFor(rt.Topic, rp.Partition)
			}
			var leaderEpoch int32
			var fetchable int64
			if p != nil {
				leaderEpoch = p.LeaderEpoch()
				fetchable = p.HighWatermark()
				if r.IsolationLevel == 1 {
					fetchable = p.LastStableOffset()
				}
			}
			switch {
			case p == nil:
				sp.ErrorCode = code
			case r.Version >= 4 && replica.CheckLeaderEpoch(rp.CurrentLeaderEpoch, leaderEpoch) != 0:
				sp.ErrorCode = replica.CheckLeaderEpoch(rp.CurrentLeaderEpoch, leaderEpoch)
			case rp.Timestamp == listEarliest || (rp.Timestamp == listEarliestLocal && r.Version >= 8):
				sp.Offset = p.Log().StartOffset()
				sp.LeaderEpoch = leaderEpoch
			case rp.Timestamp == listLatestTiered && r.Version >= 9:
				sp.LeaderEpoch = leaderEpoch
			case rp.Timestamp == listMaxTimestamp && r.Version >= 7:
				offset, ts, ok, err := p.Log().MaxTimestamp(fetchable)
				switch {
				case err != nil:
					b.logger.Error("max timestamp failed", "partition", p.Name(), "error", err)
					sp.ErrorCode = kerr.UnknownServerError.Code
				case ok:
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch
				}
			case rp.Timestamp == listLatest && (r.ReplicaID >= 0 || r.ReplicaID == debuggingReplicaID):
				// A follower asks for the log end (to truncate to it); a
				// debugging client for this replica's.
				sp.Offset = p.Log().EndOffset()
				sp.LeaderEpoch = leaderEpoch
			case rp.Timestamp == listLatest:
				sp.Offset = fetchable
				sp.LeaderEpoch = leaderEpoch
			case rp.Timestamp < 0:
				sp.ErrorCode = kerr.InvalidRequest.Code
			default:
				offset, ts, ok, err := p.Log().OffsetForTime(rp.Timestamp)
				switch {
				case err != nil:
					b.logger.Error("offset for time failed", "partition", p.Name(), "timestamp", rp.Timestamp, "error", err)
					sp.ErrorCode = kerr.UnknownServerError.Code
				case ok && offset < fetchable:
					sp.Offset = offset
					sp.Timestamp = ts
					sp.LeaderEpoch = leaderEpoch
				}
			}
			if r.Version == 0 {
				sp.OldStyleOffsets = []int64{}
				if sp.ErrorCode == 0 && sp.Offset >= 0 && rp.MaxNumOffsets > 0 {
					sp.OldStyleOffsets = append(sp.OldStyleOffsets, sp.Offset)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}
