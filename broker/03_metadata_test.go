package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/controller"
)

// TestMetadataAnswersFollowTheCache checks that the Metadata answers a
// broker keeps are what its metadata cache holds: requests with no
// change between them share one answer, and a new leader, a broker gone
// from the live set or a new partition shows in the next answer.
func TestMetadataAnswersFollowTheCache(t *testing.T) {
	um := wideUpdateMetadata(1, 4)
	topic := um.Partitions[0].Topic
	b := &Broker{cache: metadata.NewCache()}
	b.cache.Update(um, true)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	answer := func() kmsg.MetadataResponseTopic {
		t.Helper()
		resp := b.metadata(context.Background(), req, false, "BROKER").(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("answer has %d topics, want 1", len(resp.Topics))
		}
		return resp.Topics[0]
	}

	first, second := answer(), answer()
	if len(first.Partitions) != 4 || &first.Partitions[0] != &second.Partitions[0] {
		t.Fatalf("two answers with no change between them were built twice (%d partitions)", len(first.Partitions))
	}

	// Partition 0 gets a new leader, at a higher leader epoch.
	moved := um.Partitions[0]
	moved.Leader = moved.Replicas[1]
	moved.LeaderEpoch++
	moved.ISR = moved.Replicas[1:]
	b.cache.Update(&controller.UpdateMetadataRequest{ControllerID: 1, Live: um.Live, Partitions: []controller.PartitionInfo{moved}}, false)
	p := answer().Partitions[0]
	if p.Leader != int32(moved.Leader) || p.LeaderEpoch != moved.LeaderEpoch || len(p.ISR) != 2 {
		t.Errorf("after the leader change partition 0 is leader %d epoch %d ISR %v, want leader %d epoch %d ISR %v",
			p.Leader, p.LeaderEpoch, p.ISR, moved.Leader, moved.LeaderEpoch, moved.ISR)
	}

	// A broker leaves the live set: its replicas are offline.
	gone := um.Live[2].ID
	b.cache.SetLive(um.Live[:2])
	for _, p := range answer().Partitions {
		if len(p.OfflineReplicas) != 1 || p.OfflineReplicas[0] != int32(gone) {
			t.Errorf("partition %d offline replicas %v with broker %d gone, want [%d]", p.Partition, p.OfflineReplicas, gone, gone)
		}
	}

	// A fifth partition is created.
	added := um.Partitions[3]
	added.Partition = 4
	added.IsNew = true
	b.cache.Update(&controller.UpdateMetadataRequest{ControllerID: 1, Live: um.Live, Partitions: []controller.PartitionInfo{added}}, false)
	if got := answer().Partitions; len(got) != 5 || got[4].Partition != 4 {
		t.Errorf("after a partition was added the answer has %d partitions, want 5 ending in partition 4", len(got))
	}
}
