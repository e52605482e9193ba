package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
)

// fastConsumerGroups makes KIP-848 group tests quick: heartbeats every
// 200 ms, sessions of 3 s.
func fastConsumerGroups(cfg *config.Config) {
	fastGroups(cfg)
	cfg.GroupConsumerMinHeartbeatInterval = 100 * time.Millisecond
	cfg.GroupConsumerHeartbeatInterval = 200 * time.Millisecond
	cfg.GroupConsumerMinSessionTimeout = time.Second
	cfg.GroupConsumerSessionTimeout = 3 * time.Second
}

// ownership records which consumer owns which partition, from the
// clients' own assignment callbacks, and fails the test when a client is
// given a partition another one still owns.
type ownership struct {
	t      *testing.T
	mu     sync.Mutex
	owner  map[string]string // "topic/partition" -> consumer
	double atomic.Int32
}

func (o *ownership) assigned(name string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range ps {
		for _, p := range parts {
			k := fmt.Sprintf("%s/%d", topic, p)
			if cur, ok := o.owner[k]; ok && cur != name {
				o.double.Add(1)
				o.t.Errorf("partition %s given to %s while %s owns it", k, name, cur)
			}
			o.owner[k] = name
		}
	}
}

func (o *ownership) released(name string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, parts := range ps {
		for _, p := range parts {
			if k := fmt.Sprintf("%s/%d", topic, p); o.owner[k] == name {
				delete(o.owner, k)
			}
		}
	}
}

// consumer848 is a franz-go consumer of a KIP-848 group that counts what
// it consumed and commits after every poll.
type consumer848 struct {
	name string
	cl   *kgo.Client
	done chan struct{}
	stop context.CancelFunc
}

// startConsumer848 runs a consumer of group; opts add to its options.
func startConsumer848(t *testing.T, b *Broker, name, groupID string, own *ownership, tl *tally, opts ...kgo.Opt) *consumer848 {
	t.Helper()
	return startGroupConsumer(t, b, name, groupID, own, tl, append([]kgo.Opt{kgo.ServerSideBalancer()}, opts...)...)
}

// startGroupConsumer runs a consumer of group of the protocol opts
// choose (the classic one unless kgo.ServerSideBalancer) that counts
// what it consumed in tl, reports its partitions to own and commits
// after every poll and before giving partitions up.
func startGroupConsumer(t *testing.T, b *Broker, name, groupID string, own *ownership, tl *tally, opts ...kgo.Opt) *consumer848 {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr().String()),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
			own.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(name, ps) }),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer848{name: name, cl: cl, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			// A poll returns within a second even without records, so
			// that a commit that failed (the member's generation moved
			// on under it) is retried, as autocommit would.
			pollCtx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pollCtx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { tl.add(r.Value) })
			_ = cl.CommitUncommittedOffsets(ctx)
		}
	}()
	t.Cleanup(func() { c.close() })
	return c
}

// close stops polling and closes the client, which leaves the group.
func (c *consumer848) close() {
	c.stop()
	<-c.done
	c.cl.Close()
}

// describe848 describes groupID with ConsumerGroupDescribe.
func describe848(t *testing.T, ctx context.Context, cl *kgo.Client, groupID string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{groupID}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return kmsg.NewConsumerGroupDescribeResponseGroup()
	}
	return resp.Groups[0]
}

// stableWith reports whether the group is Stable with n members.
func stableWith(d kmsg.ConsumerGroupDescribeResponseGroup, n int) bool {
	return d.ErrorCode == 0 && d.State == "Stable" && len(d.Members) == n
}

// TestConsumerProtocolGroupJoinLeaveConsume runs KIP-848 consumers
// (franz-go with ServerSideBalancer) over a topic as members join and
// leave: no partition is ever owned by two of them, and every record is
// consumed.
func TestConsumerProtocolGroupJoinLeaveConsume(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	const topic, groupID, n = "orders", "packers", 3000
	createTopic(t, b, topic, 6, nil)
	producer := newClient(t, b)
	produceNumbered(t, producer, topic, 0, n/2)
	ctx := testContext(t, 2*time.Minute)
	own := &ownership{t: t, owner: map[string]string{}}
	tl := newTally()

	c1 := startConsumer848(t, b, "c1", groupID, own, tl, kgo.ConsumeTopics(topic))
	waitFor(t, ctx, "c1 alone to be stable", func() bool { return stableWith(describe848(t, ctx, producer, groupID), 1) })
	c2 := startConsumer848(t, b, "c2", groupID, own, tl, kgo.ConsumeTopics(topic))
	c3 := startConsumer848(t, b, "c3", groupID, own, tl, kgo.ConsumeTopics(topic))
	waitFor(t, ctx, "three members to be stable", func() bool { return stableWith(describe848(t, ctx, producer, groupID), 3) })
	d := describe848(t, ctx, producer, groupID)
	for _, m := range d.Members {
		if got := len(m.Assignment.TopicPartitions[0].Partitions); got != 2 {
			t.Errorf("member %s: got %d partitions, want 2 (uniform over 6)", m.MemberID, got)
		}
		if m.MemberEpoch != d.Epoch {
			t.Errorf("member %s: got epoch %d, want the group's %d", m.MemberID, m.MemberEpoch, d.Epoch)
		}
	}

	produceNumbered(t, producer, topic, n/2, n/2)
	c2.close()
	waitFor(t, ctx, "two members after c2 left", func() bool { return stableWith(describe848(t, ctx, producer, groupID), 2) })
	waitFor(t, ctx, "every record consumed", func() bool { return tl.distinct() == n })
	c1.close()
	c3.close()
	if own.double.Load() != 0 {
		t.Fatalf("%d partitions were owned by two consumers at once", own.double.Load())
	}
}

