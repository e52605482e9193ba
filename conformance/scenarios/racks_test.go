package scenarios

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestBrokerRackInMetadata starts, on each backend, three brokers in two
// racks (cluster.Config.Racks, broker.rack round-robin, as `tripod dev
// --racks` does) and checks that every broker's Metadata and
// DescribeCluster name every broker with its configured rack: the rack
// went through the backend's registration and back. A topic created
// then has every partition's two replicas in both racks, as the
// controller places replicas by the racks the backend gave it.
func TestBrokerRackInMetadata(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startClusterWith(t, backend, 3, func(cfg *cluster.Config) { cfg.Racks = []string{"az1", "az2"} })
		want := map[int32]string{1: "az1", 2: "az2", 3: "az1"}
		ctx := context.Background()
		err := cluster.WaitFor(ctx, settle, func() error {
			return c.EveryLive(ctx, func(md *cluster.Metadata) error {
				if !maps.Equal(md.Racks, want) {
					return fmt.Errorf("Metadata racks %v, want %v", md.Racks, want)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range c.Brokers() {
			if b.Rack != want[b.ID] {
				t.Errorf("broker %d: cluster says rack %q, want %q", b.ID, b.Rack, want[b.ID])
			}
			resp, err := c.Request(ctx, b.ID, kmsg.NewPtrDescribeClusterRequest())
			if err != nil {
				t.Fatal(err)
			}
			got := map[int32]string{}
			for _, rb := range resp.(*kmsg.DescribeClusterResponse).Brokers {
				if rb.Rack != nil {
					got[rb.NodeID] = *rb.Rack
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("broker %d: DescribeCluster racks %v, want %v", b.ID, got, want)
			}
		}
		createTopic(t, c, "racked", 6, 2)
		md, err := c.Metadata(ctx, 1, "racked")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range md.Partitions["racked"] {
			if len(p.Replicas) != 2 || want[p.Replicas[0]] == want[p.Replicas[1]] {
				t.Errorf("partition %d: replicas %v, want one in each of az1 and az2", p.Partition, p.Replicas)
			}
		}
	})
}
