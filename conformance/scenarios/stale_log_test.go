package scenarios

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestDeletedTopicStaysDeletedOnADownBroker: a topic is deleted while one
// of its replicas' brokers is down, so no StopReplica reaches it and its
// log stays on disk; a topic of the same name is then created on the
// same brokers. When the broker returns, its old log (whose
// partition.metadata names the deleted topic's ID) is deleted, not
// served: the new topic holds only what was written to it, on every
// replica.
func TestDeletedTopicStaysDeletedOnADownBroker(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		ctrl := controller(t, c)
		down := others(c, ctrl)[0]
		replicas := []int32{down, others(c, ctrl)[1], ctrl}
		createAssigned(t, c, "reborn", [][]int32{replicas})
		waitPartition(t, c, "reborn", 0, down, replicas)
		cl := kafkaClient(t, c, acksAll...)
		produceValues(t, cl, "reborn", 0, values("old", 10)...)
		waitStored(t, c, down, "reborn", 0, stored(t, c, ctrl, "reborn", 0))

		if err := c.Broker(down).Kill(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), settle)
		defer cancel()
		if resp, err := admin(t, c).DeleteTopics(ctx, "reborn"); err != nil || resp.Error() != nil {
			t.Fatalf("delete topic reborn: %v %v", err, resp.Error())
		}
		waitEvery(t, c, settle, "reborn deleted", func(md *cluster.Metadata) error {
			if len(md.Partitions["reborn"]) > 0 {
				return fmt.Errorf("reborn still listed")
			}
			return nil
		}, "reborn")
		// The broker returns with the deleted topic's log still on its
		// disk; then a topic of the same name is created on it again,
		// led by a broker that never had the old one.
		if err := c.Broker(down).Start(); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, settle, fmt.Sprintf("broker %d back", down), func(md *cluster.Metadata) error {
			if !slices.Contains(md.Brokers, down) {
				return fmt.Errorf("live brokers %v", md.Brokers)
			}
			return nil
		})
		newReplicas := []int32{others(c, ctrl)[1], ctrl, down}
		createAssigned(t, c, "reborn", [][]int32{newReplicas})
		waitPartition(t, c, "reborn", 0, newReplicas[0], newReplicas)
		// A client of its own: the first one knows the deleted topic's ID.
		produceValues(t, kafkaClient(t, c, acksAll...), "reborn", 0, values("new", 3)...)
		want := stored(t, c, newReplicas[0], "reborn", 0)
		for _, r := range want {
			if !slices.Contains(values("new", 3), r.value) {
				t.Fatalf("the new topic's leader holds %v, want only the new records", want)
			}
		}
		waitStored(t, c, down, "reborn", 0, want)
		if got := stored(t, c, down, "reborn", 0); len(got) != len(want) {
			t.Fatalf("the returning broker holds %v, want exactly the new topic's %v", got, want)
		}
	})
}
