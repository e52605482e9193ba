package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeClusterNamesControllerAndBrokers asks every broker of a
// three-broker cluster DescribeCluster: each names the cluster, the
// controller Metadata names and all three brokers; asking for controller
// endpoints (type 2) gets UNSUPPORTED_ENDPOINT_TYPE.
func TestDescribeClusterNamesControllerAndBrokers(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	for _, b := range brokers {
		ctx := testContext(t, 30*time.Second)
		if !b.cache.WaitFor(ctx, b.closing, func() bool { _, live, _ := b.cache.View(); return len(live) == 3 }) {
			t.Fatalf("broker %d does not list 3 live brokers within 30s", b.ID())
		}
		controller, live, _ := metadataOf(t, b, "")
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = describeClusterBrokers
		resp := askBroker[*kmsg.DescribeClusterResponse](t, b, req)
		if resp.ErrorCode != 0 || resp.ClusterID != clusterID || resp.ControllerID != controller {
			t.Fatalf("broker %d: got error %d, cluster %q, controller %d; want 0, %q, %d",
				b.ID(), resp.ErrorCode, resp.ClusterID, resp.ControllerID, clusterID, controller)
		}
		var ids []int32
		for _, rb := range resp.Brokers {
			ids = append(ids, rb.NodeID)
		}
		if len(ids) != len(live) || len(ids) != 3 {
			t.Fatalf("broker %d: got brokers %v, want the 3 live ones %v", b.ID(), ids, live)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp := askBroker[*kmsg.DescribeClusterResponse](t, brokers[0], req)
	if resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controller endpoints: got error %d, want UNSUPPORTED_ENDPOINT_TYPE", resp.ErrorCode)
	}
}
