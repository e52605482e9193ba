package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848's online migration, end to end with franz-go: a classic group
// becomes a consumer-protocol group as its members are replaced one by
// one by members of the consumer protocol, and back.

// classicOpts make a franz-go consumer a quick classic member: the
// default cooperative-sticky balancer unless more opts say otherwise,
// heartbeats every 200 ms, a 3 s session.
func classicOpts(topic string, more ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, more...)
}

// numberedProducer writes records "0", "1", ... to a topic, 20 every
// 20 ms, until stopped.
type numberedProducer struct {
	produced atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
}

func startNumberedProducer(t *testing.T, cl *kgo.Client, topic string) *numberedProducer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &numberedProducer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			from := int(p.produced.Load())
			var recs []*kgo.Record
			for i := from; i < from+20; i++ {
				recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(strconv.Itoa(i))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				if ctx.Err() == nil {
					t.Errorf("produce: %v", err)
				}
				return
			}
			p.produced.Add(20)
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop stops producing and returns how many records were written:
// "0".."n-1" (a batch cut short by the stop may have written more).
func (p *numberedProducer) stop() int {
	p.cancel()
	<-p.done
	return int(p.produced.Load())
}

// checkEveryValueConsumed fails unless "0".."n-1" were each consumed at
// least once (a partition that changes hands is consumed again from its
// committed offset).
func (tl *tally) checkEveryValueConsumed(t *testing.T, n int) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var missing []int
	for i := range n {
		if tl.seen[strconv.Itoa(i)] == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d produced records were never consumed, the first %v", len(missing), n, missing[:min(len(missing), 10)])
	}
}

// offsetWatch follows a group's committed offsets and fails the test if
// one goes backwards.
type offsetWatch struct {
	t       *testing.T
	adm     *kadm.Client
	groupID string
	topic   string
	last    map[int32]int64
	checks  int
	next    time.Time
}

// check fetches the committed offsets, at most every 50 ms.
func (w *offsetWatch) check(ctx context.Context) {
	w.t.Helper()
	if time.Now().Before(w.next) {
		return
	}
	w.next = time.Now().Add(50 * time.Millisecond)
	resp, err := w.adm.FetchOffsets(ctx, w.groupID)
	if err != nil {
		return // the coordinator moving; the next check sees it
	}
	w.checks++
	for p, o := range resp[w.topic] {
		if o.Err != nil {
			continue
		}
		if prev, ok := w.last[p]; ok && o.At < prev {
			w.t.Errorf("the committed offset of %s/%d went back from %d to %d", w.topic, p, prev, o.At)
		}
		w.last[p] = o.At
	}
}

// mixedMembers describes a consumer-protocol group with
// ConsumerGroupDescribe: whether it is Stable, how many of its members
// are classic and of the consumer protocol, and how many distinct
// partitions its members are assigned.
func mixedMembers(t *testing.T, ctx context.Context, cl *kgo.Client, groupID string) (stable bool, classic, modern, partitions int) {
	d := describe848(t, ctx, cl, groupID)
	if d.ErrorCode != 0 {
		return false, 0, 0, 0
	}
	seen := map[string]bool{}
	for _, m := range d.Members {
		if m.MemberType == 0 {
			classic++
		} else {
			modern++
		}
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				seen[fmt.Sprintf("%s/%d", tp.Topic, p)] = true
			}
		}
	}
	return d.State == "Stable", classic, modern, len(seen)
}

// classicMembers describes a classic group with DescribeGroups: whether
// it is Stable, its members, and how many distinct partitions they are
// assigned; false if it is not a classic group.
func classicMembers(ctx context.Context, adm *kadm.Client, groupID string) (stable bool, members, partitions int) {
	described, err := adm.DescribeGroups(ctx, groupID)
	if err != nil || described[groupID].Err != nil {
		return false, 0, 0
	}
	dg := described[groupID]
	seen := map[string]bool{}
	for _, m := range dg.Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range c.Topics {
				for _, p := range at.Partitions {
					seen[fmt.Sprintf("%s/%d", at.Topic, p)] = true
				}
			}
		}
	}
	return dg.State == "Stable", len(dg.Members), len(seen)
}

