package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/group"
)

// fastGroups makes group tests quick: no initial rebalance delay and
// sessions of a second allowed.
func fastGroups(cfg *config.Config) {
	cfg.GroupInitialRebalanceDelay = 0
	cfg.GroupMinSessionTimeout = 500 * time.Millisecond
	cfg.OffsetsTopicNumPartitions = 5
}

// groupTestConfig is testConfig with fastGroups.
func groupTestConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	fastGroups(&cfg)
	return cfg
}

// produceNumbered writes n records "0".."n-1" with keys spreading them
// over the topic's partitions, acks=all.
func produceNumbered(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// groupMember is a franz-go group consumer that commits what it
// consumed after every poll.
type groupMember struct {
	cl *kgo.Client
	mu sync.Mutex
	// seen counts the records consumed, by value.
	seen map[string]int
	// assigned is the member's latest assignment.
	assigned map[int32]bool
	done     chan struct{}
}

// startMember runs a member of groupID consuming topic until the test
// ends or stop.
func startMember(t *testing.T, b *Broker, groupID, topic string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{seen: map[string]int{}, assigned: map[int32]bool{}, done: make(chan struct{})}
	opts = append([]kgo.Opt{
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range l[topic] {
				delete(m.assigned, p)
			}
		}),
	}, opts...)
	m.cl = newClient(t, b, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := m.cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			m.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { m.seen[string(r.Value)]++ })
			m.mu.Unlock()
			if recs := fs.Records(); len(recs) > 0 {
				if err := m.cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-m.done
	})
	return m
}

// stop leaves the group and waits for the member's loop to end.
func (m *groupMember) stop(t *testing.T) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("final commit: %v", err)
	}
	m.cl.Close()
	<-m.done
}

// partitions returns the member's current assignment size.
func (m *groupMember) partitions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.assigned)
}

// consumed returns how many distinct records the member saw.
func (m *groupMember) consumed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}

// committed returns the group's committed offsets of topic, by partition.
func committed(t *testing.T, adm *kadm.Client, groupID, topic string) map[int32]int64 {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	resp, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err != nil {
			t.Fatalf("fetch offset %s/%d: %v", topic, p, o.Err)
		}
		out[p] = o.At
	}
	return out
}

// TestGroupMembersShareAndCommit runs franz-go's group consumer against
// one broker: one member takes every partition, a second splits them
// with it, the first leaving hands everything to the second, and the
// offsets committed are where each partition's consumption stopped; a
// new member resumes from them.
func TestGroupMembersShareAndCommit(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	const topic = "orders"
	createTopic(t, b, topic, 4, nil)
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
	produceNumbered(t, producer, topic, 0, 400)
	ctx := testContext(t, time.Minute)

	m1 := startMember(t, b, "billing", topic)
	waitFor(t, ctx, "the first member to take all 4 partitions and consume 400 records", func() bool {
		return m1.partitions() == 4 && m1.consumed() == 400
	})
	m2 := startMember(t, b, "billing", topic)
	waitFor(t, ctx, "the two members to split the 4 partitions", func() bool {
		return m1.partitions() == 2 && m2.partitions() == 2
	})
	produceNumbered(t, producer, topic, 400, 400)
	waitFor(t, ctx, "the two members to consume the next 400", func() bool {
		return m1.consumed()+m2.consumed() >= 800 && m2.consumed() > 0
	})

	adm := kadm.NewClient(newClient(t, b))
	described, err := adm.DescribeGroups(ctx, "billing")
	if err != nil {
		t.Fatalf("describe group: %v", err)
	}
	dg := described["billing"]
	if dg.State != "Stable" || len(dg.Members) != 2 || dg.ProtocolType != "consumer" {
		t.Fatalf("described group: state %s, %d members, protocol type %q; want Stable, 2, consumer", dg.State, len(dg.Members), dg.ProtocolType)
	}

	m1.stop(t)
	waitFor(t, ctx, "the second member to take all 4 partitions", func() bool { return m2.partitions() == 4 })
	m2.stop(t)

	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	waitFor(t, ctx, "the committed offsets to reach every partition's end", func() bool {
		got := committed(t, adm, "billing", topic)
		ok := len(got) == 4
		ends.Each(func(o kadm.ListedOffset) { ok = ok && got[o.Partition] == o.Offset })
		return ok
	})
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if g, ok := listed["billing"]; !ok || g.State != "Empty" {
		t.Fatalf("list groups: %v; want billing Empty", listed)
	}

	produceNumbered(t, producer, topic, 800, 40)
	m3 := startMember(t, b, "billing", topic)
	waitFor(t, ctx, "a new member to resume at the committed offsets", func() bool { return m3.consumed() == 40 })
	m3.mu.Lock()
	defer m3.mu.Unlock()
	for v := range m3.seen {
		if len(v) < 3 || v < "800" {
			t.Fatalf("the new member consumed %q, committed before it joined", v)
		}
	}
}

