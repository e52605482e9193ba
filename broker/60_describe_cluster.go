package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0..v2 (KIP-700; v1 endpoint types, v2 fenced brokers).
func init() { registerAPI(60, 0, 2, handleDescribeCluster) }

// describeClusterBrokers is DescribeCluster's endpoint type for brokers;
// tripod has no separate controller nodes to describe (type 2).
const describeClusterBrokers = 1

// handleDescribeCluster answers from the metadata cache, as Metadata does:
// the cluster id, the controller and the live brokers at their endpoints
// on the request's listener. Every live broker
// is registered, so none is fenced. Authorized operations are not
// computed: they are Kafka's "not requested". With an authorizer the
// request needs DESCRIBE on the cluster (security/rules.go).
func handleDescribeCluster(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = -2147483648
	if r.Version >= 1 && r.EndpointType != describeClusterBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "tripod describes brokers (endpoint type 1) only"
		resp.ErrorMessage = &msg
		return resp, nil, nil
	}
	// A Metadata request for no topic gives the brokers and controller.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	mreq.Topics = []kmsg.MetadataRequestTopic{}
	md := b.metadata(context.Background(), mreq, false, req.conn.listener.Name).(*kmsg.MetadataResponse)
	resp.ClusterID = clusterID
	resp.ControllerID = md.ControllerID
	for _, mb := range md.Brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = mb.NodeID, mb.Host, mb.Port, mb.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil, nil
}
