package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Group consumers of two more unmodified client libraries, IBM/sarama
// and segmentio/kafka-go, against the classic group coordinator: they
// join, split and hand over partitions, commit and resume where they
// committed.

// safeLogf returns a t.Logf that goes quiet once the test has finished,
// for client libraries that may log from their own goroutines.
func safeLogf(t *testing.T) func(format string, args ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	})
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Helper()
			t.Logf(format, args...)
		}
	}
}

// tally counts the records every member of a group consumed, by value,
// to show that each was consumed exactly once between them.
type tally struct {
	mu   sync.Mutex
	seen map[string]int
}

func newTally() *tally { return &tally{seen: map[string]int{}} }

func (tl *tally) add(value []byte) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.seen[string(value)]++
}

// distinct returns how many different values were consumed.
func (tl *tally) distinct() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.seen)
}

// checkExactlyOnce fails unless the values "0".."n-1" were each consumed
// exactly once and nothing else was.
func (tl *tally) checkExactlyOnce(t *testing.T, n int) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var dups, missing []string
	for i := range n {
		v := strconv.Itoa(i)
		switch c := tl.seen[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1:
			dups = append(dups, fmt.Sprintf("%s×%d", v, c))
		}
	}
	if len(dups) > 0 || len(missing) > 0 || len(tl.seen) != n {
		t.Fatalf("consumed %d distinct values, want %d; duplicates %v; missing %v", len(tl.seen), n, dups, missing)
	}
}

// checkCommittedAtEnds waits until the group's committed offsets of
// topic are each partition's end offset.
func checkCommittedAtEnds(t *testing.T, ctx context.Context, adm *kadm.Client, groupID, topic string, partitions int) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	var got map[int32]int64
	waitFor(t, ctx, "the committed offsets to reach every partition's end", func() bool {
		got = committed(t, adm, groupID, topic)
		ok := len(got) == partitions
		ends.Each(func(o kadm.ListedOffset) { ok = ok && got[o.Partition] == o.Offset })
		return ok
	})
	t.Logf("committed offsets of %s: %v", groupID, got)
}

// describedAssignment returns the group's state and each member's
// assigned partitions of topic, sorted, by member ID.
func describedAssignment(t *testing.T, ctx context.Context, adm *kadm.Client, groupID, topic string) (string, map[string][]int32) {
	t.Helper()
	described, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		t.Fatalf("describe group %s: %v", groupID, err)
	}
	dg := described[groupID]
	if dg.Err != nil {
		t.Fatalf("describe group %s: %v", groupID, dg.Err)
	}
	out := map[string][]int32{}
	for _, m := range dg.Members {
		var ps []int32
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range c.Topics {
				if at.Topic == topic {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		slices.Sort(ps)
		out[m.MemberID] = ps
	}
	return dg.State, out
}

// saramaVersion is the Kafka version sarama is told the broker is:
// tripod's API ranges are Kafka 4.0's (no Produce below v3, no Fetch
// below v4), and sarama still clamps each request to what ApiVersions
// advertised (sarama.MaxVersion, 4.3.1, passes as well). It sends
// ApiVersions v4, which tripod answers with UNSUPPORTED_VERSION and its
// ranges; sarama retries with v3, as Kafka clients do.
var saramaVersion = sarama.V4_0_0_0

var saramaLoggerOnce sync.Once

// saramaConfig is a consumer group configuration with the timings made
// short enough for tests, committing manually.
func saramaConfig(strategy sarama.BalanceStrategy) *sarama.Config {
	if os.Getenv("TRIPOD_TEST_LOG") != "" {
		saramaLoggerOnce.Do(func() { sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds) })
	}
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "tripod-sarama-test"
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 3 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	return cfg
}

// saramaMember is one sarama.ConsumerGroup consuming a topic, marking
// every message and committing after each batch and when it gives a
// partition up.
type saramaMember struct {
	cg    sarama.ConsumerGroup
	tally *tally
	logf  func(string, ...any)

	mu sync.Mutex
	// claimed is the partitions whose ConsumeClaim is running.
	claimed map[int32]bool
	// consumed counts the records this member consumed.
	consumed int
	// sessions counts the sessions (generations) this member had.
	sessions int

	done, errsDone chan struct{}
}

