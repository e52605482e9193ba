package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsByTimestampWithinABatch: ten records produced in one
// batch, a second apart; a by-timestamp query finds the first record at or
// after the time and its timestamp, as Kafka does, not the batch.
func TestListOffsetsByTimestampWithinABatch(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "by-time"
	createTopic(t, b, topic, 1, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ManualFlushing())
	ctx := testContext(t, time.Minute)

	base := time.UnixMilli(1_800_000_000_000)
	results := make(chan error, 10)
	for i := range 10 {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for range 10 {
		if err := <-results; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	data, err := b.replicas.PartitionFor(topic, 0).Log().Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(data); err != nil || rb.NumRecords != 10 || len(data) != int(rb.Length)+12 {
		t.Fatalf("the log holds %d bytes, first batch %d records (error %v); want one batch of 10", len(data), rb.NumRecords, err)
	}

	nc := dialBroker(t, b)
	for i, tc := range []struct {
		timestamp              int64
		wantOffset, wantMillis int64
	}{
		{base.UnixMilli(), 0, base.UnixMilli()},
		{base.Add(3 * time.Second).UnixMilli(), 3, base.Add(3 * time.Second).UnixMilli()},
		{base.Add(2500 * time.Millisecond).UnixMilli(), 3, base.Add(3 * time.Second).UnixMilli()},
		{base.Add(9 * time.Second).UnixMilli(), 9, base.Add(9 * time.Second).UnixMilli()},
		{base.Add(9*time.Second + time.Millisecond).UnixMilli(), -1, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(9)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = tc.timestamp, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		got := roundTrip(t, nc, req, int32(100+i)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != tc.wantOffset || got.Timestamp != tc.wantMillis {
			t.Errorf("ListOffsets v9 timestamp %d: got error %d, offset %d, timestamp %d; want 0, %d, %d",
				tc.timestamp, got.ErrorCode, got.Offset, got.Timestamp, tc.wantOffset, tc.wantMillis)
		}
	}
}

// TestListOffsetsFromTheDebuggingReplicaID: on three brokers, a topic of
// replication factor 3 with ten records. A ListOffsets from Kafka's
// debugging replica id (-2) is answered by a follower as by the leader,
// and its latest is each replica's log end offset; from a consumer (-1)
// the follower answers NOT_LEADER_OR_FOLLOWER and the leader answers the
// high watermark. tripod's console reads each replica's LEO so.
func TestListOffsetsFromTheDebuggingReplicaID(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, time.Minute)
	const topic = "replica-leo"
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if created, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || created.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, created.Err)
	}
	producer := newClient(t, brokers[0], kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 10 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	_, _, parts := metadataOf(t, brokers[0], topic)
	if len(parts) != 1 {
		t.Fatalf("metadata of %s: %d partitions, want 1", topic, len(parts))
	}
	leader := parts[0].leader

	listLatest := func(b *Broker, replicaID int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = replicaID
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return askBroker[*kmsg.ListOffsetsResponse](t, b, req).Topics[0].Partitions[0]
	}
	for _, b := range brokers {
		// acks=all: every replica in the ISR has the ten records, so
		// each one's LEO is 10 (a follower's at most one fetch later).
		waitFor(t, ctx, fmt.Sprintf("broker %d's replica to answer LEO 10 to the debugging replica id", b.ID()), func() bool {
			got := listLatest(b, -2)
			return got.ErrorCode == 0 && got.Offset == 10
		})
		got := listLatest(b, -1)
		switch {
		case b.ID() == leader && (got.ErrorCode != 0 || got.Offset != 10):
			t.Errorf("leader %d, consumer's latest: got error %d, offset %d; want 0, 10 (the HW)", b.ID(), got.ErrorCode, got.Offset)
		case b.ID() != leader && got.ErrorCode != kerr.NotLeaderForPartition.Code:
			t.Errorf("follower %d, consumer's latest: got error %d, want NOT_LEADER_OR_FOLLOWER", b.ID(), got.ErrorCode)
		}
	}
}