// TestConsumerProtocolGroupRemovesAKilledMember cuts a member off
// without a leave: it is removed after group.consumer.session.timeout.ms
// and its partitions go to the member left.
func TestConsumerProtocolGroupRemovesAKilledMember(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	const topic, groupID = "events", "watchers"
	createTopic(t, b, topic, 4, nil)
	admin := newClient(t, b)
	ctx := testContext(t, 2*time.Minute)
	own := &ownership{t: t, owner: map[string]string{}}
	tl := newTally()

	var killed atomic.Bool
	var connsMu sync.Mutex
	var conns []net.Conn
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		if killed.Load() {
			return nil, errors.New("killed")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err == nil {
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
		}
		return c, err
	}
	victim := startConsumer848(t, b, "victim", groupID, own, tl, kgo.ConsumeTopics(topic), kgo.Dialer(dial))
	waitFor(t, ctx, "the victim alone to be stable", func() bool { return stableWith(describe848(t, ctx, admin, groupID), 1) })
	survivor := startConsumer848(t, b, "survivor", groupID, own, tl, kgo.ConsumeTopics(topic))
	waitFor(t, ctx, "two members to be stable", func() bool { return stableWith(describe848(t, ctx, admin, groupID), 2) })

	killed.Store(true)
	connsMu.Lock()
	for _, c := range conns {
		c.Close()
	}
	connsMu.Unlock()
	cut := time.Now()
	waitFor(t, ctx, "the survivor to own every partition", func() bool {
		d := describe848(t, ctx, admin, groupID)
		return stableWith(d, 1) && len(d.Members[0].Assignment.TopicPartitions) == 1 && len(d.Members[0].Assignment.TopicPartitions[0].Partitions) == 4
	})
	if took := time.Since(cut); took < 2*time.Second {
		t.Errorf("the victim was removed %v after it was cut off, before its 3 s session timeout", took)
	}
	victim.stop()
	<-victim.done
	survivor.close()
}

// TestConsumerProtocolGroupSurvivesRestart restarts the coordinator's
// broker under a consuming group: the group comes back from
// __consumer_offsets with its members, epochs and assignments, and the
// consumers go on from their committed offsets.
func TestConsumerProtocolGroupSurvivesRestart(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	cfg.GroupConsumerMaxSessionTimeout = 30 * time.Second
	cfg.GroupConsumerSessionTimeout = 30 * time.Second
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	const topic, groupID, n = "ledger", "auditors", 1000
	createTopic(t, b, topic, 4, nil)
	producer := newClient(t, b)
	produceNumbered(t, producer, topic, 0, n)
	ctx := testContext(t, 2*time.Minute)
	own := &ownership{t: t, owner: map[string]string{}}
	tl := newTally()
	c1 := startConsumer848(t, b, "c1", groupID, own, tl, kgo.ConsumeTopics(topic))
	c2 := startConsumer848(t, b, "c2", groupID, own, tl, kgo.ConsumeTopics(topic))
	waitFor(t, ctx, "two members stable and every record consumed", func() bool {
		return stableWith(describe848(t, ctx, producer, groupID), 2) && tl.distinct() == n
	})
	before := describe848(t, ctx, producer, groupID)
	c1.stop()
	<-c1.done
	c2.stop()
	<-c2.done
	producer.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	b = startBroker(t, cfg)
	admin := newClient(t, b)
	waitFor(t, ctx, "the group to be loaded back", func() bool { return describe848(t, ctx, admin, groupID).ErrorCode == 0 })
	after := describe848(t, ctx, admin, groupID)
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 2 {
		t.Fatalf("after the restart: got epoch %d assignment epoch %d and %d members, want %d, %d and 2",
			after.Epoch, after.AssignmentEpoch, len(after.Members), before.Epoch, before.AssignmentEpoch)
	}
	for i, m := range after.Members {
		w := before.Members[i]
		if m.MemberID != w.MemberID || m.MemberEpoch != w.MemberEpoch || fmt.Sprint(m.Assignment.TopicPartitions[0].Partitions) != fmt.Sprint(w.Assignment.TopicPartitions[0].Partitions) {
			t.Fatalf("member %d after the restart: got %s epoch %d %v, want %s epoch %d %v", i,
				m.MemberID, m.MemberEpoch, m.Assignment.TopicPartitions, w.MemberID, w.MemberEpoch, w.Assignment.TopicPartitions)
		}
	}
	offsets := kmsg.NewPtrOffsetFetchRequest()
	offsets.Group = groupID
	resp, err := offsets.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			committed += p.Offset
		}
	}
	if committed != n {
		t.Fatalf("after the restart: got %d records' offsets committed, want %d", committed, n)
	}
}