// groupRoll is a group of a six-partition topic on one broker whose
// members are replaced one by one while a producer writes to the topic;
// it tracks who owns each partition, every value consumed, and the
// group's committed offsets.
type groupRoll struct {
	b              *Broker
	cl             *kgo.Client
	adm            *kadm.Client
	ctx            context.Context
	own            *ownership
	tl             *tally
	watch          *offsetWatch
	producer       *numberedProducer
	topic, groupID string
}

// startGroupRoll starts the broker, creates topic and starts the
// producer, for a roll of group groupID.
func startGroupRoll(t *testing.T, topic, groupID string) *groupRoll {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	r := &groupRoll{b: startBroker(t, cfg), topic: topic, groupID: groupID}
	createTopic(t, r.b, topic, 6, nil)
	r.cl = newClient(t, r.b)
	r.adm = kadm.NewClient(r.cl)
	r.ctx = testContext(t, 3*time.Minute)
	r.own = &ownership{t: t, owner: map[string]string{}}
	r.tl = newTally()
	r.watch = &offsetWatch{t: t, adm: r.adm, groupID: groupID, topic: topic, last: map[int32]int64{}}
	r.producer = startNumberedProducer(t, r.cl, topic)
	return r
}

// finish stops the producer and checks the roll (what names it): every
// record produced was consumed, the committed offsets reached the log
// ends and never went back, checked many times, and no partition was
// owned twice.
func (r *groupRoll) finish(t *testing.T, what string) {
	t.Helper()
	n := r.producer.stop()
	waitFor(t, r.ctx, "every record produced to be consumed", func() bool {
		r.watch.check(r.ctx)
		return r.tl.distinct() >= n
	})
	r.tl.checkEveryValueConsumed(t, n)
	checkCommittedAtEnds(t, r.ctx, r.adm, r.groupID, r.topic, 6)
	r.watch.next = time.Time{}
	r.watch.check(r.ctx)
	if r.watch.checks < 5 {
		t.Fatalf("the committed offsets were checked %d times, want many", r.watch.checks)
	}
	if r.own.double.Load() != 0 {
		t.Fatalf("%d partitions were owned by two consumers at once", r.own.double.Load())
	}
	t.Logf("%d records produced and consumed (%d distinct values seen) across the %s; offsets checked %d times", n, r.tl.distinct(), what, r.watch.checks)
}

// TestClassicGroupUpgradesAsMembersRoll is KIP-848's online upgrade: a
// classic group of three consumers (cooperative-sticky, franz-go's
// default, or the eager range balancer) reads a six-partition topic
// while a producer writes to it; each is replaced in turn by a consumer
// of the consumer protocol. The first to join turns the group into a
// consumer-protocol group whose classic members stay and are assigned by
// the coordinator through SyncGroup; at every step all partitions are
// assigned and no partition is owned twice; at the end the group is a
// consumer-protocol group of three, every record produced was consumed,
// and no committed offset ever went back.
func TestClassicGroupUpgradesAsMembersRoll(t *testing.T) {
	t.Run("cooperative-sticky", func(t *testing.T) { testUpgradeRoll(t) })
	t.Run("range", func(t *testing.T) { testUpgradeRoll(t, kgo.Balancers(kgo.RangeBalancer())) })
}