// TestGroupOffsetsSurviveRestart commits offsets, restarts the broker on
// the same data and fetches them back: the coordinator loads them from
// __consumer_offsets on disk, in Kafka's record schemas.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	cfg := groupTestConfig(t)
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	const topic = "ledger"
	createTopic(t, b, topic, 3, nil)
	adm := kadm.NewClient(newClient(t, b))
	ctx := testContext(t, time.Minute)
	offsets := kadm.Offsets{}
	for p := range int32(3) {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 + p), LeaderEpoch: -1, Metadata: fmt.Sprintf("meta-%d", p)})
	}
	var resp kadm.OffsetResponses
	waitFor(t, ctx, "the first commit to be accepted", func() bool {
		resp, err = adm.CommitOffsets(ctx, "auditors", offsets)
		return err == nil && resp.Error() == nil
	})
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	b = startBroker(t, cfg)
	adm = kadm.NewClient(newClient(t, b))
	var got kadm.OffsetResponses
	waitFor(t, ctx, "the offsets to be fetched back after the restart", func() bool {
		got, err = adm.FetchOffsets(ctx, "auditors")
		return err == nil && got.Error() == nil && len(got[topic]) == 3
	})
	for p := range int32(3) {
		o := got[topic][p]
		if o.At != int64(10+p) || o.Metadata != fmt.Sprintf("meta-%d", p) {
			t.Fatalf("partition %d after restart: offset %d metadata %q; want %d meta-%d", p, o.At, o.Metadata, 10+p, p)
		}
	}

	// The records are Kafka's: a plain consumer of the internal topic
	// decodes them with Kafka's key and value schemas.
	cl := newClient(t, b, kgo.ConsumeTopics(group.OffsetsTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	found := 0
	for found < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(r.Key); err != nil || k.Version > 1 {
				return
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("offset value of %s/%d: %v", k.Topic, k.Partition, err)
			}
			if k.Group == "auditors" && k.Topic == topic && v.Offset == int64(10+k.Partition) {
				found++
			}
		})
	}
	if found < 3 {
		t.Fatalf("found %d of 3 offset records in %s with Kafka's schemas", found, group.OffsetsTopic)
	}
}

// TestGroupRequestErrors checks the errors clients act on.
func TestGroupRequestErrors(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	cl := newClient(t, b)
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(cl)
	createTopic(t, b, "known", 1, nil)

	// A commit of a topic the cluster does not have, a metadata string
	// too long, and a generation for a group that does not exist.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "errs", -1
	for _, topic := range []string{"known", "unknown-topic"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		long := strings.Repeat("m", 5000)
		if topic == "known" {
			rp.Metadata = &long
		}
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	var cresp *kmsg.OffsetCommitResponse
	waitFor(t, ctx, "the commit to reach a loaded coordinator", func() bool {
		r, err := commit.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		cresp = r
		code := r.Topics[1].Partitions[0].ErrorCode
		return code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code && code != kerr.CoordinatorNotAvailable.Code
	})
	if c := cresp.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetMetadataTooLarge.Code {
		t.Errorf("commit with 5000 bytes of metadata: %v; want OFFSET_METADATA_TOO_LARGE", kerr.ErrorForCode(c))
	}
	if c := cresp.Topics[1].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("commit of an unknown topic: %v; want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(c))
	}
	commit.Generation, commit.MemberID = 3, "nobody"
	r, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if c := r.Topics[1].Partitions[0].ErrorCode; c != kerr.IllegalGeneration.Code {
		t.Errorf("commit with generation 3 to a group that does not exist: %v; want ILLEGAL_GENERATION", kerr.ErrorForCode(c))
	}

	// Heartbeat and SyncGroup of an unknown member.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "errs", "ghost", 1
	if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of an unknown member: %v %v; want UNKNOWN_MEMBER_ID", r, err)
	}

	// v4+ joins are told to come back with the member id handed out.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "two-step", "consumer", 3000, 3000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", []byte{0, 1}
	join.Protocols = append(join.Protocols, proto)
	jr, err := join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
		t.Fatalf("first join: %v member %q; want MEMBER_ID_REQUIRED with a member id", kerr.ErrorForCode(jr.ErrorCode), jr.MemberID)
	}
	join.MemberID = jr.MemberID
	if jr, err = join.RequestWith(ctx, cl); err != nil || jr.ErrorCode != 0 || jr.LeaderID != join.MemberID {
		t.Fatalf("second join: %v, %+v; want the member as leader of generation 1", err, jr)
	}
	join.SessionTimeoutMillis = 10
	join.MemberID = ""
	join.Group = "too-short"
	if jr, err = join.RequestWith(ctx, cl); err != nil || jr.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Errorf("join with a 10 ms session: %v %v; want INVALID_SESSION_TIMEOUT", jr, err)
	}

	// The internal topic is the coordinator's: clients cannot write it,
	// Metadata marks it internal, and a group with members is not deleted.
	md, err := adm.Metadata(ctx, group.OffsetsTopic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if !md.Topics[group.OffsetsTopic].IsInternal {
		t.Errorf("%s not marked internal in Metadata", group.OffsetsTopic)
	}
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = group.OffsetsTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = group.EncodeBatch([]group.KV{{Key: []byte("k"), Value: []byte("v")}}, time.Now())
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	pr, err := prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	if c := pr.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidTopicException.Code {
		t.Errorf("produce to %s: %v; want INVALID_TOPIC_EXCEPTION", group.OffsetsTopic, kerr.ErrorForCode(c))
	}
	deleted, err := adm.DeleteGroups(ctx, "two-step", "never-was")
	if err != nil {
		t.Fatalf("delete groups: %v", err)
	}
	if !errors.Is(deleted["two-step"].Err, kerr.NonEmptyGroup) {
		t.Errorf("delete of a group with a member: %v; want NON_EMPTY_GROUP", deleted["two-step"].Err)
	}
	if !errors.Is(deleted["never-was"].Err, kerr.GroupIDNotFound) {
		t.Errorf("delete of a group that never was: %v; want GROUP_ID_NOT_FOUND", deleted["never-was"].Err)
	}
}