// TestConsumerProtocolGroupRegexPicksUpNewTopics subscribes by regular
// expression (SubscribedTopicRegex, matched by the broker against whole
// topic names; franz-go wraps its pattern in .* to match anywhere): a
// topic created later that matches is assigned and consumed.
func TestConsumerProtocolGroupRegexPicksUpNewTopics(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	createTopic(t, b, "logs-a", 2, nil)
	producer := newClient(t, b)
	produceNumbered(t, producer, "logs-a", 0, 100)
	ctx := testContext(t, 2*time.Minute)
	own := &ownership{t: t, owner: map[string]string{}}
	tl := newTally()
	c := startConsumer848(t, b, "c", "tailers", own, tl, kgo.ConsumeRegex(), kgo.ConsumeTopics("logs-.*"))
	waitFor(t, ctx, "logs-a consumed", func() bool { return tl.distinct() == 100 })

	createTopic(t, b, "logs-b", 3, nil)
	produceNumbered(t, producer, "logs-b", 100, 100)
	waitFor(t, ctx, "logs-b assigned and consumed", func() bool { return tl.distinct() == 200 })
	d := describe848(t, ctx, producer, "tailers")
	if len(d.Members) != 1 || len(d.Members[0].Assignment.TopicPartitions) != 2 {
		t.Fatalf("got %+v, want one member assigned logs-a and logs-b", d.Members)
	}
	if d.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("the member's subscription is not a regex")
	}
	c.close()
}

// TestMigrationDisabledKeepsGroupsApart: with
// group.consumer.migration.policy=disabled, a classic group with a
// member refuses a member of the consumer protocol with
// GROUP_ID_NOT_FOUND, as Kafka answers, and is not disturbed; a classic
// JoinGroup to a consumer-protocol group with members is taken as a
// classic member whatever the policy, as in Kafka, its generation the
// member epoch.
func TestMigrationDisabledKeepsGroupsApart(t *testing.T) {
	cfg := testConfig(t)
	fastConsumerGroups(&cfg)
	if err := cfg.Set("group.consumer.migration.policy", "DISABLED"); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, cfg)
	const topic = "mixed-topic"
	createLocalTopic(t, b, topic, 1)
	ctx := testContext(t, time.Minute)
	cl := newClient(t, b)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// A classic member in group "classic".
	classic := newClient(t, b, kgo.ConsumerGroup("classic"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n == 0; {
		fetches := classic.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the classic member consumed nothing")
		}
		n = fetches.NumRecords()
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "classic", "a-consumer-protocol-member", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 10000, []string{topic}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{} // none owned: a join
	if resp := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat to a classic group with a member: got %v (%v), want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	adm := kadm.NewClient(cl)
	classicDescribed, err := adm.DescribeGroups(ctx, "classic")
	if err != nil || len(classicDescribed["classic"].Members) != 1 {
		t.Errorf("group classic after the refusal: %+v, %v; want its one member", classicDescribed["classic"], err)
	}

	// A consumer-protocol member in group "modern", then a classic one.
	hb.Group = "modern"
	joined := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
	if joined.ErrorCode != 0 || joined.MemberEpoch <= 0 {
		t.Fatalf("ConsumerGroupHeartbeat joining group modern: got %v, epoch %d, want a member epoch", kerr.ErrorForCode(joined.ErrorCode), joined.MemberEpoch)
	}
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{topic}
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "modern", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	first := issue[*kmsg.JoinGroupResponse](t, cl, join)
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		t.Fatalf("JoinGroup v5 without member id to a consumer-protocol group: got %v, member id %q; want MEMBER_ID_REQUIRED and an id", kerr.ErrorForCode(first.ErrorCode), first.MemberID)
	}
	join.MemberID = first.MemberID
	second := issue[*kmsg.JoinGroupResponse](t, cl, join)
	if second.ErrorCode != 0 || second.Generation <= joined.MemberEpoch || second.Protocol == nil || *second.Protocol != "range" || second.LeaderID != "" {
		t.Fatalf("JoinGroup with the member id: got %v, generation %d, protocol %v, leader %q; want a generation past %d, range and no leader",
			kerr.ErrorForCode(second.ErrorCode), second.Generation, second.Protocol, second.LeaderID, joined.MemberEpoch)
	}
	modern, err := adm.DescribeConsumerGroups(ctx, "modern")
	if err != nil || len(modern["modern"].Members) != 2 {
		t.Fatalf("group modern with a classic member: %+v, %v; want 2 members", modern["modern"], err)
	}
	d := describe848(t, ctx, cl, "modern")
	types := map[string]int8{}
	for _, m := range d.Members {
		types[m.MemberID] = m.MemberType
	}
	if types[hb.MemberID] != 1 || types[join.MemberID] != 0 {
		t.Fatalf("ConsumerGroupDescribe member types: got %v, want %s of the consumer protocol (1) and %s classic (0)", types, hb.MemberID, join.MemberID)
	}
}
