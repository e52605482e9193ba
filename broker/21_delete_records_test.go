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
)

// TestDeleteRecordsOnThreeReplicas deletes the start of a replication
// factor 3 partition through kadm, as an operator would: bad input
// (an offset above the high watermark, an unknown partition, a broker
// that does not lead) is refused and moves nothing; a delete to offset
// 40 is answered with low watermark 40 once every replica's log starts
// there, a consumer from the earliest offset reads exactly the records
// from 40 on, a fetch below gets OFFSET_OUT_OF_RANGE, and the segments
// below go at the next retention check on every replica (their
// DescribeLogDirs sizes shrink). The idempotent producer shows up in
// DescribeProducers at the leader. The leader is then stopped: the new
// leader keeps log start 40, the old one reopens with it, and a delete
// to the high watermark (-1) moves all three to the log end.
func TestDeleteRecordsOnThreeReplicas(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaLagTimeMax = 10 * time.Second
		c.LogRetentionCheckInterval = 50 * time.Millisecond
	})
	ctx := testContext(t, 3*time.Minute)
	const topic = "deleted"
	seeds := make([]string, len(brokers))
	for i, b := range brokers {
		seeds[i] = b.Addr().String()
	}
	cl := newSeededClient(t, seeds, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")}, topic)
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	})
	waitFor(t, ctx, "every broker to hold the partition with a full ISR", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		return len(parts) == 1 && len(parts[0].isr) == 3 && !slices.Contains(brokers, nil) &&
			!slices.ContainsFunc(brokers, func(b *Broker) bool { return b.replicas.PartitionFor(topic, 0) == nil })
	})
	const records = 100
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "record-%03d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	waitFor(t, ctx, "every replica's high watermark at the log end", func() bool {
		return !slices.ContainsFunc(brokers, func(b *Broker) bool { return b.replicas.PartitionFor(topic, 0).HighWatermark() != records })
	})
	logStarts := func(of []*Broker) []int64 {
		var out []int64
		for _, b := range of {
			out = append(out, b.replicas.PartitionFor(topic, 0).Log().StartOffset())
		}
		return out
	}
	leaderOf := func(from *Broker) *Broker {
		_, _, parts := metadataOf(t, from, topic)
		i := slices.IndexFunc(brokers, func(b *Broker) bool { return len(parts) == 1 && b.ID() == parts[0].leader })
		if i < 0 {
			return nil
		}
		return brokers[i]
	}
	leader := leaderOf(brokers[0])
	follower := brokers[slices.IndexFunc(brokers, func(b *Broker) bool { return b != leader })]

	// Bad input changes nothing.
	bad := kadm.Offsets{}
	bad.Add(kadm.Offset{Topic: topic, Partition: 0, At: records + 1})
	if err := deleteRecordsErr(ctx, adm, bad, topic, 0); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Errorf("delete to offset %d above the high watermark: got %v, want %v", records+1, err, kerr.OffsetOutOfRange)
	}
	unknown := kmsg.NewPtrDeleteRecordsRequest()
	unknown.TimeoutMillis = 5000
	unknown.Topics = []kmsg.DeleteRecordsRequestTopic{
		{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 7, Offset: 10}}},
		{Topic: "no-such-topic", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 10}}},
	}
	for _, rt := range askBroker[*kmsg.DeleteRecordsResponse](t, leader, unknown).Topics {
		if code := rt.Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("delete records of %s-%d: got %v, want %v", rt.Topic, rt.Partitions[0].Partition, kerr.ErrorForCode(code), kerr.UnknownTopicOrPartition)
		}
	}
	atFollower := kmsg.NewPtrDeleteRecordsRequest()
	atFollower.TimeoutMillis = 5000
	atFollower.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 10}}}}
	if code := askBroker[*kmsg.DeleteRecordsResponse](t, follower, atFollower).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("delete records at follower %d: got %v, want %v", follower.ID(), kerr.ErrorForCode(code), kerr.NotLeaderForPartition)
	}
	if got := logStarts(brokers); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Fatalf("log starts after refused deletes: got %v, want [0 0 0]", got)
	}

	sizesBefore := replicaSizes(t, ctx, adm, topic)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 40})
	start := time.Now()
	resps, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	t.Logf("delete records to 40 answered in %v", time.Since(start).Round(time.Millisecond))
	if r, ok := resps.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("delete records to 40: got %+v, want low watermark 40 and no error", r)
	}
	// The answer waited for every ISR member's log start.
	if got := logStarts(brokers); !slices.Equal(got, []int64{40, 40, 40}) {
		t.Fatalf("log starts once the delete is answered: got %v, want [40 40 40]", got)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	if o, ok := starts.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != 40 {
		t.Fatalf("earliest offset after the delete: got %+v, want 40", o)
	}
	got := consumeFromStart(t, ctx, seeds, topic, records-40)
	for i, r := range got {
		if want := fmt.Sprintf("record-%03d", 40+i); r.Offset != int64(40+i) || string(r.Value) != want {
			t.Fatalf("record %d from the earliest offset: got %q at %d, want %q at %d", i, r.Value, r.Offset, want, 40+i)
		}
	}
	below := kmsg.NewPtrFetchRequest()
	below.ReplicaID = -1
	below.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 10, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}}}
	if code := askBroker[*kmsg.FetchResponse](t, leader, below).Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at offset 10 below the log start: got %v, want %v", kerr.ErrorForCode(code), kerr.OffsetOutOfRange)
	}
	waitFor(t, ctx, "retention to delete the segments below the log start on every replica", func() bool {
		after := replicaSizes(t, ctx, adm, topic)
		for id, before := range sizesBefore {
			if after[id] >= before {
				return false
			}
		}
		return true
	})

	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("producer id: %v", err)
	}
	dp := producers[topic].Partitions[0]
	if dp.Err != nil || len(dp.ActiveProducers) != 1 {
		t.Fatalf("describe producers of %s-0: got %+v, want one active producer", topic, dp)
	}
	for _, ap := range dp.ActiveProducers {
		if ap.ProducerID != id || ap.ProducerEpoch != epoch || ap.LastSequence != records-1 || ap.CoordinatorEpoch != -1 || ap.CurrentTxnStartOffset != -1 || ap.LastTimestamp <= 0 {
			t.Errorf("active producer: got %+v, want id %d epoch %d last sequence %d, coordinator epoch -1, no transaction", ap, id, epoch, records-1)
		}
	}
	describeAtFollower := kmsg.NewPtrDescribeProducersRequest()
	describeAtFollower.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0, 7}}}
	fps := askBroker[*kmsg.DescribeProducersResponse](t, follower, describeAtFollower).Topics[0].Partitions
	if len(fps) != 2 || fps[0].ErrorCode != kerr.NotLeaderForPartition.Code || fps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("describe producers of partitions 0 and 7 at follower %d: got %+v, want NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION", follower.ID(), fps)
	}

	// The leader stops: another takes over with the same log start.
	cfg := leader.cfg
	if err := leader.Close(); err != nil {
		t.Fatalf("close leader %d: %v", leader.ID(), err)
	}
	var rest []*Broker
	for _, b := range brokers {
		if b != leader {
			rest = append(rest, b)
		}
	}
	waitFor(t, ctx, "a new leader", func() bool {
		nl := leaderOf(rest[0])
		return nl != nil && nl != leader
	})
	if got := logStarts(rest); !slices.Equal(got, []int64{40, 40}) {
		t.Fatalf("log starts of the remaining replicas: got %v, want [40 40]", got)
	}
	restAdm := kadm.NewClient(newSeededClient(t, []string{rest[0].Addr().String(), rest[1].Addr().String()}))
	waitFor(t, ctx, "the new leader to answer earliest offset 40", func() bool {
		starts, err := restAdm.ListStartOffsets(ctx, topic)
		o, ok := starts.Lookup(topic, 0)
		return err == nil && ok && o.Err == nil && o.Offset == 40
	})

	// The old leader reopens its log at the checkpointed log start.
	restarted, err := New(cfg, testLogger(t).Named(fmt.Sprintf("broker-%d-restarted", cfg.BrokerID)))
	if err != nil {
		t.Fatalf("restart broker %d: %v", cfg.BrokerID, err)
	}
	t.Cleanup(func() {
		if err := restarted.Close(); err != nil {
			t.Errorf("close restarted broker %d: %v", cfg.BrokerID, err)
		}
	})
	brokers[slices.Index(brokers, leader)] = restarted
	waitFor(t, ctx, "the restarted broker back in the ISR", func() bool {
		_, _, parts := metadataOf(t, rest[0], topic)
		return restarted.replicas.PartitionFor(topic, 0) != nil && len(parts) == 1 && len(parts[0].isr) == 3
	})
	if got := restarted.replicas.PartitionFor(topic, 0).Log().StartOffset(); got != 40 {
		t.Fatalf("restarted broker %d's log start: got %d, want 40", cfg.BrokerID, got)
	}

	// A delete to the high watermark moves every replica to the log end.
	toHW := kadm.Offsets{}
	toHW.Add(kadm.Offset{Topic: topic, Partition: 0, At: -1})
	resps, err = restAdm.DeleteRecords(ctx, toHW)
	if err != nil {
		t.Fatalf("delete records to the high watermark: %v", err)
	}
	if r, ok := resps.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != records {
		t.Fatalf("delete records to the high watermark: got %+v, want low watermark %d", r, records)
	}
	if got := logStarts(brokers); !slices.Equal(got, []int64{records, records, records}) {
		t.Fatalf("log starts after the delete to the high watermark: got %v, want all %d", got, records)
	}
}