func startSaramaMember(t *testing.T, b *Broker, groupID, topic string, strategy sarama.BalanceStrategy, tl *tally) *saramaMember {
	t.Helper()
	cg, err := sarama.NewConsumerGroup([]string{b.Addr().String()}, groupID, saramaConfig(strategy))
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	m := &saramaMember{cg: cg, tally: tl, logf: safeLogf(t), claimed: map[int32]bool{}, done: make(chan struct{}), errsDone: make(chan struct{})}
	go func() {
		defer close(m.errsDone)
		for err := range cg.Errors() {
			m.logf("sarama group error: %v", err)
		}
	}()
	go func() {
		defer close(m.done)
		for {
			err := cg.Consume(context.Background(), []string{topic}, m)
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			if err != nil {
				m.logf("sarama consume: %v", err)
			}
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop closes the member (it leaves the group) and waits for its
// goroutines; it may be called more than once.
func (m *saramaMember) stop(t *testing.T) {
	t.Helper()
	if err := m.cg.Close(); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		t.Errorf("close sarama group: %v", err)
	}
	<-m.done
	<-m.errsDone
}

func (m *saramaMember) Setup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions++
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := claim.Partition()
	m.mu.Lock()
	m.claimed[p] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.claimed, p)
	}()
	// Whatever was marked is committed before the partition is given up,
	// so its next owner starts right after it.
	defer sess.Commit()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.tally.add(msg.Value)
			m.mu.Lock()
			m.consumed++
			m.mu.Unlock()
			sess.MarkMessage(msg, "")
			if len(claim.Messages()) == 0 {
				sess.Commit()
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// sessionCount returns how many sessions (generations) the member had.
func (m *saramaMember) sessionCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions
}

// partitions returns the partitions the member is consuming.
func (m *saramaMember) partitions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.claimed)
}

func (m *saramaMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumed
}

// TestSaramaConsumerGroup runs two sarama.ConsumerGroup members on a
// 4-partition topic, with the eager range assignor and with the
// cooperative sticky one: the first takes every partition, the second
// joining splits them, the first leaving hands them all to the second,
// every record is consumed exactly once between them, and after both
// close the committed offsets are each partition's end.
func TestSaramaConsumerGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy func() sarama.BalanceStrategy
	}{
		{"range", sarama.NewBalanceStrategyRange},
		{"cooperative-sticky", sarama.NewBalanceStrategyCooperativeSticky},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, groupTestConfig(t))
			const topic, groupID = "sarama-orders", "sarama-billing"
			createTopic(t, b, topic, 4, nil)
			producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
			adm := kadm.NewClient(newClient(t, b))
			tl := newTally()
			ctx := testContext(t, time.Minute)

			produceNumbered(t, producer, topic, 0, 400)
			m1 := startSaramaMember(t, b, groupID, topic, tc.strategy(), tl)
			waitFor(t, ctx, "the first member to take all 4 partitions and consume 400 records", func() bool {
				return m1.partitions() == 4 && tl.distinct() == 400
			})

			m2 := startSaramaMember(t, b, groupID, topic, tc.strategy(), tl)
			waitFor(t, ctx, "the two members to split the 4 partitions", func() bool {
				return m1.partitions() == 2 && m2.partitions() == 2
			})
			var state string
			var assigned map[string][]int32
			waitFor(t, ctx, "the group to be described Stable with two members of 2 partitions", func() bool {
				state, assigned = describedAssignment(t, ctx, adm, groupID, topic)
				if state != "Stable" || len(assigned) != 2 {
					return false
				}
				for _, ps := range assigned {
					if len(ps) != 2 {
						return false
					}
				}
				return true
			})
			t.Logf("two members: %v", assigned)

			produceNumbered(t, producer, topic, 400, 400)
			waitFor(t, ctx, "the two members to consume the next 400", func() bool { return tl.distinct() == 800 })
			if m2.count() == 0 {
				t.Fatalf("the second member consumed nothing of the 400 produced after it joined")
			}

			m1.stop(t)
			waitFor(t, ctx, "the second member to take all 4 partitions", func() bool { return m2.partitions() == 4 })
			produceNumbered(t, producer, topic, 800, 200)
			waitFor(t, ctx, "the second member alone to consume the last 200", func() bool { return tl.distinct() == 1000 })
			m2.stop(t)

			tl.checkExactlyOnce(t, 1000)
			t.Logf("member 1 consumed %d in %d sessions, member 2 %d in %d sessions", m1.count(), m1.sessionCount(), m2.count(), m2.sessionCount())
			checkCommittedAtEnds(t, ctx, adm, groupID, topic, 4)
			waitFor(t, ctx, "the group to be Empty", func() bool {
				state, _ = describedAssignment(t, ctx, adm, groupID, topic)
				return state == "Empty"
			})

			// A new member resumes at the committed offsets.
			produceNumbered(t, producer, topic, 1000, 40)
			resumed := newTally()
			m3 := startSaramaMember(t, b, groupID, topic, tc.strategy(), resumed)
			waitFor(t, ctx, "a new member to consume the 40 records produced after the commit", func() bool { return resumed.distinct() == 40 })
			m3.stop(t)
			resumed.mu.Lock()
			defer resumed.mu.Unlock()
			for v, c := range resumed.seen {
				if n, _ := strconv.Atoi(v); n < 1000 || c != 1 {
					t.Fatalf("the new member consumed %q %d times; want only records produced after the commit, once", v, c)
				}
			}
		})
	}
}

