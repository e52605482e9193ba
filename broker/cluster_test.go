package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/freeport"
)

// startRaftCluster starts n in-process brokers (ids 1..n) whose embedded
// Raft voters listen on free loopback ports, and waits until every broker
// knows all n and a controller.
func startRaftCluster(t testing.TB, n int) []*Broker {
	t.Helper()
	return startRaftClusterWith(t, n, nil)
}

// startRaftClusterWith is startRaftCluster with each broker's config
// passed through configure (if not nil) before it starts.
func startRaftClusterWith(t testing.TB, n int, configure func(*config.Config)) []*Broker {
	t.Helper()
	// Drawn below the ephemeral range: a port the kernel gave a listener
	// on port 0 was taken by another test's connection before the Raft
	// node bound it.
	addrs, err := freeport.Addrs(n)
	if err != nil {
		t.Fatalf("reserve raft ports: %v", err)
	}
	voters := map[coord.BrokerID]string{}
	for id := 1; id <= n; id++ {
		voters[coord.BrokerID(id)] = addrs[id-1]
	}
	var brokers []*Broker
	for id := 1; id <= n; id++ {
		cfg := testConfig(t)
		cfg.BrokerID = int32(id)
		cfg.Coord.RaftVoters = voters
		// Three Raft nodes and three brokers share two loaded cores:
		// timeouts long enough not to flap under -race.
		cfg.Coord.RaftHeartbeatTimeout = 500 * time.Millisecond
		cfg.Coord.RaftElectionTimeout = 500 * time.Millisecond
		cfg.Coord.RaftLeaderLeaseTimeout = 250 * time.Millisecond
		cfg.Coord.SessionTimeout = 4 * time.Second
		if configure != nil {
			configure(&cfg)
		}
		b, err := New(cfg, testLogger(t).Named(fmt.Sprintf("broker-%d", id)))
		if err != nil {
			t.Fatalf("start broker %d: %v", id, err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("close broker %d: %v", b.ID(), err)
			}
		})
		brokers = append(brokers, b)
	}
	ctx := testContext(t, time.Minute)
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d to see %d live brokers and a controller", b.ID(), n), func() bool {
			id, live, _ := b.cache.View()
			if ctx.Err() != nil {
				t.Logf("broker %d: controller %d, live %v", b.ID(), id, live)
			}
			return id != coord.NoBroker && len(live) == n
		})
	}
	return brokers
}

// askBroker sends req to b itself (not routed by franz-go) and returns
// its answer.
func askBroker[R kmsg.Response](t *testing.T, b *Broker, req kmsg.Request) R {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s request to broker %d: %v", kmsg.NameForKey(req.Key()), b.ID(), err)
	}
	return resp.(R)
}

// partitionView is what one broker's Metadata says of a partition.
type partitionView struct {
	leader, leaderEpoch int32
	replicas, isr       []int32
}

// metadataOf asks b for topic's metadata: the controller id, the live
// broker ids and each partition's view.
func metadataOf(t *testing.T, b *Broker, topic string) (int32, []int32, []partitionView) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp := askBroker[*kmsg.MetadataResponse](t, b, req)
	var brokers []int32
	for _, mb := range resp.Brokers {
		brokers = append(brokers, mb.NodeID)
	}
	slices.Sort(brokers)
	var parts []partitionView
	if len(resp.Topics) == 1 {
		for _, p := range resp.Topics[0].Partitions {
			parts = append(parts, partitionView{p.Leader, p.LeaderEpoch, p.Replicas, p.ISR})
		}
	}
	return resp.ControllerID, brokers, parts
}

