package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// stopReplicaVersion is the StopReplica version the controller sends and
// brokers accept: v3 carries a delete flag and leader epoch per partition.
const stopReplicaVersion = 3

// StopReplica v3 (broker epoch, a delete flag per partition): the
// controller stops a broker's replicas, deleting their logs on topic
// deletion.
func init() { registerAPI(5, stopReplicaVersion, stopReplicaVersion, handleStopReplica) }

// handleStopReplica decodes the request and applies it (ApplyStopReplica),
// a newer controller epoch looked up in the backend first, as for
// LeaderAndIsr.
func handleStopReplica(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.StopReplicaRequest)
	resp := r.ResponseKind().(*kmsg.StopReplicaResponse)
	// A request mixing deleted and kept partitions is applied as two.
	requests := map[bool]*controller.StopReplicaRequest{}
	for _, t := range r.Topics {
		for _, ps := range t.PartitionStates {
			cr := requests[ps.Delete]
			if cr == nil {
				cr = &controller.StopReplicaRequest{ControllerID: coord.BrokerID(r.ControllerID),
					ControllerEpoch: int64(r.ControllerEpoch), BrokerEpoch: r.BrokerEpoch, Delete: ps.Delete}
				requests[ps.Delete] = cr
			}
			cr.Partitions = append(cr.Partitions, coord.TopicPartition{Topic: t.Topic, Partition: ps.Partition})
		}
	}
	if len(requests) == 0 {
		requests[false] = &controller.StopReplicaRequest{ControllerID: coord.BrokerID(r.ControllerID),
			ControllerEpoch: int64(r.ControllerEpoch), BrokerEpoch: r.BrokerEpoch}
	}
	if err := b.member.awaitBackendController(ctx, int64(r.ControllerEpoch)); err != nil {
		return nil, nil, err
	}
	for _, cr := range requests {
		if code := b.replicas.ApplyStopReplica(ctx, cr); code != 0 {
			resp.ErrorCode = code
		}
	}
	for _, t := range r.Topics {
		for _, ps := range t.PartitionStates {
			rp := kmsg.NewStopReplicaResponsePartition()
			rp.Topic, rp.Partition, rp.ErrorCode = t.Topic, ps.Partition, resp.ErrorCode
			resp.Partitions = append(resp.Partitions, rp)
		}
	}
	return resp, nil, nil
}

// encodeStopReplica is the wire form of the controller's request r, as
// the controller's sender sends it to another broker.
func encodeStopReplica(r *controller.StopReplicaRequest) *kmsg.StopReplicaRequest {
	k := kmsg.NewPtrStopReplicaRequest()
	k.SetVersion(stopReplicaVersion)
	k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
	byTopic := map[string]int{}
	for _, tp := range r.Partitions {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewStopReplicaRequestTopic()
			t.Topic = tp.Topic
			k.Topics = append(k.Topics, t)
			i = len(k.Topics) - 1
			byTopic[tp.Topic] = i
		}
		ps := kmsg.NewStopReplicaRequestTopicPartitionState()
		ps.Partition, ps.LeaderEpoch, ps.Delete = tp.Partition, -1, r.Delete
		k.Topics[i].PartitionStates = append(k.Topics[i].PartitionStates, ps)
	}
	return k
}