// kafkaGoReader is a kafka.Reader of a group, fetching messages and
// committing each with CommitMessages.
type kafkaGoReader struct {
	r      *kafka.Reader
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	consumed int
}

func startKafkaGoReader(t *testing.T, b *Broker, groupID, topic string, tl *tally) *kafkaGoReader {
	t.Helper()
	logf := safeLogf(t)
	rc := kafka.ReaderConfig{
		Brokers:           []string{b.Addr().String()},
		GroupID:           groupID,
		Topic:             topic,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    3 * time.Second,
		RebalanceTimeout:  5 * time.Second,
		JoinGroupBackoff:  100 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    100 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		// Zero: CommitMessages commits synchronously.
		CommitInterval: 0,
		ErrorLogger:    kafka.LoggerFunc(func(f string, a ...any) { logf("kafka-go error: "+f, a...) }),
	}
	if os.Getenv("TRIPOD_TEST_LOG") != "" {
		rc.Logger = kafka.LoggerFunc(func(f string, a ...any) { logf("kafka-go: "+f, a...) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	kr := &kafkaGoReader{r: kafka.NewReader(rc), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(kr.done)
		for {
			msg, err := kr.r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, io.EOF) {
					logf("kafka-go fetch: %v", err)
				}
				return
			}
			tl.add(msg.Value)
			kr.mu.Lock()
			kr.consumed++
			kr.mu.Unlock()
			if err := kr.r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
				logf("kafka-go commit %s/%d@%d: %v", msg.Topic, msg.Partition, msg.Offset, err)
			}
		}
	}()
	t.Cleanup(func() { kr.stop(t) })
	return kr
}

// stop closes the reader (it leaves the group) and waits for its loop;
// it may be called more than once.
func (kr *kafkaGoReader) stop(t *testing.T) {
	t.Helper()
	if err := kr.r.Close(); err != nil {
		t.Errorf("close kafka-go reader: %v", err)
	}
	kr.cancel()
	<-kr.done
}

func (kr *kafkaGoReader) count() int {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return kr.consumed
}