// TestThreeBrokersOnRaft runs three in-process brokers on one embedded Raft
// cluster: a topic created through a non-controller broker (NOT_CONTROLLER
// there; kadm retries at the controller) gets Kafka's spread of leaders,
// every broker's Metadata agrees on leaders, ISR and controller, a produce
// to a non-leader gets NOT_LEADER_OR_FOLLOWER while franz-go produces to
// the leaders, controller requests from an older controller epoch or for
// another broker epoch are refused, and the controller's controlled
// shutdown hands every leadership and the controllership to the others.
func TestThreeBrokersOnRaft(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, 2*time.Minute)
	byID := map[int32]*Broker{}
	for _, b := range brokers {
		byID[b.ID()] = b
	}
	controllerID, _, _ := brokers[0].cache.View()
	controller := byID[int32(controllerID)]
	var other *Broker
	for _, b := range brokers {
		if b != controller {
			other = b
			break
		}
	}

	// CreateTopics sent to a broker that is not the controller.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", 6, 3
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp := askBroker[*kmsg.CreateTopicsResponse](t, other, req)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != kerr.NotController {
		t.Fatalf("CreateTopics at non-controller broker %d: got %v, want NOT_CONTROLLER", other.ID(), err)
	}
	adm := kadm.NewClient(newClient(t, other))
	created, err := adm.CreateTopic(ctx, 6, 3, nil, "orders")
	if err != nil || created.Err != nil {
		t.Fatalf("create topic orders through broker %d: %v %v", other.ID(), err, created.Err)
	}
	tooMany, err := adm.CreateTopic(ctx, 1, 4, nil, "too-many-replicas")
	if err == nil {
		err = tooMany.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication factor 4 on 3 brokers: got %v, want INVALID_REPLICATION_FACTOR", err)
	}

	// Every broker's Metadata agrees, and each broker leads 2 of 6.
	var want []partitionView
	waitFor(t, ctx, "every broker's Metadata to agree on orders", func() bool {
		var first []partitionView
		for i, b := range brokers {
			ctrl, live, parts := metadataOf(t, b, "orders")
			if ctrl != int32(controllerID) || !slices.Equal(live, []int32{1, 2, 3}) || len(parts) != 6 {
				return false
			}
			for _, p := range parts {
				if p.leader < 0 || len(p.isr) != 3 || len(p.replicas) != 3 {
					return false
				}
			}
			if i == 0 {
				first = parts
			} else if !slices.EqualFunc(first, parts, func(a, b partitionView) bool {
				return a.leader == b.leader && a.leaderEpoch == b.leaderEpoch && slices.Equal(a.isr, b.isr) && slices.Equal(a.replicas, b.replicas)
			}) {
				return false
			}
		}
		want = first
		return true
	})
	led := map[int32]int{}
	for _, p := range want {
		led[p.leader]++
	}
	for _, b := range brokers {
		if led[b.ID()] != 2 {
			t.Fatalf("leaders of orders: %v; broker %d leads %d, want 2 each", want, b.ID(), led[b.ID()])
		}
	}

	// A produce to a broker that does not lead partition 0.
	leader0 := want[0].leader
	var notLeader *Broker
	for _, b := range brokers {
		if b.ID() != leader0 {
			notLeader = b
			break
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = 1, 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 0, buildBatch(t, []byte("misdirected"))
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	presp := askBroker[*kmsg.ProduceResponse](t, notLeader, produce)
	if err := kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode); err != kerr.NotLeaderForPartition {
		t.Fatalf("produce to broker %d, not the leader (%d) of orders-0: got %v, want NOT_LEADER_OR_FOLLOWER", notLeader.ID(), leader0, err)
	}
	producer := newClient(t, notLeader, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(6) {
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to orders-%d through franz-go: %v", p, err)
		}
	}

	// Controller requests from an older controller epoch, or for another
	// incarnation of the broker, are refused.
	target := other
	_, controllerEpoch := target.replicas.AcceptedController()
	brokerEpoch := target.member.CurrentEpoch()
	lair := func(ce int32, be int64) *kmsg.LeaderAndISRRequest {
		r := kmsg.NewPtrLeaderAndISRRequest()
		r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = int32(controllerID), ce, be
		ts := kmsg.NewLeaderAndISRRequestTopicState()
		ts.Topic = "orders"
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.Leader, ps.LeaderEpoch = 0, target.ID(), 99
		ts.PartitionStates = append(ts.PartitionStates, ps)
		r.TopicStates = append(r.TopicStates, ts)
		return r
	}
	um := func(ce int32, be int64) *kmsg.UpdateMetadataRequest {
		r := kmsg.NewPtrUpdateMetadataRequest()
		r.ControllerID, r.ControllerEpoch, r.BrokerEpoch = int32(controllerID), ce, be
		return r
	}
	if got := askBroker[*kmsg.LeaderAndISRResponse](t, target, lair(int32(controllerEpoch)-1, brokerEpoch)).ErrorCode; got != kerr.StaleControllerEpoch.Code {
		t.Fatalf("LeaderAndIsr from controller epoch %d (current %d): got %v, want STALE_CONTROLLER_EPOCH", controllerEpoch-1, controllerEpoch, kerr.ErrorForCode(got))
	}
	if got := askBroker[*kmsg.UpdateMetadataResponse](t, target, um(int32(controllerEpoch)-1, brokerEpoch)).ErrorCode; got != kerr.StaleControllerEpoch.Code {
		t.Fatalf("UpdateMetadata from controller epoch %d (current %d): got %v, want STALE_CONTROLLER_EPOCH", controllerEpoch-1, controllerEpoch, kerr.ErrorForCode(got))
	}
	if got := askBroker[*kmsg.LeaderAndISRResponse](t, target, lair(int32(controllerEpoch), brokerEpoch-1)).ErrorCode; got != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("LeaderAndIsr for broker epoch %d (current %d): got %v, want STALE_BROKER_EPOCH", brokerEpoch-1, brokerEpoch, kerr.ErrorForCode(got))
	}
	if p := target.replicas.PartitionFor("orders", 0); p != nil && p.Role().LeaderEpoch == 99 {
		t.Fatalf("a refused LeaderAndIsr changed orders-0's leader epoch to 99")
	}
	// A partition state with a lower leader epoch than the broker's is
	// ignored, from a current controller too.
	held := target.replicas.PartitionFor("orders", 0)
	before := held.Role()
	stale := lair(int32(controllerEpoch), brokerEpoch)
	stale.TopicStates[0].TopicID = held.TopicID()
	stale.TopicStates[0].PartitionStates[0].LeaderEpoch = before.LeaderEpoch - 1
	stale.TopicStates[0].PartitionStates[0].Replicas = coord.Int32s(before.Replicas)
	if got := askBroker[*kmsg.LeaderAndISRResponse](t, target, stale).ErrorCode; got != 0 {
		t.Fatalf("LeaderAndIsr from the current controller: got %v, want no error", kerr.ErrorForCode(got))
	}
	if after := target.replicas.PartitionFor("orders", 0).Role(); after.Leader != before.Leader || after.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("orders-0 after a LeaderAndIsr at leader epoch %d: leader %d epoch %d, want leader %d epoch %d kept",
			before.LeaderEpoch-1, after.Leader, after.LeaderEpoch, before.Leader, before.LeaderEpoch)
	}
	if _, _, parts := metadataOf(t, target, "orders"); len(parts) != 6 {
		t.Fatalf("a refused UpdateMetadata changed the cache: %d partitions of orders, want 6", len(parts))
	}

	// Auto-creation asked of a broker that is not the controller is
	// forwarded to the controller.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	auto := "auto-created"
	mt.Topic = &auto
	mreq.Topics = append(mreq.Topics, mt)
	mresp := askBroker[*kmsg.MetadataResponse](t, other, mreq)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 || len(mresp.Topics[0].Partitions) != 1 || mresp.Topics[0].Partitions[0].Leader < 0 {
		t.Fatalf("auto-create at non-controller broker %d: got %+v, want %s with 1 led partition", other.ID(), mresp.Topics, auto)
	}

	// CreatePartitions and ElectLeaders through kadm reach the controller.
	grown, err := adm.CreateTopic(ctx, 1, 2, nil, "grown")
	if err != nil || grown.Err != nil {
		t.Fatalf("create topic grown: %v %v", err, grown.Err)
	}
	added, err := adm.CreatePartitions(ctx, 2, "grown")
	if err != nil || added["grown"].Err != nil {
		t.Fatalf("add 2 partitions to grown: %v %+v", err, added)
	}
	if _, _, parts := metadataOf(t, other, "grown"); len(parts) != 3 || parts[2].leader < 0 || len(parts[2].replicas) != 2 {
		t.Fatalf("grown after adding 2 partitions: got %+v, want 3 led partitions of 2 replicas", parts)
	}
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}}})
	if err != nil {
		t.Fatalf("elect preferred leader of orders-0: %v", err)
	}
	if got := elected["orders"][0].Err; !errors.Is(got, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred election of orders-0, led by its preferred replica: got %v, want ELECTION_NOT_NEEDED", got)
	}

	// The controller's controlled shutdown: its leaderships and the
	// controllership move to the other two.
	start := time.Now()
	if err := controller.Close(); err != nil {
		t.Fatalf("close controller broker %d: %v", controller.ID(), err)
	}
	closed := time.Since(start)
	var rest []*Broker
	for _, b := range brokers {
		if b != controller {
			rest = append(rest, b)
		}
	}
	waitFor(t, ctx, "a new controller and leaders off the stopped broker", func() bool {
		for _, b := range rest {
			ctrl, live, parts := metadataOf(t, b, "orders")
			if ctrl == controller.ID() || ctrl < 0 || len(live) != 2 || len(parts) != 6 {
				return false
			}
			for _, p := range parts {
				if p.leader == controller.ID() || p.leader < 0 || slices.Contains(p.isr, controller.ID()) {
					return false
				}
			}
		}
		return true
	})
	t.Logf("controlled shutdown and close of controller broker %d took %v; new controller elected after %v", controller.ID(), closed, time.Since(start))
}

