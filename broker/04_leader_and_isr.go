package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// leaderAndIsrVersion is the LeaderAndIsr version the controller sends and
// brokers accept: v5 carries broker epochs and topic IDs.
const leaderAndIsrVersion = 5

// LeaderAndIsr v5 (broker epoch, topic IDs): the controller tells a
// replica whether it leads or follows.
func init() { registerAPI(4, leaderAndIsrVersion, leaderAndIsrVersion, handleLeaderAndIsr) }

// handleLeaderAndIsr decodes the request, applies it (ApplyLeaderAndIsr)
// and answers each partition's outcome: 0, KAFKA_STORAGE_ERROR for an
// offline replica, or the request's refusal. A controller epoch newer
// than the accepted one is first looked up in the coordination backend
// (awaitBackendController); when the backend cannot be read, the
// connection closes and the controller's sender retries.
func handleLeaderAndIsr(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.LeaderAndISRRequest)
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	cr := leaderAndIsrFromWire(r)
	if err := b.member.awaitBackendController(ctx, cr.ControllerEpoch); err != nil {
		return nil, nil, err
	}
	var codes []int16
	resp.ErrorCode, codes = b.replicas.ApplyLeaderAndIsr(ctx, cr)
	i := 0
	for _, ts := range r.TopicStates {
		rt := kmsg.NewLeaderAndISRResponseTopic()
		rt.TopicID = ts.TopicID
		for _, ps := range ts.PartitionStates {
			rp := kmsg.NewLeaderAndISRResponseTopicPartition()
			rp.Partition, rp.ErrorCode = ps.Partition, codes[i]
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, nil
}

// leaderAndIsrFromWire is the controller's request that r carries.
func leaderAndIsrFromWire(r *kmsg.LeaderAndISRRequest) *controller.LeaderAndIsrRequest {
	cr := &controller.LeaderAndIsrRequest{
		ControllerID: coord.BrokerID(r.ControllerID), ControllerEpoch: int64(r.ControllerEpoch), BrokerEpoch: r.BrokerEpoch,
	}
	for _, ts := range r.TopicStates {
		for _, ps := range ts.PartitionStates {
			cr.Partitions = append(cr.Partitions, controller.PartitionInfo{
				PartitionState: coord.PartitionState{
					Topic: ts.Topic, Partition: ps.Partition, Leader: coord.BrokerID(ps.Leader), LeaderEpoch: ps.LeaderEpoch,
					ISR: coord.BrokerIDs(ps.ISR), PartitionEpoch: ps.ZKVersion, ControllerEpoch: int64(ps.ControllerEpoch),
				},
				TopicID: ts.TopicID, Replicas: coord.BrokerIDs(ps.Replicas), IsNew: ps.IsNew,
			})
		}
	}
	for _, l := range r.LiveLeaders {
		cr.Leaders = append(cr.Leaders, coord.Broker{ID: coord.BrokerID(l.BrokerID), Host: l.Host, Port: l.Port})
	}
	return cr
}

// encodeLeaderAndIsr is the wire form of the controller's request r, as
// the controller's sender sends it to another broker.
func encodeLeaderAndIsr(r *controller.LeaderAndIsrRequest) *kmsg.LeaderAndISRRequest {
	k := kmsg.NewPtrLeaderAndISRRequest()
	k.SetVersion(leaderAndIsrVersion)
	k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
	byTopic := map[string]int{}
	for _, p := range r.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			ts := kmsg.NewLeaderAndISRRequestTopicState()
			ts.Topic, ts.TopicID = p.Topic, p.TopicID
			k.TopicStates = append(k.TopicStates, ts)
			i = len(k.TopicStates) - 1
			byTopic[p.Topic] = i
		}
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch = p.Partition, int32(p.ControllerEpoch)
		ps.Leader, ps.LeaderEpoch, ps.ZKVersion = int32(p.Leader), p.LeaderEpoch, p.PartitionEpoch
		ps.ISR, ps.Replicas, ps.IsNew = coord.Int32s(p.ISR), coord.Int32s(p.Replicas), p.IsNew
		k.TopicStates[i].PartitionStates = append(k.TopicStates[i].PartitionStates, ps)
	}
	for _, l := range r.Leaders {
		ll := kmsg.NewLeaderAndISRRequestLiveLeader()
		ll.BrokerID, ll.Host, ll.Port = int32(l.ID), l.Host, l.Port
		k.LiveLeaders = append(k.LiveLeaders, ll)
	}
	return k
}

// decodeLeaderAndIsrResponse is what a broker's answer to r tells the
// controller: the top-level error code and the partitions answered
// KAFKA_STORAGE_ERROR (named by topic ID in v5, by topic name before). r
// may be nil: then v5's partitions cannot be named.
func decodeLeaderAndIsrResponse(r *controller.LeaderAndIsrRequest, resp *kmsg.LeaderAndISRResponse) replica.ControllerAnswer {
	ans := replica.ControllerAnswer{Code: resp.ErrorCode}
	if resp.ErrorCode != 0 {
		return ans
	}
	names := map[[16]byte]string{}
	if r != nil {
		for _, p := range r.Partitions {
			names[p.TopicID] = p.Topic
		}
	}
	for _, p := range resp.Partitions { // v0..v4
		if p.ErrorCode == kerr.KafkaStorageError.Code {
			ans.Offline = append(ans.Offline, coord.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
	}
	for _, t := range resp.Topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode == kerr.KafkaStorageError.Code {
				ans.Offline = append(ans.Offline, coord.TopicPartition{Topic: name, Partition: p.Partition})
			}
		}
	}
	return ans
}