// TestKafkaGoReaderGroup runs segmentio/kafka-go Readers with a GroupID
// on a 4-partition topic: one reads and commits everything, a second
// joining splits the partitions with it, the first leaving hands them
// all to the second, every record is consumed exactly once, the
// committed offsets end at each partition's end and a new reader
// resumes there.
func TestKafkaGoReaderGroup(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	const topic, groupID = "kafkago-orders", "kafkago-billing"
	createTopic(t, b, topic, 4, nil)
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(newClient(t, b))
	tl := newTally()
	ctx := testContext(t, time.Minute)

	produceNumbered(t, producer, topic, 0, 400)
	r1 := startKafkaGoReader(t, b, groupID, topic, tl)
	waitFor(t, ctx, "the first reader to consume 400 records", func() bool { return tl.distinct() == 400 })
	checkCommittedAtEnds(t, ctx, adm, groupID, topic, 4)

	r2 := startKafkaGoReader(t, b, groupID, topic, tl)
	var assigned map[string][]int32
	waitFor(t, ctx, "the group to be Stable with two readers of 2 partitions", func() bool {
		var state string
		state, assigned = describedAssignment(t, ctx, adm, groupID, topic)
		if state != "Stable" || len(assigned) != 2 {
			return false
		}
		for _, ps := range assigned {
			if len(ps) != 2 {
				return false
			}
		}
		return true
	})
	t.Logf("two readers: %v", assigned)
	produceNumbered(t, producer, topic, 400, 400)
	waitFor(t, ctx, "the two readers to consume the next 400", func() bool { return tl.distinct() == 800 })
	if r2.count() == 0 {
		t.Fatalf("the second reader consumed nothing of the 400 produced after it joined")
	}
	checkCommittedAtEnds(t, ctx, adm, groupID, topic, 4)

	r1.stop(t)
	waitFor(t, ctx, "the second reader to be the only member, with all 4 partitions", func() bool {
		state, a := describedAssignment(t, ctx, adm, groupID, topic)
		if state != "Stable" || len(a) != 1 {
			return false
		}
		for _, ps := range a {
			return len(ps) == 4
		}
		return false
	})
	produceNumbered(t, producer, topic, 800, 200)
	waitFor(t, ctx, "the second reader alone to consume the last 200", func() bool { return tl.distinct() == 1000 })
	// CommitMessages is synchronous but runs after the record is
	// counted: the last commits may still be in flight.
	checkCommittedAtEnds(t, ctx, adm, groupID, topic, 4)
	r2.stop(t)

	tl.checkExactlyOnce(t, 1000)
	t.Logf("reader 1 consumed %d, reader 2 %d", r1.count(), r2.count())
	checkCommittedAtEnds(t, ctx, adm, groupID, topic, 4)

	produceNumbered(t, producer, topic, 1000, 40)
	resumed := newTally()
	r3 := startKafkaGoReader(t, b, groupID, topic, resumed)
	waitFor(t, ctx, "a new reader to consume the 40 records produced after the commit", func() bool { return resumed.distinct() == 40 })
	r3.stop(t)
	resumed.mu.Lock()
	defer resumed.mu.Unlock()
	for v, c := range resumed.seen {
		if n, _ := strconv.Atoi(v); n < 1000 || c != 1 {
			t.Fatalf("the new reader consumed %q %d times; want only records produced after the commit, once", v, c)
		}
	}
}

// TestSaramaOffsetsOnlyGroup is sarama's functional test
// TestFuncAdminDeleteGroup: a group that only commits offsets, with no
// member and generation -1 (sarama's OffsetManager), is listed by
// ListGroups as Kafka lists its Empty group, and DeleteGroups deletes it
// with its offsets.
func TestSaramaOffsetsOnlyGroup(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	const topic, groupID = "sarama-ledger", "sarama-offsets-only"
	createTopic(t, b, topic, 1, nil)

	client, err := sarama.NewClient([]string{b.Addr().String()}, saramaConfig(sarama.NewBalanceStrategyRange()))
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(groupID, client)
	if err != nil {
		t.Fatalf("sarama offset manager: %v", err)
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		t.Fatalf("manage partition: %v", err)
	}
	pom.MarkOffset(1, "")
	// Closed first, so that the commit releases it.
	pom.AsyncClose()
	om.Commit()
	if err := pom.Close(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := om.Close(); err != nil {
		t.Fatalf("close offset manager: %v", err)
	}

	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, ok := groups[groupID]; !ok {
		t.Fatalf("got groups %v, want %s among them", groups, groupID)
	}
	described, err := admin.DescribeConsumerGroups([]string{groupID})
	if err != nil || len(described) != 1 {
		t.Fatalf("describe group: got %v, %v", described, err)
	}
	if got := described[0]; got.Err != sarama.ErrNoError || got.State != "Empty" {
		t.Fatalf("described group: got state %q, error %v; want Empty, no error", got.State, got.Err)
	}

	if err := admin.DeleteConsumerGroup(groupID); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	groups, err = admin.ListConsumerGroups()
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, ok := groups[groupID]; ok {
		t.Fatalf("got groups %v after the delete, want %s gone", groups, groupID)
	}
	offsets, err := admin.ListConsumerGroupOffsets(groupID, map[string][]int32{topic: {0}})
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if got := offsets.GetBlock(topic, 0); got == nil || got.Offset != -1 {
		t.Fatalf("got committed offset %+v after the delete, want -1", got)
	}
}