// BenchmarkControlledShutdown1000 measures the controlled shutdown of a
// broker (not the controller) that leads 1 000 partitions of replication
// factor 2 in a three-broker Raft cluster: from Close until every other
// broker's Metadata shows none of them led by it.
// Run: go test ./broker/ -run '^$' -bench ControlledShutdown1000 -benchtime 1x
func BenchmarkControlledShutdown1000(bm *testing.B) {
	const partitions = 1000
	for range bm.N {
		bm.StopTimer()
		brokers := startRaftCluster(bm, 3)
		controllerID, _, _ := brokers[0].cache.View()
		var ctrlBroker, victim, third *Broker
		for _, b := range brokers {
			switch {
			case b.ID() == int32(controllerID):
				ctrlBroker = b
			case victim == nil:
				victim = b
			default:
				third = b
			}
		}
		ctx := testContext(bm, 5*time.Minute)
		waitFor(bm, ctx, "the controller to serve", func() bool { return ctrlBroker.member.Controller() != nil })
		assignment := make([][]coord.BrokerID, partitions)
		for p := range assignment {
			follower := ctrlBroker.ID()
			if p%2 == 0 {
				follower = third.ID()
			}
			assignment[p] = []coord.BrokerID{coord.BrokerID(victim.ID()), coord.BrokerID(follower)}
		}
		if _, err := ctrlBroker.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: "wide", Assignment: assignment}); err != nil {
			bm.Fatalf("create topic wide: %v", err)
		}
		ledBy := func(b *Broker, id int32) int {
			t, _ := b.cache.Topic("wide")
			n := 0
			for _, p := range t.Partitions {
				if int32(p.Leader) == id {
					n++
				}
			}
			return n
		}
		waitFor(bm, ctx, "the victim to lead 1000 partitions everywhere", func() bool {
			return ledBy(ctrlBroker, victim.ID()) == partitions && ledBy(third, victim.ID()) == partitions
		})
		bm.StartTimer()
		start := time.Now()
		if err := victim.Close(); err != nil {
			bm.Fatalf("close victim: %v", err)
		}
		closed := time.Since(start)
		waitFor(bm, ctx, "every leadership to move off the victim", func() bool {
			return ledBy(ctrlBroker, victim.ID()) == 0 && ledBy(third, victim.ID()) == 0
		})
		bm.StopTimer()
		bm.Logf("controlled shutdown of broker %d leading %d partitions: Close returned after %v, all moved after %v", victim.ID(), partitions, closed, time.Since(start))
		for _, b := range brokers {
			b.Close()
		}
	}
}