// testUpgradeRoll is TestClassicGroupUpgradesAsMembersRoll with classic
// consumers of balancer.
func testUpgradeRoll(t *testing.T, balancer ...kgo.Opt) {
	r := startGroupRoll(t, "rolling", "rollers")
	b, cl, adm, ctx, own, tl, watch, topic, groupID := r.b, r.cl, r.adm, r.ctx, r.own, r.tl, r.watch, r.topic, r.groupID

	classic := make([]*consumer848, 3)
	for i := range classic {
		classic[i] = startGroupConsumer(t, b, fmt.Sprintf("classic-%d", i), groupID, own, tl, classicOpts(topic, balancer...)...)
	}
	waitFor(t, ctx, "a Stable classic group of three, every partition assigned and records consumed", func() bool {
		watch.check(ctx)
		stable, members, parts := classicMembers(ctx, adm, groupID)
		return stable && members == 3 && parts == 6 && tl.distinct() > 0
	})

	for i := range classic {
		startConsumer848(t, b, fmt.Sprintf("modern-%d", i), groupID, own, tl, kgo.ConsumeTopics(topic))
		waitFor(t, ctx, fmt.Sprintf("modern-%d to join: %d classic and %d consumer-protocol members, Stable", i, 3-i, i+1), func() bool {
			watch.check(ctx)
			stable, c, m, parts := mixedMembers(t, ctx, cl, groupID)
			return stable && c == 3-i && m == i+1 && parts == 6
		})
		if i == 0 {
			if described, _ := adm.DescribeGroups(ctx, groupID); !errors.Is(described[groupID].Err, kerr.GroupIDNotFound) {
				t.Fatalf("DescribeGroups of the upgraded group: got %v, want GROUP_ID_NOT_FOUND (a consumer-protocol group)", described[groupID].Err)
			}
		}
		classic[i].close()
		waitFor(t, ctx, fmt.Sprintf("classic-%d to leave: %d classic and %d consumer-protocol members, Stable", i, 2-i, i+1), func() bool {
			watch.check(ctx)
			stable, c, m, parts := mixedMembers(t, ctx, cl, groupID)
			return stable && c == 2-i && m == i+1 && parts == 6
		})
	}

	r.finish(t, "upgrade")
}

// TestConsumerGroupDowngradesAsMembersRoll is the reverse roll: a group
// of three consumer-protocol members is replaced one by one by classic
// consumers (cooperative-sticky or range), which join it as classic
// members; when the last consumer-protocol member leaves, the group
// becomes a classic group again and rebalances; every record is consumed
// and no committed offset goes back.
func TestConsumerGroupDowngradesAsMembersRoll(t *testing.T) {
	t.Run("cooperative-sticky", func(t *testing.T) { testDowngradeRoll(t) })
	t.Run("range", func(t *testing.T) { testDowngradeRoll(t, kgo.Balancers(kgo.RangeBalancer())) })
}

// testDowngradeRoll is TestConsumerGroupDowngradesAsMembersRoll with
// classic consumers of balancer.
func testDowngradeRoll(t *testing.T, balancer ...kgo.Opt) {
	r := startGroupRoll(t, "unrolling", "unrollers")
	b, cl, adm, ctx, own, tl, watch, topic, groupID := r.b, r.cl, r.adm, r.ctx, r.own, r.tl, r.watch, r.topic, r.groupID

	modern := make([]*consumer848, 3)
	for i := range modern {
		modern[i] = startConsumer848(t, b, fmt.Sprintf("modern-%d", i), groupID, own, tl, kgo.ConsumeTopics(topic))
	}
	waitFor(t, ctx, "a Stable consumer-protocol group of three", func() bool {
		watch.check(ctx)
		stable, c, m, parts := mixedMembers(t, ctx, cl, groupID)
		return stable && c == 0 && m == 3 && parts == 6 && tl.distinct() > 0
	})
	for i := range modern {
		startGroupConsumer(t, b, fmt.Sprintf("classic-%d", i), groupID, own, tl, classicOpts(topic, balancer...)...)
		waitFor(t, ctx, fmt.Sprintf("classic-%d to join as a classic member", i), func() bool {
			watch.check(ctx)
			stable, c, m, parts := mixedMembers(t, ctx, cl, groupID)
			return stable && c == i+1 && m == 3-i && parts == 6
		})
		modern[i].close()
		if i == len(modern)-1 {
			break
		}
		waitFor(t, ctx, fmt.Sprintf("modern-%d to leave", i), func() bool {
			watch.check(ctx)
			stable, c, m, parts := mixedMembers(t, ctx, cl, groupID)
			return stable && c == i+1 && m == 2-i && parts == 6
		})
	}
	waitFor(t, ctx, "a Stable classic group of the three classic members", func() bool {
		watch.check(ctx)
		stable, members, parts := classicMembers(ctx, adm, groupID)
		return stable && members == 3 && parts == 6
	})
	if d := describe848(t, ctx, cl, groupID); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of the downgraded group: got %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode))
	}

	r.finish(t, "downgrade")
}