// deleteRecordsErr sends a DeleteRecords through adm and returns the
// partition's error.
func deleteRecordsErr(ctx context.Context, adm *kadm.Client, offsets kadm.Offsets, topic string, partition int32) error {
	resps, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return err
	}
	r, ok := resps.Lookup(topic, partition)
	if !ok {
		return fmt.Errorf("no answer for %s-%d", topic, partition)
	}
	return r.Err
}

// replicaSizes returns the size of topic's partition 0 on each broker,
// from DescribeAllLogDirs.
func replicaSizes(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	all, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("describe all log dirs: %v", err)
	}
	sizes := map[int32]int64{}
	for id, dirs := range all {
		if p, ok := dirs.LookupPartition(topic, 0); ok {
			sizes[id] = p.Size
		}
	}
	if len(sizes) != 3 {
		t.Fatalf("describe all log dirs: partition 0 on brokers %v, want 3", sizes)
	}
	return sizes
}

// newSeededClient returns a franz-go client of seeds, closed when the
// test ends.
func newSeededClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeFromStart reads n records of topic's partition 0 from the
// earliest offset, and checks that no more follow at once.
func consumeFromStart(t *testing.T, ctx context.Context, seeds []string, topic string, n int) []*kgo.Record {
	t.Helper()
	consumer := newSeededClient(t, seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	for len(got) < n {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := consumer.PollFetches(fctx)
		cancel()
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after %d records: %v", len(got), err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	return got
}
