package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
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
	leader, follower, ids := steadyPair(t, ctx, brokers)
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

// TestFollowerRetriesALeaderThatAppliesLate holds the leader's
// LeaderAndIsr of a new topic in its log opens while the follower has
// applied its own: the follower's first request for the new partition is
// refused, and the partition is put aside while the fetcher long-polls
// the leader for the idle partitions it already follows. With
// replica.fetch.wait.max.ms at four minutes, an acks=all write to the new
// partition still completes once the leader has applied: the fetcher
// retries the partition when its delay is due, not when the long poll
// ends.
func TestFollowerRetriesALeaderThatAppliesLate(t *testing.T) {
	brokers := startRaftClusterWith(t, 2, func(c *config.Config) {
		c.ReplicaFetchWaitMax = 4 * time.Minute
		c.ReplicaLagTimeMax = 5 * time.Minute
	})
	ctx := testContext(t, 2*time.Minute)
	leader, follower, ids := steadyPair(t, ctx, brokers)
	waitFor(t, ctx, "steady to be fully replicated", func() bool {
		_, _, parts := metadataOf(t, leader, "steady")
		return follower.replicas.PartitionFor("steady", 0) != nil && len(parts) == 1 && len(parts[0].isr) == 2
	})

	// The leader's open of late's replica blocks until released.
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	leader.manager().SetOpenReplicaHook(func(tp coord.TopicPartition, _ bool) {
		if tp.Topic != "late" {
			return
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	})
	// The follower's requests the leader has answered: the long poll the
	// new partition cancels, then at least one refusing it.
	replicaRequests := func() float64 {
		page := scrape(t, leader)
		f, _ := metricValue(page, `tripod_requests_total{api="FetchFollower"}`)
		o, _ := metricValue(page, `tripod_requests_total{api="OffsetForLeaderEpoch"}`)
		return f + o
	}
	before := replicaRequests()
	created := make(chan error, 1)
	go func() {
		_, err := leader.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: "late", Assignment: [][]coord.BrokerID{ids}})
		created <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatalf("leader %d never opened its replica of late", leader.ID())
	}
	waitFor(t, ctx, "the follower to hold late-0 and the leader to refuse it", func() bool {
		return follower.replicas.PartitionFor("late", 0) != nil && replicaRequests() >= before+2
	})
	if leader.replicas.PartitionFor("late", 0) != nil {
		t.Fatalf("leader %d holds late-0 while its open is held", leader.ID())
	}
	unblock()
	producer := newClient(t, leader, kgo.DefaultProduceTopic("late"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := make(chan error, 1)
	go func() {
		produced <- producer.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr()
	}()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("acks=all produce to late-0 after the leader applied: %v", err)
		}
	case <-deadline.C:
		t.Fatalf("acks=all produce to late-0 not acknowledged a minute after the leader applied: the follower waits out its long poll (replica.fetch.wait.max.ms is 4 minutes)")
	}
	if err := <-created; err != nil {
		t.Fatalf("create topic late: %v", err)
	}
}

// steadyPair splits a 2-broker cluster into its controller (the leader
// of what the tests create) and the other broker, waits until the
// controller serves, and creates topic steady with one partition on both,
// led by the controller. ids are the two brokers, leader first.
func steadyPair(t *testing.T, ctx context.Context, brokers []*Broker) (leader, follower *Broker, ids []coord.BrokerID) {
	t.Helper()
	controllerID, _, _ := brokers[0].cache.View()
	for _, b := range brokers {
		if coord.BrokerID(b.ID()) == controllerID {
			leader = b
		} else {
			follower = b
		}
	}
	waitFor(t, ctx, "the controller to serve", func() bool { return leader.member.Controller() != nil })
	ids = []coord.BrokerID{coord.BrokerID(leader.ID()), coord.BrokerID(follower.ID())}
	if _, err := leader.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: "steady", Assignment: [][]coord.BrokerID{ids}}); err != nil {
		t.Fatalf("create topic steady: %v", err)
	}
	return leader, follower, ids
}