// TestMixedGroupSurvivesRestart restarts the coordinator's broker under a
// group upgraded while two classic members consume: the coordinator
// that loads __consumer_offsets again rebuilds the consumer-protocol
// group with its classic members (their ClassicMemberMetadata stored
// with them), epochs and assignments.
func TestMixedGroupSurvivesRestart(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	cfg.GroupConsumerMaxSessionTimeout = 30 * time.Second
	cfg.GroupConsumerSessionTimeout = 30 * time.Second
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	const topic, groupID = "restarted", "survivors"
	createTopic(t, b, topic, 4, nil)
	producer := newClient(t, b)
	produceNumbered(t, producer, topic, 0, 400)
	ctx := testContext(t, 2*time.Minute)
	own := &ownership{t: t, owner: map[string]string{}}
	tl := newTally()
	long := append(classicOpts(topic), kgo.SessionTimeout(30*time.Second))
	c1 := startGroupConsumer(t, b, "classic-1", groupID, own, tl, long...)
	c2 := startGroupConsumer(t, b, "classic-2", groupID, own, tl, long...)
	m := startConsumer848(t, b, "modern", groupID, own, tl, kgo.ConsumeTopics(topic))
	waitFor(t, ctx, "a Stable group of two classic members and one of the consumer protocol", func() bool {
		stable, c, n, parts := mixedMembers(t, ctx, producer, groupID)
		return stable && c == 2 && n == 1 && parts == 4 && tl.distinct() == 400
	})
	before := describe848(t, ctx, producer, groupID)
	for _, c := range []*consumer848{c1, c2, m} {
		c.stop()
		<-c.done
	}
	producer.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	b = startBroker(t, cfg)
	admin := newClient(t, b)
	waitFor(t, ctx, "the group to be loaded back", func() bool { return describe848(t, ctx, admin, groupID).ErrorCode == 0 })
	after := describe848(t, ctx, admin, groupID)
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 3 {
		t.Fatalf("after the restart: got epoch %d assignment epoch %d and %d members, want %d, %d and 3",
			after.Epoch, after.AssignmentEpoch, len(after.Members), before.Epoch, before.AssignmentEpoch)
	}
	for i, m := range after.Members {
		w := before.Members[i]
		if m.MemberID != w.MemberID || m.MemberType != w.MemberType || m.MemberEpoch != w.MemberEpoch ||
			fmt.Sprint(m.Assignment.TopicPartitions) != fmt.Sprint(w.Assignment.TopicPartitions) {
			t.Fatalf("member %d after the restart: got %s type %d epoch %d %v, want %s type %d epoch %d %v", i,
				m.MemberID, m.MemberType, m.MemberEpoch, m.Assignment.TopicPartitions, w.MemberID, w.MemberType, w.MemberEpoch, w.Assignment.TopicPartitions)
		}
	}
}

// TestUpgradeRefusedAtMaxSize: a classic group already at
// group.consumer.max.size members is not upgraded by a
// consumer-protocol join, which gets GROUP_MAX_SIZE_REACHED, as in
// Kafka; the classic group keeps its member.
func TestUpgradeRefusedAtMaxSize(t *testing.T) {
	cfg := groupTestConfig(t)
	fastConsumerGroups(&cfg)
	cfg.GroupConsumerMaxSize = 1
	b := startBroker(t, cfg)
	const topic, groupID = "full", "full-group"
	createTopic(t, b, topic, 2, nil)
	cl := newClient(t, b)
	produceNumbered(t, cl, topic, 0, 10)
	ctx := testContext(t, time.Minute)
	tl := newTally()
	startGroupConsumer(t, b, "classic", groupID, &ownership{t: t, owner: map[string]string{}}, tl, classicOpts(topic)...)
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "a Stable classic group of one", func() bool {
		stable, members, _ := classicMembers(ctx, adm, groupID)
		return stable && members == 1
	})
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = groupID, "one-too-many", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 10000, []string{topic}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb); resp.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("ConsumerGroupHeartbeat to a classic group at the maximum size: got %v (%v), want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	if stable, members, _ := classicMembers(ctx, adm, groupID); !stable || members != 1 {
		t.Fatalf("the classic group after the refusal: stable %v with %d members, want its one member", stable, members)
	}
}
