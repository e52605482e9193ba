package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// TestLeaderAndIsrOpensReplicasWithoutStallingFetchers blocks a
// follower's LeaderAndIsr in the log opens of a new topic's replicas:
// meanwhile the follower keeps replicating an existing topic (an acks=all
// produce to it completes) and answers Fetch and Metadata, and once the
// opens go on the new topic becomes fully replicated.
func TestLeaderAndIsrOpensReplicasWithoutStallingFetchers(t *testing.T) {
	brokers := startRaftCluster(t, 2)
	ctx := testContext(t, 2*time.Minute)
	controllerID, _, _ := brokers[0].cache.View()
	var leader, follower *Broker
	for _, b := range brokers {
		if coord.BrokerID(b.ID()) == controllerID {
			leader = b
		} else {
			follower = b
		}
	}
	waitFor(t, ctx, "the controller to serve", func() bool { return leader.member.Controller() != nil })
	ids := []coord.BrokerID{coord.BrokerID(leader.ID()), coord.BrokerID(follower.ID())}
	if _, err := leader.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: "steady", Assignment: [][]coord.BrokerID{ids}}); err != nil {
		t.Fatalf("create topic steady: %v", err)
	}
	fullyReplicated := func(topic string) func() bool {
		return func() bool {
			_, _, parts := metadataOf(t, leader, topic)
			if follower.replicas.PartitionFor(topic, 0) == nil {
				return false
			}
			if len(parts) == 0 {
				return false
			}
			for _, p := range parts {
				if p.leader != leader.ID() || len(p.isr) != 2 {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, ctx, "steady to be fully replicated", fullyReplicated("steady"))
	producer := newClient(t, leader, kgo.DefaultProduceTopic("steady"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("acks=all produce to steady before the new topic: %v", err)
	}

	// The follower's opens of fresh's replicas block until released.
	entered := make(chan coord.TopicPartition, 8)
	release := make(chan struct{})
	var heldInOpen atomic.Bool
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	follower.manager().SetOpenReplicaHook(func(tp coord.TopicPartition, fetchersHeld bool) {
		if tp.Topic != "fresh" {
			return
		}
		heldInOpen.Store(fetchersHeld)
		entered <- tp
		<-release
	})
	// fresh has two partitions, both led by the leader, so that the
	// follower's LeaderAndIsr opens two replicas.
	created := make(chan error, 1)
	go func() {
		_, err := leader.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: "fresh", Assignment: [][]coord.BrokerID{ids, ids}})
		created <- err
	}()
	select {
	case tp := <-entered:
		if heldInOpen.Load() {
			t.Errorf("fetchers of follower %d while it opens %s: got held, want running", follower.ID(), tp)
		}
	case <-ctx.Done():
		t.Fatalf("follower %d never opened a replica of fresh", follower.ID())
	}

	// While the follower is in its opens, acks=all produces to steady,
	// which the follower replicates, complete.
	for i := range 3 {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := producer.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("during")}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("acks=all produce %d to steady while the follower opens replicas: got %v, want success", i, err)
		}
	}
	// The follower answers Metadata and Fetch.
	if _, _, parts := metadataOf(t, follower, "steady"); len(parts) != 1 {
		t.Fatalf("follower %d Metadata of steady: got %d partitions, want 1", follower.ID(), len(parts))
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = -1, 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "steady"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if resp := askBroker[*kmsg.FetchResponse](t, follower, fetch); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("follower %d Fetch of steady: got %d topics, want 1 with 1 partition", follower.ID(), len(resp.Topics))
	}
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("create topic fresh: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("create topic fresh did not return")
	}

	unblock()
	waitFor(t, ctx, "fresh-0 to be fully replicated", fullyReplicated("fresh"))
	waitFor(t, ctx, "fresh-1 on the follower", func() bool { return follower.replicas.PartitionFor("fresh", 1) != nil })
}
