package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// UpdateMetadata v7 (broker epoch, topic IDs): the controller refreshes
// every broker's metadata cache.
func init() { registerAPI(6, updateMetadataVersion, updateMetadataVersion, handleUpdateMetadata) }

// handleUpdateMetadata decodes the request and applies it
// (applyUpdateMetadata). A live broker's endpoints are its listeners; its
// address is its endpoint on this broker's inter-broker listener. A topic
// whose one partition state has leader -2 was deleted. A newer controller
// epoch is looked up in the backend first, as for LeaderAndIsr.
func handleUpdateMetadata(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.UpdateMetadataRequest)
	resp := r.ResponseKind().(*kmsg.UpdateMetadataResponse)
	cr := updateMetadataFromWire(r, b.interBroker.name)
	if err := b.awaitBackendController(ctx, cr.ControllerEpoch); err != nil {
		return nil, nil, err
	}
	resp.ErrorCode = b.applyUpdateMetadata(ctx, cr)
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
				SecurityProtocol: securityProtocolName(ep.SecurityProtocol)})
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
					ISR: brokerIDs(ps.ISR), PartitionEpoch: ps.ZKVersion, ControllerEpoch: int64(ps.ControllerEpoch),
				},
				TopicID: ts.TopicID, Replicas: brokerIDs(ps.Replicas),
			})
		}
	}
	return cr
}
