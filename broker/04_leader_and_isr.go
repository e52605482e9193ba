package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// LeaderAndIsr v5 (broker epoch, topic IDs): the controller tells a
// replica whether it leads or follows.
func init() { registerAPI(4, leaderAndIsrVersion, leaderAndIsrVersion, handleLeaderAndIsr) }

// handleLeaderAndIsr decodes the request, applies it (applyLeaderAndIsr)
// and answers each partition's outcome: 0, KAFKA_STORAGE_ERROR for an
// offline replica, or the request's refusal. A controller epoch newer
// than the accepted one is first looked up in the coordination backend
// (awaitBackendController); when the backend cannot be read, the
// connection closes and the controller's sender retries.
func handleLeaderAndIsr(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.LeaderAndISRRequest)
	resp := r.ResponseKind().(*kmsg.LeaderAndISRResponse)
	cr := &controller.LeaderAndIsrRequest{
		ControllerID: coord.BrokerID(r.ControllerID), ControllerEpoch: int64(r.ControllerEpoch), BrokerEpoch: r.BrokerEpoch,
	}
	for _, ts := range r.TopicStates {
		for _, ps := range ts.PartitionStates {
			cr.Partitions = append(cr.Partitions, controller.PartitionInfo{
				PartitionState: coord.PartitionState{
					Topic: ts.Topic, Partition: ps.Partition, Leader: coord.BrokerID(ps.Leader), LeaderEpoch: ps.LeaderEpoch,
					ISR: brokerIDs(ps.ISR), PartitionEpoch: ps.ZKVersion, ControllerEpoch: int64(ps.ControllerEpoch),
				},
				TopicID: ts.TopicID, Replicas: brokerIDs(ps.Replicas), IsNew: ps.IsNew,
			})
		}
	}
	for _, l := range r.LiveLeaders {
		cr.Leaders = append(cr.Leaders, coord.Broker{ID: coord.BrokerID(l.BrokerID), Host: l.Host, Port: l.Port})
	}
	if err := b.awaitBackendController(ctx, cr.ControllerEpoch); err != nil {
		return nil, nil, err
	}
	var codes []int16
	resp.ErrorCode, codes = b.applyLeaderAndIsr(ctx, cr)
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