// TestGroupCoordinatorFollowsLeadership runs a group on three brokers
// with __consumer_offsets replicated three times, then shuts its
// coordinator down: the partition's new leader loads the group's
// offsets, and a member resumes where the committed offsets say.
func TestGroupCoordinatorFollowsLeadership(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, fastGroups)
	const topic = "moves"
	ctx := testContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if resp, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	producer := newClient(t, brokers[0], kgo.DefaultProduceTopic(topic))
	produceNumbered(t, producer, topic, 0, 100)
	m := startMember(t, brokers[0], "movers", topic)
	waitFor(t, ctx, "the member to consume 100", func() bool { return m.consumed() == 100 })
	waitFor(t, ctx, "commits of 100 records", func() bool {
		got := committed(t, adm, "movers", topic)
		return got[0]+got[1] == 100
	})
	m.stop(t)

	coords := adm.FindGroupCoordinators(ctx, "movers")
	if coords["movers"].Err != nil {
		t.Fatalf("find coordinator: %v", coords["movers"].Err)
	}
	id := coords["movers"].NodeID
	var survivor *Broker
	for _, b := range brokers {
		if b.ID() == id {
			if err := b.Close(); err != nil {
				t.Fatalf("close coordinator %d: %v", id, err)
			}
		} else {
			survivor = b
		}
	}
	adm = kadm.NewClient(newClient(t, survivor))
	waitFor(t, ctx, "the new coordinator to answer the committed offsets", func() bool {
		resp, err := adm.FetchOffsets(ctx, "movers")
		if err != nil || resp.Error() != nil {
			return false
		}
		got := map[int32]int64{}
		for p, o := range resp[topic] {
			got[p] = o.At
		}
		return got[0]+got[1] == 100
	})
	produceNumbered(t, newClient(t, survivor, kgo.DefaultProduceTopic(topic)), topic, 100, 10)
	m2 := startMember(t, survivor, "movers", topic)
	waitFor(t, ctx, "a member on the new coordinator to consume only the 10 new records", func() bool { return m2.consumed() == 10 })
}

// TestOffsetsOfDeletedTopicAreDropped checks that deleting a topic drops
// every group's committed offsets of it, as Kafka does: a topic created
// again with the same name starts with none (sarama's functional tests,
// which re-create their topics, found tripod applying the old topic's
// offsets to the new one), and the group's offsets of other topics stay.
func TestOffsetsOfDeletedTopicAreDropped(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	ctx := testContext(t, time.Minute)
	createTopic(t, b, "doomed", 2, nil)
	createTopic(t, b, "kept", 1, nil)
	adm := kadm.NewClient(newClient(t, b))
	commit := kadm.Offsets{}
	commit.AddOffset("doomed", 0, 5, -1)
	commit.AddOffset("doomed", 1, 7, -1)
	commit.AddOffset("kept", 0, 3, -1)
	if resp, err := adm.CommitOffsets(ctx, "g", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if _, err := adm.DeleteTopics(ctx, "doomed"); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	for {
		fo, err := adm.FetchOffsets(ctx, "g")
		if err == nil {
			if _, ok := fo.Lookup("doomed", 0); !ok {
				if _, ok := fo.Lookup("doomed", 1); !ok {
					break
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("group g still has offsets of the deleted topic: %v (%v)", fo, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	createTopic(t, b, "doomed", 2, nil)
	fo, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	for p := range int32(2) {
		if o, ok := fo.Lookup("doomed", p); ok {
			t.Errorf("group g has offset %d for doomed-%d, created again after its deletion: want none", o.At, p)
		}
	}
	if o, ok := fo.Lookup("kept", 0); !ok || o.At != 3 {
		t.Errorf("group g's offset of kept-0 is %v (%v), want 3", o.At, ok)
	}
}
