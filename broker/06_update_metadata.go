package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// updateMetadataVersion is the UpdateMetadata version the controller sends
// and brokers accept: v7 carries broker epochs and topic IDs.
const updateMetadataVersion = 7

// deletedTopicLeader marks a deleted topic in UpdateMetadata (Kafka's
// LeaderDuringDelete).
const deletedTopicLeader = -2

// UpdateMetadata v7 (broker epoch, topic IDs): the controller refreshes
// every broker's metadata cache.
func init() { registerAPI(6, updateMetadataVersion, updateMetadataVersion, handleUpdateMetadata) }

// handleUpdateMetadata decodes the request and applies it
// (ApplyUpdateMetadata). A live broker's endpoints are its listeners; its
// address is its endpoint on this broker's inter-broker listener. A topic
// whose one partition state has leader -2 was deleted. A newer controller
// epoch is looked up in the backend first, as for LeaderAndIsr.
func handleUpdateMetadata(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.UpdateMetadataRequest)
	resp := r.ResponseKind().(*kmsg.UpdateMetadataResponse)
	cr := updateMetadataFromWire(r, b.interBroker.Name)
	if err := b.member.awaitBackendController(ctx, cr.ControllerEpoch); err != nil {
		return nil, nil, err
	}
	resp.ErrorCode = b.replicas.ApplyUpdateMetadata(ctx, cr)
	return resp, nil, nil
}

// updateMetadataFromWire is the controller's request that r carries, the
// live brokers' addresses on listener interBroker.
func updateMetadataFromWire(r *kmsg.UpdateMetadataRequest, interBroker string) *controller.UpdateMetadataRequest {
	cr := &controller.UpdateMetadataRequest{
		ControllerID: coord.BrokerID(r.ControllerID), ControllerEpoch: int64(r.ControllerEpoch), BrokerEpoch: r.BrokerEpoch,
	}
	for _, lb := range r.LiveBrokers {
		live := coord.Broker{ID: coord.BrokerID(lb.ID), Host: lb.Host, Port: lb.Port}
		for _, ep := range lb.Endpoints {
			live.Endpoints = append(live.Endpoints, coord.Endpoint{Listener: ep.ListenerName, Host: ep.Host, Port: ep.Port,
				SecurityProtocol: config.SecurityProtocolName(ep.SecurityProtocol)})
		}
		// A broker's registered address is its inter-broker
		// listener's, which every broker of the cluster shares.
		if ep, ok := live.ListenerEndpoint(interBroker); ok && len(live.Endpoints) > 0 {
			live.Host, live.Port = ep.Host, ep.Port
		} else if len(live.Endpoints) > 0 {
			live.Host, live.Port = live.Endpoints[0].Host, live.Endpoints[0].Port
		}
		if lb.Rack != nil {
			live.Rack = *lb.Rack
		}
		cr.Live = append(cr.Live, live)
	}
	for _, ts := range r.TopicStates {
		if len(ts.PartitionStates) == 1 && ts.PartitionStates[0].Leader == deletedTopicLeader {
			cr.Deleted = append(cr.Deleted, ts.Topic)
			continue
		}
		for _, ps := range ts.PartitionStates {
			cr.Partitions = append(cr.Partitions, controller.PartitionInfo{
				PartitionState: coord.PartitionState{
					Topic: ts.Topic, Partition: ps.Partition, Leader: coord.BrokerID(ps.Leader), LeaderEpoch: ps.LeaderEpoch,
					ISR: coord.BrokerIDs(ps.ISR), PartitionEpoch: ps.ZKVersion, ControllerEpoch: int64(ps.ControllerEpoch),
				},
				TopicID: ts.TopicID, Replicas: coord.BrokerIDs(ps.Replicas),
			})
		}
	}
	return cr
}

// encodeUpdateMetadata is the wire form of the controller's request r, as
// the controller's sender sends it to another broker: each live broker's
// endpoints (a broker registered without any has its address on the
// PLAINTEXT listener), each partition's offline replicas (those of no
// live broker), and each deleted topic as one partition state led by
// deletedTopicLeader.
func encodeUpdateMetadata(r *controller.UpdateMetadataRequest) *kmsg.UpdateMetadataRequest {
	k := kmsg.NewPtrUpdateMetadataRequest()
	k.SetVersion(updateMetadataVersion)
	k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
	live := map[coord.BrokerID]bool{}
	for _, l := range r.Live {
		live[l.ID] = true
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID = int32(l.ID)
		endpoints := l.Endpoints
		if len(endpoints) == 0 {
			implied, _ := l.ListenerEndpoint(protocolPlaintext)
			endpoints = []coord.Endpoint{implied}
		}
		for _, e := range endpoints {
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port, ep.ListenerName = e.Host, e.Port, e.Listener
			ep.SecurityProtocol, _ = config.SecurityProtocolID(e.SecurityProtocol)
			lb.Endpoints = append(lb.Endpoints, ep)
		}
		if l.Rack != "" {
			rack := l.Rack
			lb.Rack = &rack
		}
		k.LiveBrokers = append(k.LiveBrokers, lb)
	}
	byTopic := map[string]int{}
	for _, p := range r.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			ts := kmsg.NewUpdateMetadataRequestTopicState()
			ts.Topic, ts.TopicID = p.Topic, p.TopicID
			k.TopicStates = append(k.TopicStates, ts)
			i = len(k.TopicStates) - 1
			byTopic[p.Topic] = i
		}
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch = p.Partition, int32(p.ControllerEpoch)
		ps.Leader, ps.LeaderEpoch, ps.ZKVersion = int32(p.Leader), p.LeaderEpoch, p.PartitionEpoch
		ps.ISR, ps.Replicas = coord.Int32s(p.ISR), coord.Int32s(p.Replicas)
		ps.OfflineReplicas = []int32{}
		for _, id := range p.Replicas {
			if !live[id] {
				ps.OfflineReplicas = append(ps.OfflineReplicas, int32(id))
			}
		}
		k.TopicStates[i].PartitionStates = append(k.TopicStates[i].PartitionStates, ps)
	}
	for _, name := range r.Deleted {
		ts := kmsg.NewUpdateMetadataRequestTopicState()
		ts.Topic = name
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.Leader = -1, deletedTopicLeader
		ts.PartitionStates = []kmsg.UpdateMetadataRequestTopicPartition{ps}
		k.TopicStates = append(k.TopicStates, ts)
	}
	return k
}
